"""The `codemod` command: parse options, call the core, render, exit. No logic here."""

from __future__ import annotations

import difflib
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
from rich.markup import escape

from codemods.core import errors
from codemods.core.arch import DEFAULT_ARCHS, ArchParseError, parse_archs
from codemods.apply import files
from codemods.apply.files import require_folder
from codemods.core.lazy import LazyModule

# imported on first use: `codemod scan` needs none of them, and they pull in libcst and GitPython
jit_cache = LazyModule("codemods.jit.cache")
packages_mod = LazyModule("codemods.apply.packages")
recipes = LazyModule("codemods.recipes.load")
recipe_model = LazyModule("codemods.recipes.model")
recipe_cases = LazyModule("codemods.recipes.cases")
report = LazyModule("codemods.render.report")
workflow = LazyModule("codemods.apply.workflow")
verify_service = LazyModule("codemods.prove.verify")

app = typer.Typer(
    add_completion=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    help="Find and rewrite GPU-architecture gates in ML inference stacks, on a git branch you can back out.",
)
err = Console(stderr=True, highlight=False, soft_wrap=True)
_state = {"debug": False}


class Format(str, Enum):
    text = "text"
    json = "json"


class ScanFormat(str, Enum):
    text = "text"
    json = "json"
    sarif = "sarif"


def _out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _print_diff(diff: str) -> None:
    if not diff:
        return
    if sys.stdout.isatty():
        from rich.syntax import Syntax

        Console(highlight=False).print(Syntax(diff, "diff", theme="ansi_dark", background_color="default"))
    else:
        _out(diff)


SCHEMA_VERSION = 1  # of every --format json document; codemods/schemas/ holds one JSON Schema per command


def _document(data: dict) -> dict:
    """A --format json document: schema_version first, then the command's data."""
    return {"schema_version": SCHEMA_VERSION, **data}


def _report_error(exc: errors.CodemodError, as_json: bool = False) -> None:
    err.print(f"error[{exc.code}]: {exc}", markup=False)
    if exc.hint:
        err.print(f"  hint: {exc.hint}", markup=False)
    if as_json:  # scripts get the same error as one document on stdout
        error = {"kind": exc.code, "message": str(exc), "hint": exc.hint, "exit_code": exc.exit_code}
        _out(json.dumps(_document({"error": error}), indent=2) + "\n")


def boundary(command):
    """Turn a CodemodError into its message on stderr (and a JSON document under --format json) and its exit code."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except errors.CodemodError as exc:
            fmt = kwargs.get("fmt")
            _report_error(exc, as_json=getattr(fmt, "value", fmt) == "json")
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def _complete_recipe(incomplete: str) -> list[str]:
    """Shell completion: recipe ids (built-in and $CODEMOD_RECIPES)."""
    try:
        return [rid for rid in recipes.available_recipes() if rid.startswith(incomplete)]
    except Exception:  # completion must never print a traceback into the shell
        return []


def _complete_change(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion: the change ids of the recipe already on the command line."""
    try:
        line = os.environ.get("COMP_WORDS") or os.environ.get("_TYPER_COMPLETE_ARGS") or ""
        known = recipes.available_recipes()
        words = [ctx.params.get("recipe") or "", *line.split()]
        named = next((w for w in words if w in known or w.endswith(".toml")), "")
        return [c.id for c in recipes.find_recipe(named).changes if c.id.startswith(incomplete)]
    except Exception:  # completion must never print a traceback into the shell
        return []


def _universe(archs: Optional[str]):
    if not archs:
        return DEFAULT_ARCHS
    try:
        return parse_archs(archs)
    except ArchParseError as exc:
        raise typer.BadParameter(str(exc), param_hint="--archs") from None


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            _out(f"codemod {version('codemod')}\n")
        except PackageNotFoundError:
            _out("codemod (not installed: running from a source tree)\n")
        raise typer.Exit()


@app.callback()
def _main(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for internal errors (also accepted after the command)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    _state["debug"] = debug or _state["debug"] or bool(os.environ.get("CODEMOD_DEBUG"))


@app.command("list")
@boundary
def list_(
    recipes_dir: list[Path] = typer.Option([], "--recipes", metavar="DIR", help="Extra folder of recipe .toml files (also $CODEMOD_RECIPES)."),
) -> None:
    """List the recipes, one line each.

    Examples:

    \b
      codemod list
      codemod list --recipes ./my-recipes
    """
    for recipe in recipes.available_recipes(recipes_dir).values():
        projects = ", ".join(sorted({c.project for c in recipe.changes}))
        _out(f"{recipe.id:<18} {recipe.summary}  [{projects}; {len(recipe.changes)} changes]\n")


def _targets(repos: list[Path], packages: list[str], python: Optional[str]) -> list[tuple[Path, Optional[str]]]:
    roots = [(path, None) for path in repos] + [
        (packages_mod.folder(name, python), packages_mod.project_of(name)) for name in packages
    ]
    if not roots:
        raise typer.BadParameter("give --repo PATH or --package NAME (repeatable)")
    return roots


_REPO_HELP = "The project folder: a git checkout, or site-packages holding the installed wheel (repeatable)."
_PACKAGE_HELP = "An installed package (flashinfer, sglang), found with importlib.metadata (repeatable)."
_PYTHON_HELP = "The Python whose installed packages --package means (default: this one)."


@app.command()
@boundary
def run(
    recipe: str = typer.Argument(..., metavar="RECIPE", autocompletion=_complete_recipe, help="Recipe id (see `codemod list`) or a recipe .toml file."),
    repo: list[Path] = typer.Option([], "--repo", metavar="PATH", help=_REPO_HELP),
    package: list[str] = typer.Option([], "--package", metavar="NAME", help=_PACKAGE_HELP),
    python: Optional[str] = typer.Option(None, "--python", metavar="PYTHON", help=_PYTHON_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the diff; write nothing (no file, branch or ref)."),
    patch: Optional[Path] = typer.Option(None, "--patch", metavar="FILE", help="Also write the diff to this file."),
    only: list[str] = typer.Option([], "--only", metavar="ID", autocompletion=_complete_change, help="Apply only this change id (repeatable)."),
    skip: list[str] = typer.Option([], "--skip", metavar="ID", autocompletion=_complete_change, help="Leave out this change id (repeatable)."),
    interactive: bool = typer.Option(False, "--interactive", "-i", help="Show each change and ask y/n/a/q."),
    branch: Optional[str] = typer.Option(None, "--branch", metavar="NAME", help="Name of the branch to create (default codemod/<recipe>); required on a detached HEAD."),
    clear_jit_cache: bool = typer.Option(False, "--clear-jit-cache", help="Remove FlashInfer's cached builds of the JIT modules the recipe changes."),
    force: bool = typer.Option(False, "--force", help="Widen CUDA guards even around instructions the arch lacks (recorded in the commit)."),
    fmt: Format = typer.Option(Format.text, "--format", metavar="FORMAT", help="text, or json for scripts."),
    archs: Optional[str] = typer.Option(None, "--archs", metavar="ARCHS", help="Arch columns for the matrix, e.g. sm_90,sm_100,sm_120."),
    recipes_dir: list[Path] = typer.Option([], "--recipes", metavar="DIR", help="Extra folder of recipe .toml files."),
) -> None:
    """Plan a recipe for each repo, show it, and (unless --dry-run) apply it on a branch, one commit per change.

    Examples:

    \b
      codemod run sm120-enable --repo ./flashinfer --dry-run
      codemod run sm120-enable --package flashinfer --package sglang --clear-jit-cache
    """
    universe = _universe(archs)
    if patch is not None:
        files.check_output(patch)
    chosen = recipes.find_recipe(recipe, recipes_dir)
    roots = _targets(repo, package, python)
    choose = _ask_each if interactive else None
    if fmt is Format.text:  # upgrading comes first, before any patching and before the notes
        for line in _upstream_advice(chosen, roots):
            err.print(f"[bold]first option:[/] {line}", markup=True, highlight=False)
    if dry_run and fmt is Format.text:
        for note in chosen.notes:
            err.print(f"[bold]note:[/] {note}")
    results = workflow.run_many(
        chosen, roots, universe=universe, dry_run=dry_run, only=only, skip=skip, branch=branch, choose=choose, notify=_notify,
        force=force,
    )
    diff = "".join(report.plan_diff(r.plan, r.prefix, r.selected) for r in results)
    if patch is not None:
        try:
            patch.write_text(diff, encoding="utf-8", errors="surrogateescape")
        except OSError as exc:
            applied = any(r.status == "applied" for r in results)
            raise errors.FileRefused(
                f"cannot write the patch: {exc.strerror or exc}" + ("; the recipe itself was applied" if applied else ""),
                where=str(patch),
                hint="the diff is on the codemod branch too: `git diff BASE codemod/RECIPE`" if applied else "nothing was written",
            ) from None
    caches = [
        _jit_cache(r.plan.jit_modules(), r.plan.tree, clear_jit_cache and r.status in ("applied", "dry-run"), dry_run)
        for r in results
    ]
    if fmt is Format.json:
        out = []
        for result, cache in zip(results, caches):
            data = report.plan_json(result.plan, result.prefix, dry_run, None)
            data.update(
                upstream_advice=recipe_model.upstream_advice(chosen, result.plan.tree),
                status=result.status, branch=result.branch or None, selected=[c.id for c in result.selected],
                commits=[{"sha": sha, "change": cid} for sha, cid in result.commits], jit_cache=cache,
                forced=[workflow.describe_half_patch(p) for p in result.forced],
                would_refuse=None if result.would_refuse is None else {
                    "kind": result.would_refuse.code, "exit_code": result.would_refuse.exit_code,
                    "message": str(result.would_refuse), "hint": result.would_refuse.hint,
                },
            )
            out.append(data)
        _out(json.dumps(_document({"results": out}), indent=2) + "\n")
        return
    if dry_run:
        _print_diff(diff)
    for (root, package), result, cache in zip(roots, results, caches):
        _render_result(chosen, root, package, result, universe, cache)


def _upstream_advice(chosen, roots: list[tuple[Path, Optional[str]]]) -> list[str]:
    """The recipe's upgrade advice for each tree whose project it can recognise (run reports the others)."""
    out = []
    for root, project in roots:
        try:
            target = recipes.detect(files.resolved(root), [project] if project else sorted({c.project for c in chosen.changes}))
        except (errors.CodemodError, OSError):
            continue
        where = f" ({root})" if len(roots) > 1 else ""
        out += [escape(line) + where for line in recipe_model.upstream_advice(chosen, target)]
    return out


def _jit_cache(modules: list[str], target, clear: bool, dry_run: bool) -> dict | None:
    if not modules or target.project.name != "flashinfer":
        return None
    root = jit_cache.cache_root()
    version = target.version()
    builds = jit_cache.stale_builds(modules, version, root) if version else []
    removed = jit_cache.clear(builds, root) if clear and not dry_run else []
    return {
        "modules": modules, "root": str(root), "version": version or None,
        "stale": [str(b) for b in builds], "removed": [str(b) for b in removed],
        "would_remove": [str(b) for b in builds] if clear and dry_run else [],
    }


def _render_result(chosen, root: Path, package: Optional[str], result, universe, cache) -> None:
    plan, prefix = result.plan, result.prefix
    shown = result.selected if result.status in ("dry-run", "applied", "nothing-selected") else None
    for line in report.summary_lines(plan, prefix, shown):
        err.print(line, markup=False)
    if result.status in ("dry-run", "applied"):
        _render_matrix(plan, universe, shown)
    project = f"{plan.tree.project.title} {plan.tree.version() or ''}".strip()
    if result.status == "already-enabled":
        err.print(f"already enabled: {project} at {root} already admits {', '.join(a.name for a in plan.targets)}; nothing to do, no branch made")
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
    for reason in map(workflow.describe_half_patch, result.forced):
        err.print(f"[bold]warning:[/] half-patch applied with --force: {reason}; `codemod verify` will fail this tree")
    _render_cache(cache)
    if result.status == "applied":
        # how the user named this target: _targets gives a project only for --package
        where = f"--package {package}" if package else f"--repo {root}"
        err.print(f"this is an experiment: benchmark it; to back it out: codemod revert {chosen.id} {where}")


def _render_cache(cache) -> None:
    if not cache:
        return
    modules = ", ".join(cache["modules"])
    for path in cache["removed"]:
        err.print(f"removed stale JIT build: {path}", markup=False)
    for path in cache["would_remove"]:
        err.print(f"would remove stale JIT build: {path}", markup=False)
    if not cache["removed"] and not cache["would_remove"]:
        if cache["stale"]:
            err.print(f"stale JIT builds of {modules} (pass --clear-jit-cache to remove them):", markup=False)
            for path in cache["stale"]:
                err.print(f"  {path}", markup=False)
        else:
            err.print(f"JIT modules affected: {modules}; no cached builds under {cache['root']}/{cache['version']}", markup=False)


def _notify(message: str) -> None:
    err.print(f"note: {message}", markup=False)


def _render_matrix(plan, universe, selected=None) -> None:
    columns = tuple(dict.fromkeys((*universe, *plan.targets)))  # every arch the recipe targets has a column
    for line in report.matrix(plan, columns, selected):
        err.print(line, markup=False, overflow="ignore", crop=False)


def _ask_each(changes):
    accepted = []
    take_all = False
    for change in changes:
        off = change.change.default == "off"
        if take_all and not off:  # [a]ll means the recipe's default changes; one that is off by default is still asked
            accepted.append(change)
            continue
        label = " [dim](off by default)[/]" if off else ""
        err.print(f"[bold]{escape(change.id)}[/]: {escape(change.change.title)}{label}")
        if off and change.change.why:
            err.print(escape(change.change.why))
        _print_diff(report.unified_diff(change.file, change.before, change.after, change.edits))
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


@app.command()
@boundary
def status(
    repo: list[Path] = typer.Option([], "--repo", metavar="PATH", help=_REPO_HELP),
    package: list[str] = typer.Option([], "--package", metavar="NAME", help=_PACKAGE_HELP),
    python: Optional[str] = typer.Option(None, "--python", metavar="PYTHON", help=_PYTHON_HELP),
    fmt: Format = typer.Option(Format.text, "--format", metavar="FORMAT", help="text, or json for scripts."),
) -> None:
    """Which recipes are applied, on which branch, from which base, with which commits.

    Examples:

    \b
      codemod status --repo ./flashinfer
      codemod status --package flashinfer --package sglang --format json
    """
    out = []
    seen = set()
    for root, _ in _targets(repo, package, python):
        git_repo, records, drift, interrupted = workflow.status(root)
        if git_repo.key in seen:
            continue
        seen.add(git_repo.key)
        state = "interrupted" if interrupted else ("applied" if records else "not applied")
        out.append({
            "repo": str(git_repo.root), "shadow": git_repo.shadow, "state": state,
            "interrupted": {k: interrupted.get(k) for k in ("op", "recipe", "step", "branch", "base_sha", "pid")} if interrupted else None,
            "applied": report.status_json(records), "changed_outside_codemod": drift,
        })
        if fmt is Format.json:
            continue
        if interrupted and interrupted.get("corrupt"):
            _out(
                f"interrupted: codemod's journal in {git_repo.state_dir} cannot be read; check `git status` and `git branch`, "
                "check out your base branch and delete any codemod/ branch, then delete journal.json "
                "(installed package: `codemod revert RECIPE --package NAME --forget`)\n"
            )
        elif interrupted:
            _out(
                f"interrupted: `{interrupted.get('op')} {interrupted.get('recipe')}` in {git_repo.root} stopped after step "
                f"{interrupted.get('step')} (pid {interrupted.get('pid')}); run it again to finish, or "
                f"`codemod revert {interrupted.get('recipe')}` to go back to the base\n"
            )
        if not records:
            _out(f"no recipe applied in {git_repo.root}\n")
        for r in records:
            marker = " (checked out)" if r.current else ""
            _out(f"{r.recipe}: applied in {git_repo.root} on {r.branch}{marker}, base {r.base_ref or 'detached'} @ {r.base_sha[:12]}\n")
            for c in r.commits:
                _out(f"  {c.sha[:10]}  {c.change:<40} {c.subject}\n")
            for sha, subject in r.foreign:
                _out(f"  {sha[:10]}  (your commit on top)                      {subject}\n")
        if drift:
            _out(f"  warning: changed outside codemod (package reinstalled or upgraded?): {', '.join(drift)}\n")
    if fmt is Format.json:
        _out(json.dumps(_document({"results": out}), indent=2) + "\n")


@app.command()
@boundary
def revert(
    recipe: str = typer.Argument(..., metavar="RECIPE", autocompletion=_complete_recipe, help="The recipe id to back out."),
    repo: list[Path] = typer.Option([], "--repo", metavar="PATH", help=_REPO_HELP),
    package: list[str] = typer.Option([], "--package", metavar="NAME", help=_PACKAGE_HELP),
    python: Optional[str] = typer.Option(None, "--python", metavar="PYTHON", help=_PYTHON_HELP),
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
    spots = _targets(repo, package, python)
    reverted = workflow.revert_many(recipe, spots, keep_commits=keep_commits, forget=forget, notify=_notify, dry_run=dry_run)
    for root, result in reverted:
        r = result.record
        if result.mode == "would-forget":
            err.print(f"would forget codemod's record of {root}; no file would be touched; nothing written")
        elif result.mode == "would-revert-commits":
            err.print(f"would revert {len(result.reverted)} codemod commit(s) on {r.branch} with git revert, keeping your {len(r.foreign)}; nothing written")
        elif result.mode == "would-delete-branch":
            where = f"check out {result.checked_out}, " if result.checked_out else ""
            err.print(f"would revert {recipe} in {root}: {where}delete branch {r.branch} ({len(result.reverted)} commit(s)); nothing written")
        elif result.mode == "recovered":
            err.print(f"reverted {recipe} in {root}: the interrupted operation was put back to its base")
        elif result.mode == "forgotten":
            err.print(f"forgot codemod's record of {root}; no file was touched")
        elif result.mode == "reverted-commits":
            err.print(f"reverted {len(result.reverted)} codemod commit(s) on {r.branch} with git revert; your {len(r.foreign)} commit(s) are kept")
        else:
            where = f"checked out {result.checked_out}, " if result.checked_out else ""
            err.print(f"reverted {recipe} in {root}: {where}deleted branch {r.branch} ({len(result.reverted)} commit(s))")
    for root, project in spots:
        try:
            chosen = recipes.find_recipe(recipe, recipes_dir)
            target = recipes.detect(files.resolved(root), [project] if project else sorted({c.project for c in chosen.changes}))
        except errors.CodemodError:
            continue
        modules = list(dict.fromkeys(m for c in chosen.changes if c.project == target.project.name for m in c.jit_modules))
        _render_cache(_jit_cache(modules, target, clear_jit_cache, dry_run))


@app.command()
@boundary
def verify(
    repo: Optional[Path] = typer.Option(None, "--repo", metavar="PATH", help="The project folder (checkout or installed package)."),
    package: Optional[str] = typer.Option(None, "--package", metavar="NAME", help="An installed package (flashinfer), found with importlib.metadata."),
    python: Optional[str] = typer.Option(None, "--python", metavar="PYTHON", help=_PYTHON_HELP + " Also where --build finds TVM-FFI's headers."),
    build: bool = typer.Option(False, "--build", help="Compile the changed JIT modules to PTX (nvcc -ptx), base and work tree, and check every kernel has a body."),
    module: list[str] = typer.Option([], "--module", metavar="NAME", help="With --build: the JIT module to build (default: those changed since the base; repeatable)."),
    recipe: Optional[str] = typer.Option(None, "--recipe", metavar="ID", help="The applied recipe whose base to compare with."),
    base: Optional[str] = typer.Option(None, "--base", metavar="REV", help="Compare the work tree with this revision instead."),
    arch: Optional[str] = typer.Option(None, "--arch", metavar="ARCH", help="Target arch (default: the recipe's), e.g. sm_120, 12.0, 120."),
    archs: Optional[str] = typer.Option(None, "--archs", metavar="ARCHS", help="Archs to preprocess, e.g. sm_80,sm_90,sm_100,sm_120."),
    jobs: int = typer.Option(0, "--jobs", metavar="N", help="Parallel nvcc runs (default: one per CPU)."),
    include: list[Path] = typer.Option([], "--include", metavar="DIR", help="A folder of third-party headers the tree lacks, e.g. cutlass/include (repeatable)."),
    fmt: Format = typer.Option(Format.text, "--format", metavar="FORMAT", help="text, or json for scripts."),
) -> None:
    """Prove a rewrite: nvcc -E every changed CUDA file per arch, base vs work tree.

    Exit 0 only when verified: non-target archs identical, targets gained exactly the planned regions, no JIT
    module half-patched. Exit 1 when an arch FAILs, or when an arch is unknown because a guard deciding the
    change reads a macro of a missing third-party header (JSON `status`: verified, unknown or failed).

    With --build: compile the changed JIT modules to PTX with FlashInfer's own flags, base and work tree,
    per arch. Exit 0 when no kernel compiles empty on the target that has a body on a compared arch, the
    instructions the widened guards promise are there, and every compared arch's PTX equals the base's;
    exit 1 when not; 11 when nvcc or headers are missing, 12 on a compile error, 13 when FlashInfer's
    JIT code cannot be read for the flags.

    Examples:

    \b
      codemod verify --repo ./flashinfer
      codemod verify --repo ./flashinfer --base v0.6.3 --arch sm_120 --include ~/cutlass/include
      codemod verify --build --package flashinfer --arch sm_120 --module trtllm_comm
    """
    from codemods.core.arch import Arch

    target_arch = None
    if arch:
        try:
            target_arch = Arch.parse(arch)
        except ArchParseError as exc:
            raise typer.BadParameter(str(exc), param_hint="--arch") from None
    if (repo is None) == (package is None):
        raise typer.BadParameter("give --repo PATH or --package NAME", param_hint="--repo")
    if repo is None:
        repo = packages_mod.folder(package, python)
    if module and not build:
        raise typer.BadParameter("--module needs --build", param_hint="--module")
    if build:
        _verify_build(repo, target_arch, _universe(archs), tuple(module), base, recipe, python, jobs, fmt)
        return
    result, ctx = verify_service.verify_repo(
        repo, recipe_id=recipe, base=base, arch=target_arch, universe=_universe(archs), jobs=jobs, includes=include
    )
    if fmt is Format.json:
        _out(json.dumps(_document(report.verify_json(result, ctx)), indent=2) + "\n")
    else:
        for line in report.verify_lines(result, ctx):
            _out(line + "\n")
    for note in report.verify_notes(result, ctx):
        err.print(note, markup=False)
    if not result.ok:
        raise typer.Exit(1)


def _verify_build(repo, target_arch, universe, modules, base, recipe, python, jobs, fmt) -> None:
    """`verify --build`: the build proof (codemods.prove.build), with a progress bar per arch and source."""
    import contextlib

    from codemods.prove import build as build_proof
    from codemods.render import build_proof as build_text

    bar = None
    if err.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True)
    rows: dict[str, int] = {}

    def progress(label: str, done: int, total: int) -> None:
        if bar is None:
            return
        if label not in rows:
            rows[label] = bar.add_task(label, total=total)
        bar.update(rows[label], completed=done, total=total)

    with bar if bar is not None else contextlib.nullcontext():
        report = build_proof.prove(
            repo, arch=target_arch, universe=universe, modules=modules, base=base, recipe_id=recipe, python=python,
            jobs=jobs, progress=progress,
        )
    if fmt is Format.json:
        _out(json.dumps(_document(build_text.to_json(report)), indent=2) + "\n")
    else:
        _out("".join(line + "\n" for line in build_text.to_text(report)))
    if not report.ok:
        raise typer.Exit(1)


@app.command()
@boundary
def scan(
    repo: list[Path] = typer.Option([], "--repo", metavar="PATH", help="A tree to scan (repeatable)."),
    package: list[str] = typer.Option([], "--package", metavar="NAME", help=_PACKAGE_HELP),
    python: Optional[str] = typer.Option(None, "--python", metavar="PYTHON", help=_PYTHON_HELP),
    arch: str = typer.Option("sm_120", "--arch", metavar="ARCH", help="The arch to check gates against, e.g. sm_120, 12.0, 120."),
    fmt: ScanFormat = typer.Option(ScanFormat.text, "--format", metavar="FORMAT", help="text, json or sarif."),
    check: bool = typer.Option(False, "--check", help="Exit 1 when a (non-potential) hazard is found: for CI and pre-commit."),
    jobs: int = typer.Option(0, "--jobs", metavar="N", help="Parallel workers (default: one per CPU)."),
    archs: Optional[str] = typer.Option(None, "--archs", metavar="ARCHS", help="Arch universe for the admits lists."),
    include_all: bool = typer.Option(False, "--all", help="Also scan binary files and files .gitignore excludes."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the per-file cache ($CODEMOD_HOME/scan-cache)."),
    gates_only: bool = typer.Option(False, "--gates-only", help="List the gates only: no widenability, no hazards (faster)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Text: print only the summary and the hazards."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Text: also list covered and admitting gates; print the scan statistics."),
) -> None:
    """Audit a tree for --arch: what it gets nothing from (blockers, widenable), what needs a human, and hazards.

    Examples:

    \b
      codemod scan --repo ./flashinfer --arch sm_121
      codemod scan --repo ./flashinfer --arch sm_121 --quiet
      codemod scan --repo . --arch sm_120 --format sarif > codemod.sarif
    """
    import contextlib

    from codemods.audit import cache as scan_cache, scan as scanner
    from codemods.core.arch import Arch
    from codemods.render import sarif, scan_json, scan_text

    repo = [root for root, _ in _targets(repo, package, python)]
    try:
        target = Arch.parse(arch)
    except ArchParseError as exc:
        raise typer.BadParameter(str(exc), param_hint="--arch") from None
    if check and gates_only:
        raise typer.BadParameter("--check needs the hazards, which --gates-only skips; drop one", param_hint="--gates-only")
    for root in repo:
        require_folder(root)
    bar = None
    if err.is_terminal:  # progress goes to stderr, and only to a terminal
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(TextColumn("scanning {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True)
    with bar if bar is not None else contextlib.nullcontext():
        task = bar.add_task(str(repo[0]) if len(repo) == 1 else f"{len(repo)} trees", total=None) if bar is not None else None
        scanned = scanner.scan_many(
            repo, target, _universe(archs), jobs, include_all=include_all, hazards=not gates_only,
            cache=None if no_cache else scan_cache.default_cache(),
            progress=(lambda done, total: bar.update(task, completed=done, total=total)) if bar is not None else None,
        )
    results = list(zip(repo, scanned))
    several = len(results) > 1
    if fmt is ScanFormat.text:
        for root, result in results:
            if several:
                _out(f"== {root}\n")
            color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
            text = scan_text.to_text(result, verbose=verbose, quiet=quiet, color=color)
            _out(text if text.endswith("\n") else text + "\n")
    else:
        merged: dict = {}
        for root, result in results:
            if fmt is ScanFormat.json:
                data = scan_json.to_json(result)
            else:
                from codemods.apply.repo import provenance

                data = sarif.to_sarif(result, provenance(Path(root)))
            if fmt is ScanFormat.sarif:
                merged.setdefault("$schema", data.get("$schema"))
                merged.setdefault("version", data["version"])
                merged.setdefault("runs", []).extend(data["runs"])
                continue
            for key, items in data.items():
                for item in items:
                    if several:
                        item["repo"] = str(root)
                    merged.setdefault(key, []).append(item)
        if fmt is ScanFormat.json:
            merged = _document({key: merged.get(key, []) for key in ("gates", "skipped", "hazards")})
            _out(scan_json.dumps(merged) + "\n")
        else:
            _out(json.dumps({k: v for k, v in merged.items() if v is not None}, indent=2) + "\n")
    for root, result in results if verbose else ():
        stats = ", ".join(f"{k} {v}" for k, v in result.stats.items()) if isinstance(result.stats, dict) else str(result.stats)
        err.print(f"scanned {root}: {stats}", markup=False)
    if check and any(scanner.check(result) for _, result in results):
        raise typer.Exit(1)


@app.command()
@boundary
def doctor(
    log: Optional[Path] = typer.Argument(None, help="An SGLang server log (plain or .gz; - reads stdin)."),
    baseline: Optional[Path] = typer.Option(None, "--baseline", metavar="LOG", help="The unpatched run's log: compare verdicts and throughput (A/B)."),
    tp: Optional[int] = typer.Option(None, "--tp", metavar="N", min=1, help="Expected tensor-parallel size (default: the world_size the log reports)."),
    fmt: Format = typer.Option(Format.text, "--format", metavar="FORMAT", help="text, or json for scripts."),
    max_regression: float = typer.Option(5.0, "--max-regression", metavar="PERCENT", min=0, help="Percent slower than --baseline that recommends a revert."),
    revert: bool = typer.Option(False, "--revert", help="When the A/B recommends it, back --recipe out of --repo."),
    repo: Optional[Path] = typer.Option(None, "--repo", metavar="PATH", help="The patched project folder (for --revert and the advice)."),
    package: Optional[str] = typer.Option(None, "--package", metavar="NAME", help="The patched installed package, instead of --repo."),
    python: Optional[str] = typer.Option(None, "--python", metavar="PYTHON", help=_PYTHON_HELP),
    recipe: str = typer.Option("sm120-enable", "--recipe", metavar="ID", help="The recipe the patched run was built with."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Tail a live log, print state changes, stop once ready or crashed."),
    timeout: Optional[float] = typer.Option(None, "--timeout", metavar="SECONDS", min=0, help="With --follow: give up after this many seconds (exit 1)."),
    rules: list[Path] = typer.Option([], "--rules", metavar="FILE", help="Extra rules file (TOML, tried before the built-in ones; repeatable)."),
    preflight: bool = typer.Option(False, "--preflight", help="Check that the GPUs have P2P, which FlashInfer's allreduce fusion needs."),
    topo: list[Path] = typer.Option([], "--topo", metavar="FILE", help="Saved `nvidia-smi topo -m` / `topo -p2p r` output for --preflight (repeatable)."),
) -> None:
    """Read an SGLang server log: ready, starting or crashed (and why), fusion ranks, autotuner skips, throughput.

    Exit 0 when nothing is wrong (ready, or still starting); 1 when the server crashed, the patched run
    is more than --max-regression slower than --baseline, --preflight finds GPUs without P2P, or
    --follow --timeout ran out before a final verdict; 130 on Ctrl-C.

    Examples:

    \b
      codemod doctor server.log --tp 8
      codemod doctor patched.log --baseline before.log --revert --repo ./flashinfer
    """
    from codemods.doctor.checkup import checkup
    from codemods.render import doctor as render

    if log is None and not preflight:
        raise typer.BadParameter("give a LOG file, or --preflight", param_hint="LOG")
    if package is not None:
        if repo is not None:
            raise typer.BadParameter("give --repo PATH or --package NAME, not both", param_hint="--package")
        repo = _targets([], [package], python)[0][0]
    if revert and (baseline is None or repo is None):
        raise typer.BadParameter("--revert needs --baseline LOG and --repo PATH (or --package NAME)", param_hint="--revert")

    def show_event(event) -> None:
        if fmt is Format.text:
            _out(render.event_text(event) + "\n")
        else:
            err.print(render.event_text(event), markup=False)

    def show_findings(found) -> None:
        if fmt is Format.json:
            _out(json.dumps(_document(render.checkup_json(found)), indent=2) + "\n")
        else:
            _out("".join(line + "\n" for line in render.checkup_text(found, recipe, str(repo) if repo else None)))
        if found.stopped:
            err.print(render.stopped_text(found), markup=False)

    found = checkup(
        log, rules, tp=tp, baseline=baseline, max_regression=max_regression, follow=follow, timeout=timeout,
        check_p2p=preflight, topology=topo, revert=(lambda: workflow.revert(recipe, repo, notify=_notify)) if revert else None,
        on_event=show_event, on_wait=_notify, on_findings=show_findings,
    )
    if revert and found.comparison is not None:
        err.print(render.revert_text(found, recipe, repo), markup=False)
    if found.exit_code:
        raise typer.Exit(found.exit_code)


recipe_app = typer.Typer(help="Work with recipe files.", no_args_is_help=True)
app.add_typer(recipe_app, name="recipe")


@recipe_app.command("test")
@boundary
def recipe_test(
    file: Path = typer.Argument(..., help="A recipe .toml file with [[test]] cases."),
    archs: Optional[str] = typer.Option(None, "--archs", metavar="ARCHS", help="Arch universe, e.g. sm_90,sm_100,sm_120."),
) -> None:
    """Run the before/after cases embedded in a recipe; exit 1 if any fails.

    Examples:

    \b
      codemod recipe test targets/recipes/sm120-enable.toml
    """
    chosen = recipes.load_recipe(file)
    if not chosen.tests:
        raise errors.RecipeInvalid("has no [[test]] cases", where=str(file), hint="add [[test]] tables with change, before and after")
    results = recipe_cases.run_cases(chosen, _universe(archs))
    for result in results:
        mark = "ok  " if result.ok else "FAIL"
        _out(f"{mark} {result.case.name}: {result.message}\n")
        if not result.ok and result.case.outcome == "changed":
            expected = (result.case.after or "").splitlines(keepends=True)
            _out("".join(difflib.unified_diff(expected, result.got.splitlines(keepends=True), "expected", "got")))
    failed = sum(not r.ok for r in results)
    _out(f"{len(results) - failed} passed, {failed} failed\n")
    deep = [r for r in results if r.too_deep]
    if deep:
        raise errors.PlanFailed(deep[0].too_deep, where=f"{file}: case {deep[0].case.name!r}", hint="nest it less deeply")
    if failed:
        raise typer.Exit(1)


_SCHEMAS = ("run", "status", "scan", "verify", "doctor", "error")


@app.command()
@boundary
def schema(
    command: str = typer.Argument(..., help=f"One of: {', '.join(_SCHEMAS)} (error: what any command prints on failure)."),
) -> None:
    """Print the JSON Schema of a command's --format json output.

    Examples:

    \b
      codemod schema run > run.schema.json
    """
    if command not in _SCHEMAS:
        raise errors.BadUsage(f"no schema for {command!r}", hint=f"choose one of: {', '.join(_SCHEMAS)}")
    from importlib.resources import files as resources

    _out(resources("codemods").joinpath("schemas").joinpath(f"{command}.schema.json").read_text(encoding="utf-8"))


def main() -> None:
    if "--debug" in sys.argv[2:]:  # accepted after the command too: `codemod run ... --debug`
        sys.argv = [sys.argv[0], *(a for a in sys.argv[1:] if a != "--debug")]
        _state["debug"] = True
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
