"""run: plan every tree, check its repository, then write and commit one change at a time on a branch.

Order of a run, so that nothing is half-applied: plan everything and stop on
any failed gate; check the repo (HEAD, branch, clean files, permissions);
only then branch, write and commit. If a step fails after the branch exists,
the files are restored and the branch is removed before the error surfaces.
"""

from __future__ import annotations

import os
import shlex
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable

from codemods.core import commands, errors
from codemods.apply import files
from codemods.apply import journal
from codemods.recipes.model import upstream_advice as recipe_advice
from codemods.plan import planner
from codemods.plan.changes import half_patches
from codemods.jit import cache as jit_cache
from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.plan.changes import Plan, PlannedChange
from codemods.recipes.model import Recipe
from codemods.apply.commit_message import commit_message, describe_half_patch
from codemods.apply.recovery import content_hash, recover_interrupted
from codemods.apply.rollback import PutBack, put_back
from codemods.apply.repo import Repo, as_codemod_error, bad_branch_name, branch_name
from codemods.apply.workspace import Workspace


@dataclass
class RunResult:
    plan: Plan
    prefix: str  # path of --repo inside the git work tree, with trailing slash (or "")
    selected: list[PlannedChange]
    status: str  # "dry-run", "applied", "already-enabled", "already-applied", "not-in-this-version", "nothing-selected"
    branch: str = ""
    base: str = ""
    commits: list[tuple[str, str]] = field(default_factory=list)  # (sha, change id)
    forced: list[tuple[str, str, str]] = field(default_factory=list)  # half-patches applied with --force (plan.changes.half_patches)
    would_refuse: errors.CodemodError | None = None  # dry run: why the real run would stop before writing

    @property
    def forced_reasons(self) -> list[str]:
        """The half-patches applied with --force, in words."""
        return [describe_half_patch(p) for p in self.forced]


def prepare(recipe: Recipe, spot: Workspace | Path, universe: tuple[Arch, ...] = DEFAULT_ARCHS,
            only: list[str] | None = None, skip: list[str] | None = None,
            force: bool = False, offer_off: bool = False):
    """Recognise the project in the tree and plan the recipe. Writes nothing, creates nothing.

    Returns (repo or None, plan, prefix): the repo is None when the folder is
    not in git and codemod has no shadow record of it yet.
    """
    workspace = Workspace.of(spot)
    repo = workspace.repo
    target = workspace.detect(c.project for c in recipe.changes)
    plan = planner.plan(recipe, target, universe, only, skip, read=files.reader(target.root), force=force, offer_off=offer_off)
    prefix = ""
    if repo is not None:
        rel = repo.rel(target.root)
        prefix = "" if rel == "." else rel + "/"
    return repo, plan, prefix


def failed_error(plans: list[Plan]) -> errors.CodemodError:
    lines = [f"{plan.tree.root}: {c.id}: {c.reason}" if len(plans) > 1 else f"{c.id}: {c.reason}" for plan in plans for c in plan.failed]
    why = {c.failure for plan in plans for c in plan.failed}
    error = errors.AmbiguousSelector if why == {"ambiguous"} else errors.ChangesDispatch if why == {"dispatch"} else errors.PlanFailed
    return error(
        f"{len(lines)} change(s) of {plans[0].recipe.id} cannot be planned:\n  " + "\n  ".join(lines),
        where=str(plans[0].tree.root) if len(plans) == 1 else "",
    )


def run(recipe: Recipe, spot: Workspace | Path, **options) -> RunResult:
    """Plan, check and apply one repo (see run_many for several)."""
    return run_many(recipe, [spot], **options)[0]


def run_many(
    recipe: Recipe,
    spots: list[Workspace | Path],
    *,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    dry_run: bool = False,
    only: list[str] | None = None,
    skip: list[str] | None = None,
    branch: str | None = None,
    choose: Callable[[list[PlannedChange]], list[PlannedChange]] | None = None,
    notify: Callable[[str], None] = lambda message: None,
    force: bool = False,
    planned: Callable[[list[Plan]], None] = lambda plans: None,
) -> list[RunResult]:
    """Plan every repo first; apply only when all plans and checks pass; undo all if one apply fails.

    `planned` sees every plan before anything is chosen or applied (and before a
    failed plan is raised): the CLI says its notes there only when there is work.

    Targets that share a git repository (flashinfer and sglang in one
    site-packages) share one codemod branch and one base. A real run holds
    each repository's lock from before planning to the end, and first puts
    back any run that was interrupted there.
    """
    check_names(recipe, branch)
    trees = [Workspace.of(spot) for spot in spots]
    try:
        return _run_many(recipe, trees, universe, dry_run, only, skip, branch, choose, notify, force, planned)
    except Exception as exc:  # a git command or the file system failed: the user's to fix, never an internal error
        caught = None if isinstance(exc, errors.CodemodError) else as_codemod_error(exc, trees[0].path)
        if caught is None:
            raise
        raise caught from None


def _run_many(recipe, trees, universe, dry_run, only, skip, branch, choose, notify, force, planned) -> list[RunResult]:
    if dry_run:
        return _run_locked(recipe, trees, universe, dry_run, only, skip, branch, choose, force, notify, planned)
    with ExitStack() as stack:
        one_per_folder: dict[Path, Workspace] = {}
        for workspace in trees:
            one_per_folder.setdefault(workspace.root, workspace)
        for workspace in one_per_folder.values():
            state = workspace.state_dir
            if state is None:
                continue
            stale = stack.enter_context(journal.locked(state, f"run {recipe.id}"))
            if stale:
                notify(f"took over the lock of an interrupted codemod (pid {stale}, no longer running)")
            recover_interrupted(workspace, notify)
        return _run_locked(recipe, trees, universe, dry_run, only, skip, branch, choose, force, notify, planned)


def _run_locked(recipe, spots, universe, dry_run, only, skip, branch, choose, force=False, notify=lambda m: None, planned=lambda p: None) -> list[RunResult]:
    offer_off = choose is not None and not only  # --interactive also asks about changes that are off by default
    prepared = [(ws, *prepare(recipe, ws, universe, only, skip, force, offer_off)) for ws in spots]
    planned([plan for _, _, plan, _ in prepared])
    failed = [plan for _, _, plan, _ in prepared if plan.failed]
    if failed:
        raise failed_error(failed)
    name = branch or branch_name(recipe.id)
    results: list[RunResult] = []
    groups: dict[str, tuple[Repo, list[RunResult]]] = {}
    for workspace, repo, plan, prefix in prepared:
        if not plan.changed:
            on_branch = repo is not None and repo.head()[0] == name
            status = "already-applied" if on_branch else "already-enabled"
            if not on_branch and plan.changes and all(c.outcome == "skipped" for c in plan.changes):
                status = "not-in-this-version"  # nothing was read, so nothing can be said to admit the archs
            results.append(RunResult(plan, prefix, [], status, branch=name if on_branch else ""))
            continue
        if dry_run:
            result = RunResult(plan, prefix, choose(plan.changed) if choose else plan.changed, "dry-run")
            _refuse_half_patches(result, force, [p for _, _, p, _ in prepared])
            if repo is not None:
                try:
                    _check(repo, plan, prefix, recipe, workspace, branch)
                except errors.CodemodError as refusal:
                    result.would_refuse = refusal
                    notify(
                        f"the real run will refuse (exit {refusal.exit_code}): {refusal}"
                        + (f"; {refusal.hint}" if refusal.hint else "")
                    )
            results.append(result)
            continue
        repo = workspace.open(create=True)
        journal.checkpoint(repo.ready_step)
        repo = groups.get(repo.key, (repo, []))[0]
        repo.ensure_base(plan.files(), f"pristine files of {plan.tree.project.title} {plan.tree.version()}".strip())
        _check(repo, plan, prefix, recipe, workspace, branch)
        result = RunResult(plan, prefix, [], "pending")
        results.append(result)
        groups.setdefault(repo.key, (repo, []))[1].append(result)
    if dry_run or not groups:
        return results
    for _, pending in groups.values():
        for result in pending:
            result.selected = choose(result.plan.changed) if choose else result.plan.changed
            _refuse_half_patches(result, force, [p for _, _, p, _ in prepared])
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


def _refuse_half_patches(result: RunResult, force: bool, plans: list[Plan] | None = None) -> None:
    """Stop (exit 3, nothing written) when the selection leaves out a change a selected one needs, in this tree or
    another project's (`plans`: every tree of the run); --force records it."""
    problems = half_patches(result.plan, result.selected, plans or ())
    if not problems:
        return
    if force:
        result.forced = problems
        return
    lines = [describe_half_patch(p) for p in problems]
    missing = sorted({needed for _, needed, _ in problems})
    raise errors.PlanFailed(
        "this selection would leave a half-patch (a JIT spec admitting an arch whose kernel guards still drop it "
        "compiles empty kernels that return garbage; a serving engine's fusion turned on where FlashInfer's JIT "
        "still refuses the arch fails when it starts):\n  " + "\n  ".join(lines),
        where=str(result.plan.tree.root),
        hint=(
            f"select {' and '.join(missing)} too (--only; another project's tree with --package or --repo), "
            "or pass --force to apply it anyway (recorded in the commit); nothing was written"
        ),
    )


def _apply_all(groups: list[tuple[Repo, list[RunResult]]], name: str, recipe_id: str) -> None:
    """Branch once per repo and commit each selected change; on any failure undo every repo of the run.

    Each repo's journal names the base and the bytes each file will end up
    with, and keeps the files' bytes from before the run, so an interrupted
    run can be put back exactly (recover_interrupted). Every write goes
    through files.rewrite, which never loses a byte another process writes
    meanwhile; so does the rollback (rollback.put_back), whose result the
    error reports as checked, not as hoped.
    """
    started: list[tuple[Repo, str, dict[str, list[bytes]]]] = []  # (repo, base to go back to, rel -> known bytes)
    try:
        for repo, results in groups:
            chosen = [r for r in results if r.selected]
            if not chosen:
                continue
            head_branch, head_sha = repo.head()
            base = f"{head_branch}@{head_sha}" if head_branch else head_sha
            expected: dict[str, str] = {}
            originals: dict[str, str] = {}
            for r in chosen:
                for c in r.selected:
                    rel = repo.rel(files.inside(repo.root, f"{r.prefix}{c.file}"))
                    expected[rel] = content_hash(_content_for(r.plan, c, r.selected))
                    if rel not in originals:
                        originals[rel] = journal.keep_original(repo.state_dir, c.before)
            entry = {
                "op": "run", "recipe": recipe_id, "branch": name, "base_ref": head_branch or "", "base_sha": head_sha,
                "files": expected, "originals": originals, "step": "started", "pid": os.getpid(), "started_ns": time.time_ns(),
            }
            journal.step(repo.state_dir, entry, "journal-written")
            states: dict[str, list[bytes]] = {}  # rel -> its bytes before the run, then each version codemod wrote
            started.append((repo, head_branch or head_sha, states))
            repo.create_branch(name)
            journal.step(repo.state_dir, entry, "branch-created")
            for result in chosen:
                result.base, result.branch = base, name
                for change in result.selected:
                    path = files.inside(repo.root, f"{result.prefix}{change.file}")
                    rel = repo.rel(path)  # a symlink inside the repo: commit the file it points to
                    content = _content_for(result.plan, change, result.selected)
                    known = states.setdefault(rel, [change.before])
                    last = known[-1]
                    known.append(content)
                    done = files.rewrite(path, _unless_changed(last, content))
                    if done.written is None or done.late:
                        _stop_for_foreign_write(repo, rel)
                    journal.step(repo.state_dir, entry, f"written:{change.id}")
                    recorded = (repo.file_change(rel),)  # what revert checks the commit against
                    sha = repo.commit([rel], commit_message(result.plan, change, result.prefix, base, result.forced,
                                                            branch=name, files=recorded))
                    result.commits.append((sha, change.id))
                    if not repo.stores_as_committed(sha, rel, content):  # git committed bytes another process wrote meanwhile
                        _stop_for_foreign_write(repo, rel)
                    journal.step(repo.state_dir, entry, f"committed:{change.id}")
                result.status = "applied"
            for rel, known in states.items():  # nothing written behind codemod's back while it went on
                _unchanged_since_written(repo, rel, known[-1])
        for repo, _, _ in started:
            journal.clear(repo.state_dir)
            journal.checkpoint("journal-cleared")
    except BaseException as stop:
        outcomes = []
        for repo, back_to, states in reversed(started):
            outcome = put_back(repo, states, back_to, name)
            outcomes.append(outcome)
            if outcome.complete:
                journal.clear(repo.state_dir)  # else the journal stays: the next command puts the repo back
        for _, results in groups:
            for result in results:
                if result.status == "applied":
                    result.status = "rolled-back"
        caught = stop if isinstance(stop, errors.CodemodError) else as_codemod_error(stop, groups[0][0].root)
        if caught is None:
            raise
        _report_rollback(caught, outcomes, name, recipe_id, groups[0][0].root)
        if caught is stop:
            raise
        raise caught from None


def _report_rollback(stop: errors.CodemodError, outcomes: list[PutBack], name: str, recipe_id: str, root: Path) -> None:
    """Say in the error what the rollback did, as checked after it (never "nothing was left half-done" unchecked)."""
    if not outcomes:
        return
    if all(o.complete for o in outcomes):
        said = f"codemod stopped, deleted its branch {name} and put back every file it had changed"
        kept = [o for o in outcomes if o.kept]
        if kept:
            said += "; no byte of another process was lost: " + "; ".join(o.describe() for o in kept)
        stop.hint = f"{said}. {stop.hint}" if stop.hint else said
        if isinstance(stop, errors.RepoState) and stop.message.endswith(_FOREIGN):
            stop.message += "; no byte of it was lost"
        return
    broken = "; ".join(o.describe() for o in outcomes if not o.complete)
    stop.hint = (
        f"codemod stopped, but {broken}. Its journal keeps the run: once the cause is gone, "
        f"`codemod revert {recipe_id} --repo {shlex.quote(str(root))}` (or the next `codemod run`) puts the repository back"
        + (f". {stop.hint}" if stop.hint else "")
    )


def _check(repo: Repo, plan: Plan, prefix: str, recipe: Recipe, tree: Workspace, branch: str | None) -> None:
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
    repo.refuse_hidden(rels)
    repo.refuse_changed(repo.dirty(rels), head_branch)
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
        if existing.reverted:
            raise errors.RepoState(
                f"recipe {existing.recipe} was reverted on {name} with its commits kept (revert --keep-commits), "
                f"so that branch name is taken",
                where=str(repo.root),
                hint=f"`{commands.codemod('run', recipe.id, '--branch', name + '-2', trees=[tree])}` applies it again "
                f"on a new branch; or delete {name} yourself first",
            )
        if existing.worktree:  # git refuses to check out a branch another worktree has checked out
            hint = (f"it is checked out in the worktree {existing.worktree}: use it there, or "
                    f"`{commands.codemod('revert', recipe.id, '--repo', existing.worktree)}` to remove it")
        else:
            hint = (f"`{commands.shell('git', 'checkout', name)}` to use it, "
                    f"or `{commands.codemod('revert', recipe.id, trees=[tree])}` to remove it")
        raise errors.RepoState(
            f"recipe {existing.recipe} is already applied on {name} (base {existing.base_ref or existing.base_sha[:12]}), but HEAD is on {head_branch or head_sha[:12]}",
            where=str(repo.root),
            hint=hint,
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


_FOREIGN = "(another process wrote to it)"


def _unless_changed(last: bytes, content: bytes) -> Callable[[bytes], bytes | None]:
    """rewrite's transform for a run: codemod's bytes, only over the bytes it read or wrote last."""
    return lambda found: content if found == last else None


def _unchanged_since_written(repo: Repo, rel: str, expected: bytes) -> None:
    """Stop (exit 5) when another process changed `rel` since codemod wrote it."""
    try:
        same = files.inside(repo.root, rel).read_bytes() == expected
    except OSError:
        same = False
    if not same:
        _stop_for_foreign_write(repo, rel)


def _stop_for_foreign_write(repo: Repo, rel: str) -> None:
    """Raise exit 5; the rollback keeps the other process's bytes and says so (_report_rollback)."""
    raise errors.RepoState(
        f"{rel} changed while codemod was working on it {_FOREIGN}",
        where=str(repo.root),
        hint=f"{rel} keeps every byte the other process wrote, uncommitted (see `git diff`); "
        "when it is done, commit or stash, then run again",
    )


def upstream_advice(recipe: Recipe, workspaces: list[Workspace]) -> list[tuple[Workspace, str]]:
    """The recipe's upgrade advice for each tree whose project it can recognise (run reports the others)."""
    advice = []
    for workspace in workspaces:
        try:
            target = workspace.detect(c.project for c in recipe.changes)
        except (errors.CodemodError, OSError):
            continue
        advice += [(workspace, line) for line in recipe_advice(recipe, target)]
    return advice


def jit_caches(results: list[RunResult], clear: bool, dry_run: bool) -> list[dict | None]:
    """Per tree, FlashInfer's cached builds of the JIT modules the run changed (removed with `clear`)."""
    return [
        jit_cache.affected(r.plan.jit_modules(), r.plan.tree, clear and r.status in ("applied", "dry-run"), dry_run)
        for r in results
    ]
