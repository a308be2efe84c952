"""run, status and revert: plan, check the repo, then write and commit one change at a time.

Order of a run, so that nothing is half-applied: plan everything and stop on
any failed gate; check the repo (HEAD, branch, clean files, permissions);
only then branch, write and commit. If a step fails after the branch exists,
the files are restored and the branch is removed before the error surfaces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from codemods import errors, files, recipes
from codemods.arch import DEFAULT_ARCHS, Arch
from codemods.recipes import Plan, PlannedChange, Recipe
from codemods.repo import TRAILER_BASE, TRAILER_CHANGE, TRAILER_RECIPE, Applied, Repo, ShadowRepo, branch_name, open_repo


@dataclass
class RunResult:
    plan: Plan
    prefix: str  # path of --repo inside the git work tree, with trailing slash (or "")
    selected: list[PlannedChange]
    status: str  # "dry-run", "applied", "already-enabled", "already-applied", "nothing-selected"
    branch: str = ""
    base: str = ""
    commits: list[tuple[str, str]] = field(default_factory=list)  # (sha, change id)


def prepare(recipe: Recipe, repo_path: Path, universe: tuple[Arch, ...] = DEFAULT_ARCHS,
            only: list[str] | None = None, skip: list[str] | None = None):
    """Recognise the project at repo_path and plan the recipe. Writes nothing, creates nothing.

    Returns (repo or None, plan, prefix): the repo is None when the folder is
    not in git and codemod has no shadow record of it yet.
    """
    if not repo_path.exists():
        raise errors.RepoState("path does not exist", where=str(repo_path), hint="check --repo")
    if not repo_path.is_dir():
        raise errors.RepoState("is a file, not a folder", where=str(repo_path), hint="point --repo at the project's folder")
    names = sorted({c.project for c in recipe.changes})
    target = recipes.detect(repo_path.resolve(), names)
    repo = None if ShadowRepo.wanted(repo_path) and not ShadowRepo.location(repo_path).joinpath("git").is_dir() else open_repo(repo_path)
    plan = recipes.plan(recipe, target, universe, only, skip, read=files.reader(target.root))
    prefix = ""
    if repo is not None:
        rel = repo.rel(target.root)
        prefix = "" if rel == "." else rel + "/"
    return repo, plan, prefix


def failed_error(plans: list[Plan]) -> errors.CodemodError:
    lines = [f"{plan.target.root}: {c.id}: {c.reason}" if len(plans) > 1 else f"{c.id}: {c.reason}" for plan in plans for c in plan.failed]
    return errors.PlanFailed(
        f"{len(lines)} change(s) of {plans[0].recipe.id} cannot be planned:\n  " + "\n  ".join(lines),
        where=str(plans[0].target.root) if len(plans) == 1 else "",
    )


def commit_message(plan: Plan, change: PlannedChange, prefix: str, base: str) -> str:
    targets = ", ".join(a.name for a in plan.targets)
    body = [f"codemod({plan.recipe.id}): {change.change.title}", ""]
    if change.change.why:
        body += [change.change.why, ""]
    body.append(f"Gates widened to admit {targets}:")
    for gc in change.gates:
        if gc.outcome == "changed":
            body.append(f"  {prefix}{change.file}:{gc.gate.line}  {' '.join(gc.gate.text.split())}  ->  {' '.join(gc.after_text.split())}")
    if plan.recipe.notes:
        body += ["", "Upstream notes:"] + [f"- {n}" for n in plan.recipe.notes]
    body += [
        "",
        f"{TRAILER_RECIPE}: {plan.recipe.id}",
        f"{TRAILER_CHANGE}: {change.id}",
        f"{TRAILER_BASE}: {base}",
    ]
    return "\n".join(body) + "\n"


def run(
    recipe: Recipe,
    repo_path: Path,
    *,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    dry_run: bool = False,
    only: list[str] | None = None,
    skip: list[str] | None = None,
    branch: str | None = None,
    choose: Callable[[list[PlannedChange]], list[PlannedChange]] | None = None,
) -> RunResult:
    """Plan, check and apply one repo (see run_many for several)."""
    return run_many(recipe, [repo_path], universe=universe, dry_run=dry_run, only=only, skip=skip, branch=branch, choose=choose)[0]


def run_many(
    recipe: Recipe,
    repo_paths: list[Path],
    *,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    dry_run: bool = False,
    only: list[str] | None = None,
    skip: list[str] | None = None,
    branch: str | None = None,
    choose: Callable[[list[PlannedChange]], list[PlannedChange]] | None = None,
) -> list[RunResult]:
    """Plan every repo first; apply only when all plans and checks pass; undo all if one apply fails."""
    prepared = [prepare(recipe, path, universe, only, skip) for path in repo_paths]
    failed = [plan for _, plan, _ in prepared if plan.failed]
    if failed:
        raise failed_error(failed)
    results: list[RunResult] = []
    pending = []
    for path, (repo, plan, prefix) in zip(repo_paths, prepared):
        if not plan.changed:
            name = branch or branch_name(recipe.id)
            on_branch = repo is not None and repo.head()[0] == name
            status = "already-applied" if on_branch else "already-enabled"
            results.append(RunResult(plan, prefix, [], status, branch=name if on_branch else ""))
        elif dry_run:
            results.append(RunResult(plan, prefix, choose(plan.changed) if choose else plan.changed, "dry-run"))
        else:
            repo = repo or open_repo(path, create_shadow=True)
            if repo.shadow:
                repo.ensure_base(plan.files(), f"pristine files of {plan.target.project.title} {plan.target.version()}".strip())
            _check(repo, plan, prefix, recipe, path, branch)
            result = RunResult(plan, prefix, [], "pending")
            results.append(result)
            pending.append((repo, result))
    if dry_run or not pending:
        return results
    for repo, result in pending:
        result.selected = choose(result.plan.changed) if choose else result.plan.changed
    applied = []
    try:
        for repo, result in pending:
            if not result.selected:
                result.status = "nothing-selected"
                continue
            _apply(repo, result, branch or branch_name(recipe.id))
            applied.append((repo, result))
    except BaseException:
        for repo, result in reversed(applied):
            _undo(repo, result)
        raise
    return results


def _check(repo: Repo, plan: Plan, prefix: str, recipe: Recipe, path: Path, branch: str | None) -> None:
    """Refuse before anything is written: detached HEAD, changed files, an existing branch, permissions."""
    head_branch, head_sha = repo.head()
    rels = [f"{prefix}{f}" for f in plan.files()]
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


def _apply(repo: Repo, result: RunResult, name: str) -> None:
    plan, prefix = result.plan, result.prefix
    head_branch, head_sha = repo.head()
    result.base = f"{head_branch}@{head_sha}" if head_branch else head_sha
    repo.create_branch(name)
    result.branch = name
    written: list[str] = []
    try:
        for change in result.selected:
            rel = f"{prefix}{change.file}"
            files.write_atomic(files.inside(repo.root, rel), _content_for(plan, change, result.selected))
            written.append(rel)
            sha = repo.commit([rel], commit_message(plan, change, prefix, result.base))
            result.commits.append((sha, change.id))
    except BaseException:
        _roll_back(repo, written, head_branch or head_sha, name)
        raise
    result.status = "applied"


def _undo(repo: Repo, result: RunResult) -> None:
    """Take back a finished apply of this run (another repo of the same run failed)."""
    base = result.base.rpartition("@")[0] or result.base
    _roll_back(repo, [], base, result.branch)
    result.status = "rolled-back"


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


def _roll_back(repo: Repo, written: list[str], base: str, name: str) -> None:
    try:
        repo.restore(written)
        repo.checkout(base)
        repo.delete_branch(name)
    except Exception:  # the original error matters more; status shows the branch if it is left
        pass


@dataclass
class RevertResult:
    record: Applied
    mode: str  # "deleted-branch", "reverted-commits" or "forgotten"
    checked_out: str = ""
    reverted: list[str] = field(default_factory=list)


def status(repo_path: Path) -> tuple[Repo, list[Applied], list[str]]:
    """The applied recipes, and (for installed packages) files changed behind codemod's back."""
    repo = open_repo(repo_path)
    records = repo.applied()
    drift = repo.dirty(repo.tracked_files()) if repo.shadow else []
    return repo, records, drift


def revert(recipe_id: str, repo_path: Path, *, keep_commits: bool = False, forget: bool = False) -> RevertResult:
    repo = open_repo(repo_path)
    if forget:
        if not repo.shadow:
            raise errors.RevertRefused("--forget only applies to folders outside git (installed packages)", where=str(repo.root))
        records = [r for r in repo.applied() if r.recipe == recipe_id]
        repo.forget()
        return RevertResult(records[0] if records else Applied(recipe_id, "", "", ""), "forgotten")
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
    if keep_commits:
        if not record.current:
            repo.checkout(record.branch)
        repo.revert_commits([c.sha for c in record.commits])
        return RevertResult(record, "reverted-commits", checked_out=record.branch, reverted=[c.sha for c in record.commits])
    checked_out = ""
    if record.current:
        base_exists = bool(record.base_ref) and repo.branch_exists(record.base_ref)
        checked_out = record.base_ref if base_exists else record.base_sha
        repo.checkout(checked_out)
    repo.delete_branch(record.branch)
    return RevertResult(record, "deleted-branch", checked_out=checked_out, reverted=[c.sha for c in record.commits])
