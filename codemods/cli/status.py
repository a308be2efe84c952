"""`codemod status`: which recipes are applied in each tree, on which branch, from which base."""

from __future__ import annotations

from pathlib import Path

import typer

from codemods.core.lazy import LazyModule
from codemods.cli.common import PACKAGE_HELP, PYTHON_HELP, REPO_HELP, Format, out, out_lines, workspaces

document = LazyModule("codemods.render.document")
revert_service = LazyModule("codemods.apply.revert")
text = LazyModule("codemods.render.text")


def status(
    repo: list[Path] = typer.Option([], "--repo", metavar="PATH", help=REPO_HELP),
    package: list[str] = typer.Option([], "--package", metavar="NAME", help=PACKAGE_HELP),
    python: str | None = typer.Option(None, "--python", metavar="PYTHON", help=PYTHON_HELP),
    fmt: Format = typer.Option(Format.text, "--format", metavar="FORMAT", help="text, or json for scripts."),
) -> None:
    """Which recipes are applied, on which branch, from which base, with which commits.

    Examples:

    \b
      codemod status --repo ./flashinfer
      codemod status --package flashinfer --package sglang --format json
    """
    statuses = revert_service.status_many(workspaces(repo, package, python))
    if fmt is Format.json:
        out(document.dumps(document.status_json(statuses)))
    else:
        out_lines(text.status_lines(statuses))
