"""`python -m codemods`: the `codemod` command, for a venv whose scripts folder is not on PATH."""

from codemods.cli.app import main

main()
