"""run, status and revert: plan, check the repo, then write and commit one change at a time.

Order of a run, so that nothing is half-applied: plan everything and stop on
any failed gate; check the repo (HEAD, branch, clean files, permissions);
only then branch, write and commit. If a step fails after the branch exists,
the files are restored and the branch is removed before the error surfaces.
"""

from __future__ import annotations

import hashlib
import os
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from codemods.core import errors
from codemods.apply import files
from codemods.apply import journal
from codemods.recipes import load as recipes
from codemods.apply.files import require_folder, resolved
from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.plan import planner
from codemods.plan.changes import Plan, PlannedChange, half_patches
from codemods.recipes.model import Recipe
from codemods.apply.repo import (
    TRAILER_BASE, TRAILER_CHANGE, TRAILER_FORCED, TRAILER_RECIPE, Applied, Repo, ShadowRepo, bad_branch_name, branch_name, open_repo,
    refuse_unusable,
)


@dataclass
class RunResult:
    plan: Plan
    prefix: str  # path of --repo inside the git work tree, with trailing slash (or "")
    selected: list[PlannedChange]
    status: str  # "dry-run", "applied", "already-enabled", "already-applied", "nothing-selected"
    branch: str = ""
    base: str = ""
    commits: list[tuple[str, str]] = field(default_factory=list)  # (sha, change id)
    forced: list[tuple[str, str, str]] = field(default_factory=list)  # half-patches applied with --force (plan.changes.half_patches)
    would_refuse: errors.CodemodError | None = None  # dry run: why the real run would stop before writing


def prepare(recipe: Recipe, repo_path: Path, universe: tuple[Arch, ...] = DEFAULT_ARCHS,
            only: list[str] | None = None, skip: list[str] | None = None, project: str | None = None,
            force: bool = False, offer_off: bool = False):
    """Recognise the project at repo_path and plan the recipe. Writes nothing, creates nothing.

    Returns (repo or None, plan, prefix): the repo is None when the folder is
    not in git and codemod has no shadow record of it yet.
    """
    require_folder(repo_path)
    refuse_unusable(repo_path)
    names = [project] if project else sorted({c.project for c in recipe.changes})
    target = recipes.detect(repo_path.resolve(), names)
    repo = None if ShadowRepo.wanted(repo_path) and not ShadowRepo.location(repo_path).joinpath("git").is_dir() else open_repo(repo_path)
    plan = planner.plan(recipe, target, universe, only, skip, read=files.reader(target.root), force=force, offer_off=offer_off)
    prefix = ""
    if repo is not None:
        rel = repo.rel(target.root)
        prefix = "" if rel == "." else rel + "/"
    return repo, plan, prefix


def failed_error(plans: list[Plan]) -> errors.CodemodError:
    lines = [f"{plan.tree.root}: {c.id}: {c.reason}" if len(plans) > 1 else f"{c.id}: {c.reason}" for plan in plans for c in plan.failed]
    return errors.PlanFailed(
        f"{len(lines)} change(s) of {plans[0].recipe.id} cannot be planned:\n  " + "\n  ".join(lines),
        where=str(plans[0].tree.root) if len(plans) == 1 else "",
    )


_LISTED_GATES = 40


def commit_message(plan: Plan, change: PlannedChange, prefix: str, base: str, half_patches=()) -> str:
    targets = ", ".join(a.name for a in plan.targets)
    body = [f"codemod({plan.recipe.id}): {change.change.title}", ""]
    if change.change.why:
        body += [change.change.why, ""]
    if change.rewrites:
        body.append("Replaced (host code, the same on every arch):")
        body += [f"  {prefix}{change.file}:{line}  {before}  ->  {after}" for line, before, after in change.rewrites]
    changed = [gc for gc in change.gates if gc.outcome == "changed"]
    if changed or not change.rewrites:
        body.append(f"Gates widened to admit {targets}:")
    for gc in changed[:_LISTED_GATES]:
        body.append(f"  {prefix}{change.file}:{gc.gate.line}  {' '.join(gc.gate.text.split())}  ->  {' '.join(gc.after_text.split())}")
    if len(changed) > _LISTED_GATES:
        body.append(f"  ... and {len(changed) - _LISTED_GATES} more in {prefix}{change.file}")
    blockers = [(gc, b) for gc in changed for b in gc.forced]
    if blockers:
        body += ["", "Widened with --force despite these blockers:"]
        body += [f"  {prefix}{change.file}:{gc.gate.line}: {blocker}" for gc, blocker in blockers]
    unchecked = [(gc, w) for gc in changed for w in gc.warnings]
    if unchecked:
        body += ["", "Not fully checked (codemod could not follow these paths):"]
        body += [f"  {prefix}{change.file}:{gc.gate.line}: {warning}" for gc, warning in unchecked]
    if plan.recipe.notes:
        body += ["", "Upstream notes:"] + [f"- {n}" for n in plan.recipe.notes]
    body += [
        "",
        f"{TRAILER_RECIPE}: {plan.recipe.id}",
        f"{TRAILER_CHANGE}: {change.id}",
        f"{TRAILER_BASE}: {base}",
    ]
    body += [f"{TRAILER_FORCED}: {describe_half_patch(p)}" for p in half_patches if p[0] == change.id]
    if blockers:
        body.append(f"{TRAILER_FORCED}: {change.id} widened gates around instructions {', '.join(a.name for a in plan.targets)} lack")
    return "\n".join(body) + "\n"


Spot = Path | tuple[Path, str | None]  # a folder, or a folder and the project expected there


def _spot(spot: Spot) -> tuple[Path, str | None]:
    return spot if isinstance(spot, tuple) else (spot, None)


def run(recipe: Recipe, repo_path: Path, **options) -> RunResult:
    """Plan, check and apply one repo (see run_many for several)."""
    return run_many(recipe, [repo_path], **options)[0]


def run_many(
    recipe: Recipe,
    spots: list[Spot],
    *,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    dry_run: bool = False,
    only: list[str] | None = None,
    skip: list[str] | None = None,
    branch: str | None = None,
    choose: Callable[[list[PlannedChange]], list[PlannedChange]] | None = None,
    notify: Callable[[str], None] = lambda message: None,
    force: bool = False,
) -> list[RunResult]:
    """Plan every repo first; apply only when all plans and checks pass; undo all if one apply fails.

    Targets that share a git repository (flashinfer and sglang in one
    site-packages) share one codemod branch and one base. A real run holds
    each repository's lock from before planning to the end, and first puts
    back any run that was interrupted there.
    """
    check_names(recipe, branch)
    if dry_run:
        return _run_locked(recipe, spots, universe, dry_run, only, skip, branch, choose, force, notify)
    with ExitStack() as stack:
        for path in dict.fromkeys(resolved(path) for path, _ in map(_spot, spots)):
            state = state_dir_for(path)
            if state is None:
                continue
            stale = stack.enter_context(journal.locked(state, f"run {recipe.id}"))
            if stale:
                notify(f"took over the lock of an interrupted codemod (pid {stale}, no longer running)")
            recover_interrupted(path, notify)
        return _run_locked(recipe, spots, universe, dry_run, only, skip, branch, choose, force, notify)


def _run_locked(recipe, spots, universe, dry_run, only, skip, branch, choose, force=False, notify=lambda m: None) -> list[RunResult]:
    offer_off = choose is not None and not only  # --interactive also asks about changes that are off by default
    prepared = [(path, *prepare(recipe, path, universe, only, skip, project, force, offer_off)) for path, project in map(_spot, spots)]
    failed = [plan for _, _, plan, _ in prepared if plan.failed]
    if failed:
        raise failed_error(failed)
    name = branch or branch_name(recipe.id)
    results: list[RunResult] = []
    groups: dict[str, tuple[Repo, list[RunResult]]] = {}
    for path, repo, plan, prefix in prepared:
        if not plan.changed:
            on_branch = repo is not None and repo.head()[0] == name
            status = "already-applied" if on_branch else "already-enabled"
            results.append(RunResult(plan, prefix, [], status, branch=name if on_branch else ""))
            continue
        if dry_run:
            result = RunResult(plan, prefix, choose(plan.changed) if choose else plan.changed, "dry-run")
            _refuse_half_patches(result, force)
            if repo is not None:
                try:
                    _check(repo, plan, prefix, recipe, path, branch)
                except errors.CodemodError as refusal:
                    result.would_refuse = refusal
                    notify(
                        f"the real run will refuse (exit {refusal.exit_code}): {refusal}"
                        + (f"; {refusal.hint}" if refusal.hint else "")
                    )
            results.append(result)
            continue
        repo = repo or open_repo(path, create_shadow=True)
        journal.checkpoint("shadow-ready" if repo.shadow else "repo-ready")
        repo = groups.get(repo.key, (repo, []))[0]
        if repo.shadow:
            repo.ensure_base(plan.files(), f"pristine files of {plan.tree.project.title} {plan.tree.version()}".strip())
            journal.checkpoint("base-recorded")
        _check(repo, plan, prefix, recipe, path, branch)
        result = RunResult(plan, prefix, [], "pending")
        results.append(result)
        groups.setdefault(repo.key, (repo, []))[1].append(result)
    if dry_run or not groups:
        return results
    for _, pending in groups.values():
        for result in pending:
            result.selected = choose(result.plan.changed) if choose else result.plan.changed
            _refuse_half_patches(result, force)
            if not result.selected:
                result.status = "nothing-selected"
    _apply_all(list(groups.values()), name, recipe.id)
    return results


def check_names(recipe: Recipe, branch: str | None = None) -> None:
    """Refuse, before anything is read or written, a branch name git would not accept.

    The recipe id names the branch (codemod/<id>): a bad one is the recipe's
    fault (exit 8); a bad --branch is bad usage (exit 2).
    """
    problem = bad_branch_name(branch_name(recipe.id))
    if problem:
        raise errors.RecipeInvalid(
            f"recipe id {recipe.id!r} cannot name the branch {branch_name(recipe.id)}: {problem}",
            where=str(recipe.path), hint="rename the recipe (its id names the branch codemod/<id>)",
        )
    if branch is not None:
        problem = bad_branch_name(branch)
        if problem:
            raise errors.BadUsage(f"--branch {branch!r}: {problem}", hint="for example --branch codemod/sm120-enable-try2")


def describe_half_patch(problem: tuple[str, str, str]) -> str:
    change, needed, state = problem
    return f"{change} needs {needed}, which {state}"


def _refuse_half_patches(result: RunResult, force: bool) -> None:
    """Stop (exit 3, nothing written) when the selection leaves out a change a selected one needs; --force records it."""
    problems = half_patches(result.plan, result.selected)
    if not problems:
        return
    if force:
        result.forced = problems
        return
    lines = [describe_half_patch(p) for p in problems]
    missing = sorted({needed for _, needed, _ in problems})
    raise errors.PlanFailed(
        "this selection would leave a half-patch (a JIT spec admitting an arch whose kernel guards still drop it "
        "compiles empty kernels that return garbage):\n  " + "\n  ".join(lines),
        where=str(result.plan.tree.root),
        hint=f"select {' and '.join(missing)} too (--only), or pass --force to apply it anyway (recorded in the commit); nothing was written",
    )


def state_dir_for(path: Path) -> Path | None:
    """Where the lock and journal for the tree at path live (None: not a repo codemod can use)."""
    try:
        if ShadowRepo.wanted(path):
            return ShadowRepo.location(path) / "state"
        return open_repo(path).state_dir
    except errors.CodemodError:
        return None


def _apply_all(groups: list[tuple[Repo, list[RunResult]]], name: str, recipe_id: str) -> None:
    """Branch once per repo and commit each selected change; on any failure undo every repo of the run.

    Each repo's journal names the base and the bytes each file will end up
    with, so an interrupted run can be put back exactly (recover_interrupted).
    """
    started: list[tuple[Repo, str, list[str]]] = []  # (repo, base to go back to, files written)
    foreign: dict[Path, bytes] = {}  # files another process wrote while we worked: their bytes are kept
    try:
        for repo, results in groups:
            chosen = [r for r in results if r.selected]
            if not chosen:
                continue
            head_branch, head_sha = repo.head()
            base = f"{head_branch}@{head_sha}" if head_branch else head_sha
            expected = {
                repo.rel(files.inside(repo.root, f"{r.prefix}{c.file}")): _sha256(_content_for(r.plan, c, r.selected))
                for r in chosen for c in r.selected
            }
            entry = {
                "op": "run", "recipe": recipe_id, "branch": name, "base_ref": head_branch or "", "base_sha": head_sha,
                "files": expected, "step": "started", "pid": os.getpid(), "started_ns": time.time_ns(),
            }
            _step(repo, entry, "journal-written")
            repo.create_branch(name)
            written: list[str] = []
            started.append((repo, head_branch or head_sha, written))
            _step(repo, entry, "branch-created")
            on_disk: dict[str, bytes] = {}  # what codemod read or wrote last, per file
            for result in chosen:
                result.base, result.branch = base, name
                for change in result.selected:
                    path = files.inside(repo.root, f"{result.prefix}{change.file}")
                    rel = repo.rel(path)  # a symlink inside the repo: commit the file it points to
                    content = _content_for(result.plan, change, result.selected)
                    _unchanged_since_read(repo, path, rel, on_disk.get(rel, change.before), foreign)
                    written.append(rel)
                    files.write_atomic(path, content)
                    _step(repo, entry, f"written:{change.id}")
                    sha = repo.commit([rel], commit_message(result.plan, change, result.prefix, base, result.forced))
                    result.commits.append((sha, change.id))
                    if repo.show(sha, rel) != content:  # git committed bytes another process wrote meanwhile
                        _stop_for_foreign_write(repo, path, rel, foreign)
                    on_disk[rel] = content
                    _step(repo, entry, f"committed:{change.id}")
                result.status = "applied"
            for rel, content in on_disk.items():  # nothing written behind codemod's back while it went on
                _unchanged_since_read(repo, repo.root / rel, rel, content, foreign)
        for repo, _, _ in started:
            journal.clear(repo.state_dir)
            journal.checkpoint("journal-cleared")
    except BaseException:
        for repo, back_to, written in reversed(started):
            if _roll_back(repo, written, back_to, name):
                journal.clear(repo.state_dir)  # else the journal stays: the next command puts the repo back
        for path, data in foreign.items():
            files.write_atomic(path, data)  # the other process's bytes, uncommitted, on the base branch
        for _, results in groups:
            for result in results:
                if result.status == "applied":
                    result.status = "rolled-back"
        raise


def _step(repo: Repo, entry: dict, step: str) -> None:
    entry["step"] = step
    journal.write(repo.state_dir, entry)
    journal.checkpoint(step.split(":")[0])


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def recover_interrupted(path: Path, notify: Callable[[str], None]) -> None:
    """Put back a run or revert that was killed part-way, from its journal. Caller holds the lock."""
    state = state_dir_for(path)
    entry = journal.read(state) if state else None
    if not entry:
        return
    repo = open_repo(path)
    if entry.get("corrupt"):
        raise errors.RepoState(
            f"codemod's journal cannot be read ({state / 'journal.json'})" + (f": {entry['raw']!r}" if entry.get("raw") else ""),
            where=str(repo.root),
            hint="check `git status` and `git branch`: check out your base branch and delete any codemod/ branch, "
            "then delete that file (for an installed package: `codemod revert RECIPE --package NAME --forget`)",
        )
    # git's locks from a git that codemod started and that died with it (killed process group)
    started = entry.get("started_ns")
    for lock in repo.git_locks():
        if isinstance(started, int) and lock.stat().st_mtime_ns >= started:
            lock.unlink(missing_ok=True)
            notify(f"removed {lock}, left by a git that the interrupted codemod started")
    repo.refuse_busy()
    branch, op = entry["branch"], entry["op"]
    base = entry["base_ref"] if entry.get("base_ref") and repo.branch_exists(entry["base_ref"]) else entry["base_sha"]
    if op == "run":
        rels = list(entry["files"])
        for rel in rels:
            current = files.inside(repo.root, rel)
            allowed = {entry["files"][rel]}
            original = repo.show(entry["base_sha"], rel)
            if original is not None:
                allowed.add(_sha256(original))
            if current.exists() and _sha256(current.read_bytes()) not in allowed:
                raise errors.RepoState(
                    f"{rel} changed after codemod's interrupted run (step {entry.get('step')}); codemod will not overwrite it",
                    where=str(repo.root),
                    hint="keep or discard that edit yourself (git diff), then run again",
                )
            files.remove_leftovers(current)
        repo.restore(rels)
    if repo.head()[0] == branch:
        repo.checkout(base)
    if repo.branch_exists(branch):
        record = next((a for a in repo.applied() if a.branch == branch), None)
        if record and record.foreign:
            raise errors.RepoState(f"branch {branch} has commits not made by codemod", where=str(repo.root), hint="move them, then run again")
        repo.delete_branch(branch)
    journal.clear(state)
    shown = base if base != entry["base_sha"] else base[:12]
    notify(f"recovered from an interrupted `{op} {entry.get('recipe')}` (stopped after step {entry.get('step')}): {repo.root} is back at {shown}")


def _check(repo: Repo, plan: Plan, prefix: str, recipe: Recipe, path: Path, branch: str | None) -> None:
    """Refuse before anything is written: git mid-operation, detached HEAD, changed files, an existing branch, permissions."""
    repo.refuse_busy()
    head_branch, head_sha = repo.head()
    rels = list(dict.fromkeys(repo.rel(files.inside(repo.root, f"{prefix}{f}")) for f in plan.files()))
    untracked = [r for r in rels if not repo.tracked(r)]
    if untracked:
        raise errors.DirtyTree(
            "not tracked by git: " + ", ".join(untracked),
            where=str(repo.root),
            hint="add and commit them first, so codemod can restore them exactly",
        )
    dirty = repo.dirty(rels)
    if dirty and repo.shadow:
        raise errors.DirtyTree(
            f"changed since codemod recorded them on {head_branch}: " + ", ".join(dirty),
            where=str(repo.root),
            hint="the package was probably reinstalled or upgraded; `codemod status` shows the record, "
            "`codemod revert RECIPE --repo PATH --forget` drops it without touching the files",
        )
    if dirty:
        raise errors.DirtyTree("uncommitted changes in files this recipe edits: " + ", ".join(dirty), where=str(repo.root))
    if head_branch is None and not branch:
        raise errors.RepoState(
            f"HEAD is detached at {head_sha[:12]}",
            where=str(repo.root),
            hint="check out the branch to patch (git switch NAME), or pass --branch NAME to name the codemod branch",
        )
    name = branch or branch_name(recipe.id)
    if repo.branch_exists(name):
        existing = next((a for a in repo.applied() if a.branch == name), None)
        if existing is None:
            raise errors.RepoState(
                f"branch {name} already exists and was not made by codemod",
                where=str(repo.root),
                hint="rename or delete that branch, or pass --branch NAME",
            )
        raise errors.RepoState(
            f"recipe {existing.recipe} is already applied on {name} (base {existing.base_ref or existing.base_sha[:12]}), but HEAD is on {head_branch or head_sha[:12]}",
            where=str(repo.root),
            hint=f"`git checkout {name}` to use it, or `codemod revert {recipe.id} --repo {path}` to remove it",
        )
    files.check_writable(repo.root, rels)


def _content_for(plan: Plan, change: PlannedChange, selected: list[PlannedChange]) -> bytes:
    """The file's bytes after this change and the selected changes before it on the same file."""
    content = None
    for c in plan.changes:
        if c.file != change.file:
            continue
        if content is None:
            content = c.before
        if c in selected and c.outcome == "changed":
            if c.before == content:
                content = c.after
            else:
                raise errors.PlanFailed(
                    f"{c.id} depends on a change you did not select in {c.file}",
                    hint="select both changes of that file, or neither",
                )
        if c is change:
            break
    return content if content is not None else change.after


def _unchanged_since_read(repo: Repo, path: Path, rel: str, expected: bytes, foreign: dict) -> None:
    """Stop (exit 5) when another process changed `rel` since codemod read or wrote it."""
    try:
        same = path.read_bytes() == expected
    except OSError:
        same = False
    if not same:
        _stop_for_foreign_write(repo, path, rel, foreign)


def _stop_for_foreign_write(repo: Repo, path: Path, rel: str, foreign: dict) -> None:
    """Raise exit 5; the bytes on disk now are kept (put back after the rollback) in `foreign`."""
    try:
        foreign[path] = path.read_bytes()
    except OSError:
        pass
    raise errors.RepoState(
        f"{rel} changed while codemod was working on it (another process wrote to it); "
        "codemod stopped, undid its branch and commits, and did not overwrite it",
        where=str(repo.root),
        hint=f"{rel} keeps the bytes it has now, uncommitted (see `git diff`); "
        "when it is done, commit or stash, then run again",
    )


def _roll_back(repo: Repo, written: list[str], base: str, name: str) -> bool:
    """Put the repo back at base; False when that failed (the journal then keeps the run for recovery)."""
    try:
        repo.restore(written)
        repo.checkout(base)
        repo.delete_branch(name)
    except Exception:  # the original error matters more; the kept journal tells status and the next run
        return False
    return True


@dataclass
class RevertResult:
    record: Applied
    mode: str  # "deleted-branch", "reverted-commits", "forgotten" or "recovered"
    checked_out: str = ""
    reverted: list[str] = field(default_factory=list)


def status(repo_path: Path) -> tuple[Repo, list[Applied], list[str], dict | None]:
    """The applied recipes, files changed behind codemod's back (installed packages), and an interrupted operation."""
    repo = open_repo(repo_path)
    records = repo.applied()
    drift = repo.dirty(repo.tracked_files()) if repo.shadow else []
    return repo, records, drift, journal.read(repo.state_dir)


def revert(recipe_id: str, repo_path: Path, *, keep_commits: bool = False, forget: bool = False,
           notify: Callable[[str], None] = lambda message: None, dry_run: bool = False) -> RevertResult:
    state = state_dir_for(repo_path)
    if dry_run:  # every check of a real revert, no lock, no journal, nothing written
        if state is None:
            open_repo(repo_path)
        entry = journal.read(state)
        if entry:
            raise errors.RevertRefused(
                f"an interrupted `{entry.get('op')} {entry.get('recipe')}` is recorded here",
                where=str(repo_path), hint="run the revert without --dry-run: it puts that operation back first",
            )
        return _revert_locked(recipe_id, repo_path, keep_commits, forget, state, dry_run=True)
    if state is None:
        open_repo(repo_path)  # raises the precise error
    with journal.locked(state, f"revert {recipe_id}") as stale:
        if stale:
            notify(f"took over the lock of an interrupted codemod (pid {stale}, no longer running)")
        entry = journal.read(state)
        if entry and not forget:
            # An interrupted run is put back to its base; an interrupted revert is finished.
            recover_interrupted(repo_path, notify)
            if entry.get("recipe") == recipe_id:
                return RevertResult(Applied(recipe_id, entry["branch"], entry.get("base_ref", ""), entry["base_sha"]), "recovered")
        return _revert_locked(recipe_id, repo_path, keep_commits, forget, state)


def _revert_locked(recipe_id: str, repo_path: Path, keep_commits: bool, forget: bool, state: Path,
                   dry_run: bool = False) -> RevertResult:
    repo = open_repo(repo_path)
    if forget:
        if not repo.shadow:
            raise errors.RevertRefused("--forget only applies to folders outside git (installed packages)", where=str(repo.root))
        records = [r for r in repo.applied() if r.recipe == recipe_id]
        if dry_run:
            return RevertResult(records[0] if records else Applied(recipe_id, "", "", ""), "would-forget")
        repo.forget()
        return RevertResult(records[0] if records else Applied(recipe_id, "", "", ""), "forgotten")
    repo.refuse_busy()
    records = [r for r in repo.applied() if r.recipe == recipe_id]
    if not records:
        raise errors.RevertRefused(
            f"recipe {recipe_id} is not applied here",
            where=str(repo.root),
            hint="`codemod status --repo PATH` lists what is applied",
        )
    record = next((r for r in records if r.current), records[0])
    if record.foreign and not keep_commits:
        listed = ", ".join(f"{sha[:10]} {subject!r}" for sha, subject in record.foreign)
        raise errors.RevertRefused(
            f"{len(record.foreign)} commit(s) on top of {record.branch} were not made by codemod: {listed}",
            where=str(repo.root),
            hint="pass --keep-commits to undo only the codemod commits with git revert and keep yours, "
            "or move your commits to another branch first",
        )
    tip = record.branch
    touched = repo.changed_files(record.base_sha, tip) if not keep_commits else [
        f for c in record.commits for f in repo.changed_files(f"{c.sha}^", c.sha)
    ]
    dirty = repo.dirty(touched)
    if dirty and repo.shadow:
        raise errors.RevertRefused(
            "changed since codemod applied the recipe: " + ", ".join(dirty),
            where=str(repo.root),
            hint="the package was probably reinstalled or upgraded, so there is nothing of codemod's to take out; "
            f"`codemod revert {recipe_id} --repo PATH --forget` drops codemod's record without touching the files",
        )
    if dirty:
        raise errors.DirtyTree(
            "uncommitted changes in files the recipe changed: " + ", ".join(dirty),
            where=str(repo.root),
            hint="commit or stash them first; revert never discards your edits",
        )
    if dry_run:
        base_exists = bool(record.base_ref) and repo.branch_exists(record.base_ref)
        checked_out = "" if keep_commits or not record.current else (record.base_ref if base_exists else record.base_sha)
        return RevertResult(record, "would-revert-commits" if keep_commits else "would-delete-branch",
                            checked_out=checked_out, reverted=[c.sha for c in record.commits])
    if keep_commits:
        if not record.current:
            repo.checkout(record.branch)
        repo.revert_commits([c.sha for c in record.commits])
        journal.checkpoint("commits-reverted")
        return RevertResult(record, "reverted-commits", checked_out=record.branch, reverted=[c.sha for c in record.commits])
    checked_out = ""
    entry = {"op": "revert", "recipe": recipe_id, "branch": record.branch, "base_ref": record.base_ref,
             "base_sha": record.base_sha, "step": "started", "pid": os.getpid(), "started_ns": time.time_ns()}
    _step(repo, entry, "revert-journal-written")
    if record.current:
        base_exists = bool(record.base_ref) and repo.branch_exists(record.base_ref)
        checked_out = record.base_ref if base_exists else record.base_sha
        repo.checkout(checked_out)
        _step(repo, entry, "base-checked-out")
    repo.delete_branch(record.branch)
    _step(repo, entry, "branch-deleted")
    journal.clear(state)
    journal.checkpoint("revert-journal-cleared")
    return RevertResult(record, "deleted-branch", checked_out=checked_out, reverted=[c.sha for c in record.commits])


def revert_many(recipe_id: str, spots: list[Spot], **options) -> list[tuple[Path, RevertResult]]:
    """Revert each distinct repository once (targets may share one)."""
    done: list[tuple[Path, RevertResult]] = []
    seen: set[str] = set()
    for path, _ in map(_spot, spots):
        key = open_repo(path).key
        if key in seen:
            continue
        seen.add(key)
        done.append((path, revert(recipe_id, path, **options)))
    return done
