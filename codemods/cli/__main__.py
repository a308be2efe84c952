from codemods.cli.app import main

main()
