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
from codemods.repo import TRAILER_BASE, TRAILER_CHANGE, TRAILER_RECIPE, Applied, Repo, branch_name


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
            only: list[str] | None = None, skip: list[str] | None = None, need_git: bool = True):
    """Open the repo (when needed), recognise the project and plan. Writes nothing."""
    if not repo_path.exists():
        raise errors.RepoState("path does not exist", where=str(repo_path), hint="check --repo")
    if not repo_path.is_dir():
        raise errors.RepoState("is a file, not a folder", where=str(repo_path), hint="point --repo at the project's folder")
    names = sorted({c.project for c in recipe.changes})
    target = recipes.detect(repo_path.resolve(), names)
    repo = Repo(repo_path) if need_git else None
    plan = recipes.plan(recipe, target, universe, only, skip, read=files.reader(target.root))
    prefix = ""
    if repo is not None:
        rel = repo.rel(target.root)
        prefix = "" if rel == "." else rel + "/"
    return repo, plan, prefix


def failed_error(plan: Plan) -> errors.CodemodError:
    lines = [f"{c.id}: {c.reason}" for c in plan.failed]
    return errors.PlanFailed(
        f"{len(lines)} change(s) of {plan.recipe.id} cannot be planned:\n  " + "\n  ".join(lines),
        where=str(plan.target.root),
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
    repo, plan, prefix = prepare(recipe, repo_path, universe, only, skip, need_git=not dry_run)
    if dry_run and repo is None:
        try:
            prefix_repo = Repo(repo_path)
            rel = prefix_repo.rel(plan.target.root)
            prefix = "" if rel == "." else rel + "/"
        except errors.CodemodError:
            prefix = ""
    if plan.failed:
        raise failed_error(plan)
    if not plan.changed:
        status = "already-enabled"
        name = branch or branch_name(recipe.id)
        if repo is not None and not repo.git_repo.head.is_detached and repo.git_repo.active_branch.name == name:
            status = "already-applied"
        return RunResult(plan, prefix, [], status, branch=name if status == "already-applied" else "")
    if dry_run:
        selected = choose(plan.changed) if choose else plan.changed
        return RunResult(plan, prefix, selected, "dry-run")

    assert repo is not None
    head_branch, head_sha = repo.head()
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
            hint=f"`git checkout {name}` to use it, or `codemod revert {recipe.id} --repo {repo_path}` to remove it",
        )
    rels = [f"{prefix}{f}" for f in dict.fromkeys(c.file for c in plan.changed)]
    untracked = [r for r in rels if not repo.tracked(r)]
    if untracked:
        raise errors.DirtyTree(
            "not tracked by git: " + ", ".join(untracked),
            where=str(repo.root),
            hint="add and commit them first, so codemod can restore them exactly",
        )
    dirty = repo.dirty(rels)
    if dirty:
        raise errors.DirtyTree(
            "uncommitted changes in files this recipe edits: " + ", ".join(dirty),
            where=str(repo.root),
        )
    files.check_writable(repo.root, rels)

    selected = choose(plan.changed) if choose else plan.changed
    if not selected:
        return RunResult(plan, prefix, [], "nothing-selected")

    base = f"{head_branch}@{head_sha}" if head_branch else head_sha
    repo.create_branch(name)
    result = RunResult(plan, prefix, selected, "applied", branch=name, base=base)
    written: list[str] = []
    try:
        for change in selected:
            rel = f"{prefix}{change.file}"
            files.write_atomic(files.inside(repo.root, rel), _content_for(plan, change, selected))
            written.append(rel)
            sha = repo.commit([rel], commit_message(plan, change, prefix, base))
            result.commits.append((sha, change.id))
    except BaseException:
        _roll_back(repo, written, head_branch or head_sha, name)
        raise
    return result


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
    mode: str  # "deleted-branch" or "reverted-commits"
    checked_out: str = ""
    reverted: list[str] = field(default_factory=list)


def status(repo_path: Path) -> tuple[Repo, list[Applied]]:
    repo = Repo(repo_path)
    return repo, repo.applied()


def revert(recipe_id: str, repo_path: Path, *, keep_commits: bool = False) -> RevertResult:
    repo = Repo(repo_path)
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
