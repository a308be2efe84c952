"""`codemod revert`: back a recipe out of each tree (check out the base, delete the codemod branch)."""

from __future__ import annotations

from pathlib import Path

import typer

from codemods.core.lazy import LazyModule
from codemods.cli.common import PACKAGE_HELP, PYTHON_HELP, REPO_HELP, complete_recipe, notify, say, workspaces

revert_service = LazyModule("codemods.apply.revert")
text = LazyModule("codemods.render.text")


def revert(
    recipe: str = typer.Argument(..., metavar="RECIPE", autocompletion=complete_recipe, help="The recipe id to back out."),
    repo: list[Path] = typer.Option([], "--repo", metavar="PATH", help=REPO_HELP),
    package: list[str] = typer.Option([], "--package", metavar="NAME", help=PACKAGE_HELP),
    python: str | None = typer.Option(None, "--python", metavar="PYTHON", help=PYTHON_HELP),
    keep_commits: bool = typer.Option(False, "--keep-commits", help="Keep your commits on the codemod branch; undo only codemod's with git revert."),
    forget: bool = typer.Option(False, "--forget", help="Installed packages only: drop codemod's record without touching the files."),
    clear_jit_cache: bool = typer.Option(False, "--clear-jit-cache", help="Remove FlashInfer's cached builds of the JIT modules the recipe changed."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check and say what the revert would do (and which JIT builds it would remove); write nothing."),
    recipes_dir: list[Path] = typer.Option([], "--recipes", metavar="DIR", help="Extra folder of recipe .toml files."),
) -> None:
    """Back a recipe out: check out the recorded base and delete the codemod branch.

    Examples:

    \b
      codemod revert sm120-enable --repo ./flashinfer --dry-run
      codemod revert sm120-enable --package flashinfer --clear-jit-cache
    """
    trees = workspaces(repo, package, python)
    reverted = revert_service.revert_many(recipe, trees, keep_commits=keep_commits, forget=forget, notify=notify, dry_run=dry_run)
    for line in text.revert_lines(recipe, reverted):
        say(line)
    for cache in revert_service.jit_caches(recipe, trees, recipes_dir, clear_jit_cache, dry_run):
        for line in text.cache_lines(cache):
            say(line)
