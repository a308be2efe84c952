"""The `codemod` command: parse options, call the core, render, exit. No logic here."""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.syntax import Syntax

from codemods import errors, recipes, report, workflow
from codemods.arch import DEFAULT_ARCHS, ArchParseError, parse_archs

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    help="Find and rewrite GPU-architecture gates in ML inference stacks, on a git branch you can back out.",
)
err = Console(stderr=True, highlight=False, soft_wrap=True)
_state = {"debug": False}


class Format(str, Enum):
    text = "text"
    json = "json"


def _out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _print_diff(diff: str) -> None:
    if not diff:
        return
    if sys.stdout.isatty():
        Console(highlight=False).print(Syntax(diff, "diff", theme="ansi_dark", background_color="default"))
    else:
        _out(diff)


def _report_error(exc: errors.CodemodError) -> None:
    err.print(f"error[{exc.code}]: {exc}", markup=False)
    if exc.hint:
        err.print(f"  hint: {exc.hint}", markup=False)


def boundary(command):
    """Turn a CodemodError into its message on stderr and its exit code."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except errors.CodemodError as exc:
            _report_error(exc)
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def _universe(archs: Optional[str]):
    if not archs:
        return DEFAULT_ARCHS
    try:
        return parse_archs(archs)
    except ArchParseError as exc:
        raise typer.BadParameter(str(exc), param_hint="--archs") from None


@app.callback()
def _main(debug: bool = typer.Option(False, "--debug", help="Show tracebacks for internal errors.")) -> None:
    _state["debug"] = debug or bool(os.environ.get("CODEMOD_DEBUG"))


@app.command("list")
@boundary
def list_(
    recipes_dir: list[Path] = typer.Option([], "--recipes", help="Extra folder of recipe .toml files (also $CODEMOD_RECIPES)."),
) -> None:
    """List the recipes, one line each."""
    for recipe in recipes.available_recipes(recipes_dir).values():
        projects = ", ".join(sorted({c.project for c in recipe.changes}))
        _out(f"{recipe.id:<18} {recipe.summary}  [{projects}; {len(recipe.changes)} changes]\n")


@app.command()
@boundary
def run(
    recipe: str = typer.Argument(..., help="Recipe id (see `codemod list`) or a recipe .toml file."),
    repo: Path = typer.Option(..., "--repo", help="The project folder: a git checkout, or site-packages holding the installed wheel."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the diff; write nothing (no file, branch or ref)."),
    patch: Optional[Path] = typer.Option(None, "--patch", help="Also write the diff to this file."),
    only: list[str] = typer.Option([], "--only", help="Apply only this change id (repeatable)."),
    skip: list[str] = typer.Option([], "--skip", help="Leave out this change id (repeatable)."),
    interactive: bool = typer.Option(False, "--interactive", "-i", help="Show each change and ask y/n/a/q."),
    branch: Optional[str] = typer.Option(None, "--branch", help="Name of the branch to create (default codemod/<recipe>); required on a detached HEAD."),
    fmt: Format = typer.Option(Format.text, "--format", help="text, or json for scripts."),
    archs: Optional[str] = typer.Option(None, "--archs", help="Arch columns for the matrix, e.g. sm_90,sm_100,sm_120."),
    recipes_dir: list[Path] = typer.Option([], "--recipes", help="Extra folder of recipe .toml files."),
) -> None:
    """Plan a recipe for --repo, show it, and (unless --dry-run) apply it on a branch, one commit per change."""
    universe = _universe(archs)
    chosen = recipes.find_recipe(recipe, recipes_dir)
    choose = _ask_each if interactive else None
    if dry_run and fmt is Format.text:
        for note in chosen.notes:
            err.print(f"[bold]note:[/] {note}")
    result = workflow.run(chosen, repo, universe=universe, dry_run=dry_run, only=only, skip=skip, branch=branch, choose=choose)
    plan, prefix = result.plan, result.prefix
    diff = report.plan_diff(plan, prefix, result.selected)
    if patch is not None:
        patch.write_text(diff, encoding="utf-8", errors="surrogateescape")
    if fmt is Format.json:
        data = report.plan_json(plan, prefix, dry_run, None)
        data["status"] = result.status
        data["branch"] = result.branch or None
        data["commits"] = [{"sha": sha, "change": cid} for sha, cid in result.commits]
        data["selected"] = [c.id for c in result.selected]
        _out(json.dumps(data, indent=2) + "\n")
        return
    if dry_run:
        _print_diff(diff)
    for line in report.summary_lines(plan, prefix):
        err.print(line, markup=False)
    if result.status in ("dry-run", "applied"):
        _render_matrix(plan, universe)
    project = f"{plan.target.project.title} {plan.target.version() or ''}".strip()
    if result.status == "already-enabled":
        err.print(f"already enabled: {project} at {repo} already admits {', '.join(a.name for a in plan.targets)}; nothing to do, no branch made")
    elif result.status == "already-applied":
        err.print(f"already applied: {chosen.id} is on the current branch {result.branch}; nothing to do")
    elif result.status == "nothing-selected":
        err.print("nothing selected; nothing written")
    elif result.status == "dry-run":
        err.print(f"dry run: {len(result.selected)} change(s) planned for {project}; nothing written")
    else:
        err.print(f"applied {len(result.commits)} change(s) to {project} on branch {result.branch} (base {result.base.split('@')[0]})")
        for sha, cid in result.commits:
            err.print(f"  {sha[:10]}  {cid}")
        modules = plan.jit_modules()
        if modules:
            err.print(f"stale JIT builds: FlashInfer's JIT cache may hold old builds of {', '.join(modules)}; "
                      "remove ~/.cache/flashinfer/<version>/<archs>/cached_ops/<module> before restarting")
        err.print(f"this is an experiment: benchmark it; to back it out: codemod revert {chosen.id} --repo {repo}")


def _render_matrix(plan, universe) -> None:
    for line in report.matrix(plan, universe):
        err.print(line, markup=False, overflow="ignore", crop=False)


def _ask_each(changes):
    accepted = []
    take_all = False
    for change in changes:
        if take_all:
            accepted.append(change)
            continue
        err.print(f"[bold]{change.id}[/]: {change.change.title}")
        _print_diff(report.unified_diff(change.file, change.before, change.after))
        answer = ""
        while answer not in ("y", "n", "a", "q"):
            answer = typer.prompt("apply this change? [y]es [n]o [a]ll [q]uit", err=True).strip().lower()[:1]
        if answer == "q":
            break
        if answer in ("y", "a"):
            accepted.append(change)
        take_all = answer == "a"
    return accepted


@app.command()
@boundary
def status(
    repo: Path = typer.Option(..., "--repo", help="The project folder."),
    fmt: Format = typer.Option(Format.text, "--format"),
) -> None:
    """Which recipes are applied, on which branch, from which base, with which commits."""
    git_repo, records = workflow.status(repo)
    if fmt is Format.json:
        _out(json.dumps({"repo": str(git_repo.root), "applied": report.status_json(records)}, indent=2) + "\n")
        return
    if not records:
        _out(f"no recipe applied in {git_repo.root}\n")
        return
    for r in records:
        marker = " (checked out)" if r.current else ""
        _out(f"{r.recipe}: applied on {r.branch}{marker}, base {r.base_ref or 'detached'} @ {r.base_sha[:12]}\n")
        for c in r.commits:
            _out(f"  {c.sha[:10]}  {c.change:<40} {c.subject}\n")
        for sha, subject in r.foreign:
            _out(f"  {sha[:10]}  (your commit on top)                      {subject}\n")


@app.command()
@boundary
def revert(
    recipe: str = typer.Argument(..., help="The recipe id to back out."),
    repo: Path = typer.Option(..., "--repo", help="The project folder."),
    keep_commits: bool = typer.Option(False, "--keep-commits", help="Keep your commits on the codemod branch; undo only codemod's with git revert."),
) -> None:
    """Back a recipe out: check out the recorded base and delete the codemod branch."""
    result = workflow.revert(recipe, repo, keep_commits=keep_commits)
    r = result.record
    if result.mode == "reverted-commits":
        err.print(f"reverted {len(result.reverted)} codemod commit(s) on {r.branch} with git revert; your {len(r.foreign)} commit(s) are kept")
    else:
        where = f"checked out {result.checked_out}, " if result.checked_out else ""
        err.print(f"reverted {recipe}: {where}deleted branch {r.branch} ({len(result.reverted)} commit(s))")


def main() -> None:
    try:
        app()
    except errors.CodemodError as exc:
        _report_error(exc)
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug: one line unless --debug
        if _state["debug"] or "--debug" in sys.argv:
            traceback.print_exc()
        else:
            err.print(f"internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)", markup=False)
        sys.exit(1)


if __name__ == "__main__":
    main()
