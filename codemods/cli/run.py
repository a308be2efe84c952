"""`codemod run`: plan a recipe for each tree, show it, and (unless --dry-run) apply it on a branch."""

from __future__ import annotations

from pathlib import Path

import typer

from codemods.core import errors
from codemods.core.lazy import LazyModule
from codemods.cli.common import (
    PACKAGE_HELP, PYTHON_HELP, REPO_HELP, Format, complete_change, complete_recipe, err, notify, out, print_diff, say,
    universe as parse_universe, workspaces,
)

apply_run = LazyModule("codemods.apply.run")
diffs = LazyModule("codemods.render.diff")
document = LazyModule("codemods.render.document")
files = LazyModule("codemods.apply.files")
recipes = LazyModule("codemods.recipes.load")
text = LazyModule("codemods.render.text")


def run(
    recipe: str = typer.Argument(..., metavar="RECIPE", autocompletion=complete_recipe, help="Recipe id (see `codemod list`) or a recipe .toml file."),
    repo: list[Path] = typer.Option([], "--repo", metavar="PATH", help=REPO_HELP),
    package: list[str] = typer.Option([], "--package", metavar="NAME", help=PACKAGE_HELP),
    python: str | None = typer.Option(None, "--python", metavar="PYTHON", help=PYTHON_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the diff; write nothing (no file, branch or ref)."),
    patch: Path | None = typer.Option(None, "--patch", metavar="FILE", help="Also write the diff to this file."),
    only: list[str] = typer.Option([], "--only", metavar="ID", autocompletion=complete_change, help="Apply only this change id (repeatable)."),
    skip: list[str] = typer.Option([], "--skip", metavar="ID", autocompletion=complete_change, help="Leave out this change id (repeatable)."),
    interactive: bool = typer.Option(False, "--interactive", "-i", help="Show each change and ask y/n/a/q."),
    branch: str | None = typer.Option(None, "--branch", metavar="NAME", help="Name of the branch to create (default codemod/<recipe>); required on a detached HEAD."),
    clear_jit_cache: bool = typer.Option(False, "--clear-jit-cache", help="Remove FlashInfer's cached builds of the JIT modules the recipe changes."),
    force: bool = typer.Option(False, "--force", help="Widen CUDA guards even around instructions the arch lacks (recorded in the commit)."),
    fmt: Format = typer.Option(Format.text, "--format", metavar="FORMAT", help="text, or json for scripts."),
    archs: str | None = typer.Option(None, "--archs", metavar="ARCHS", help="Arch columns for the matrix, e.g. sm_90,sm_100,sm_120."),
    recipes_dir: list[Path] = typer.Option([], "--recipes", metavar="DIR", help="Extra folder of recipe .toml files."),
) -> None:
    """Plan a recipe for each repo, show it, and (unless --dry-run) apply it on a branch, one commit per change.

    Examples:

    \b
      codemod run sm120-enable --repo ./flashinfer --dry-run
      codemod run sm120-enable --package flashinfer --package sglang --clear-jit-cache
    """
    archs_shown = parse_universe(archs)
    if patch is not None:
        files.check_output(patch)
    chosen = recipes.find_recipe(recipe, recipes_dir)
    trees = workspaces(repo, package, python)

    def planned(plans) -> None:
        """Upgrade advice first, then the notes, before any patching; a tree with nothing to do gets its one line only."""
        if fmt is not Format.text or not any(plan.changed or plan.failed for plan in plans):
            return
        for line in text.advice_lines(apply_run.upstream_advice(chosen, trees), several=len(trees) > 1):
            say(line)
        if dry_run:
            for note in chosen.notes:
                say(f"note: {note}")

    results = apply_run.run_many(
        chosen, trees, universe=archs_shown, dry_run=dry_run, only=only, skip=skip, branch=branch,
        choose=ask_each if interactive else None, notify=notify, force=force, planned=planned,
    )
    diff = "".join(diffs.plan_diff(r.plan, r.prefix, r.selected) for r in results)
    if patch is not None:
        files.write_patch(patch, diff, applied=any(r.status == "applied" for r in results))
    caches = apply_run.jit_caches(results, clear_jit_cache, dry_run)
    if fmt is Format.json:
        out(document.dumps(document.run_json(chosen, results, caches, dry_run)))
        return
    if dry_run:
        print_diff(diff)
    for tree, result, cache in zip(trees, results, caches):
        for line in text.run_lines(chosen, tree, result, archs_shown, cache):
            say(line)
    for line in text.backout_lines(chosen, trees, results):
        say(line)


def ask_each(changes):
    """--interactive: show each change's diff and keep those the user answers y (or a) to."""
    accepted = []
    take_all = False
    for change in changes:
        off = change.change.default == "off"
        if take_all and not off:  # [a]ll means the recipe's default changes; one that is off by default is still asked
            accepted.append(change)
            continue
        err.styled((change.id, "bold"), (f": {change.change.title}", ""), (" (off by default)" if off else "", "dim"))
        if off and change.change.why:
            err.print(change.change.why)
        print_diff(diffs.unified_diff(change.file, change.before, change.after, change.edits))
        answer = ""
        while answer not in ("y", "n", "a", "q"):
            try:
                answer = typer.prompt("apply this change? [y]es [n]o [a]ll [q]uit", err=True).strip().lower()[:1]
            except typer.Abort:  # end of input (or Ctrl-C): stop without applying anything
                raise errors.BadUsage(
                    "no answer at the --interactive prompt (end of input); nothing was applied",
                    hint="answer y/n/a/q for each change, or use --only/--skip in scripts",
                ) from None
        if answer == "q":
            break
        if answer in ("y", "a"):
            accepted.append(change)
        take_all = take_all or answer == "a"
    return accepted
