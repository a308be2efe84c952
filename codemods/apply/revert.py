"""revert and status: back a recipe out of a tree (or say what is applied there), under the same lock and journal as run."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable

from codemods.core import commands, errors
from codemods.apply import journal, ownership
from codemods.jit import cache as jit_cache
from codemods.recipes import load as recipes
from codemods.apply.recovery import recover_interrupted
from codemods.apply.repo import Repo
from codemods.apply.shadow import ShadowRepo
from codemods.apply.rollback import switch_keeping_bytes
from codemods.apply.trailers import Applied
from codemods.apply.workspace import Workspace


@dataclass
class RevertResult:
    record: Applied
    mode: str  # "deleted-branch", "reverted-commits", "forgotten" or "recovered"
    checked_out: str = ""
    reverted: list[str] = field(default_factory=list)


@dataclass
class Status:
    """What codemod knows of one repository: applied recipes, drift and an interrupted operation."""

    repo: Repo
    records: list[Applied]
    drift: list[str]  # files changed behind codemod's back (installed packages)
    interrupted: dict | None  # the journal of a run or revert that did not finish
    trees: list[Workspace] = field(default_factory=list)  # how the command named this repository (for printed commands)

    @property
    def shadow(self) -> bool:
        return isinstance(self.repo, ShadowRepo)

    @property
    def state(self) -> str:
        if self.interrupted:
            return "interrupted"
        if any(not r.reverted for r in self.records):
            return "applied"
        return "reverted" if self.records else "not applied"


def status(spot: Workspace | Path) -> Status:
    """The applied recipes, files changed behind codemod's back (installed packages), and an interrupted operation."""
    workspace = Workspace.of(spot)
    repo = workspace.open()
    return Status(repo, repo.applied(), repo.drift(), journal.read(repo.state_dir), [workspace])


def status_many(spots: list[Workspace]) -> list[Status]:
    """The status of each distinct repository once (targets may share one)."""
    found: dict[str, Status] = {}
    for spot in spots:
        one = status(spot)
        if one.repo.key in found:
            found[one.repo.key].trees += one.trees
        else:
            found[one.repo.key] = one
    return list(found.values())


def revert(recipe_id: str, spot: Workspace | Path, *, keep_commits: bool = False, forget: bool = False,
           notify: Callable[[str], None] = lambda message: None, dry_run: bool = False) -> RevertResult:
    workspace = Workspace.of(spot)
    repo_path = workspace.path
    state = workspace.require_state_dir()
    if dry_run:  # every check of a real revert, no lock, no journal, nothing written
        entry = journal.read(state)
        if entry:
            raise errors.RevertRefused(
                f"an interrupted `{entry.get('op')} {entry.get('recipe')}` is recorded here",
                where=str(repo_path), hint="run the revert without --dry-run: it puts that operation back first",
            )
        return _revert_locked(recipe_id, workspace, keep_commits, forget, state, dry_run=True)
    with journal.locked(state, f"revert {recipe_id}") as stale:
        if stale:
            notify(f"took over the lock of an interrupted codemod (pid {stale}, no longer running)")
        entry = journal.read(state)
        if entry and not forget:
            # An interrupted run is put back to its base; an interrupted revert is finished.
            recover_interrupted(workspace, notify)
            if entry.get("recipe") == recipe_id:
                return RevertResult(Applied(recipe_id, entry["branch"], entry.get("base_ref", ""), entry["base_sha"]), "recovered")
        return _revert_locked(recipe_id, workspace, keep_commits, forget, state)


def _revert_locked(recipe_id: str, workspace: Workspace, keep_commits: bool, forget: bool, state: Path,
                   dry_run: bool = False) -> RevertResult:
    repo = workspace.open()
    if forget:
        records = [r for r in repo.applied() if r.recipe == recipe_id]
        repo.forget(dry_run=dry_run)  # a git work tree refuses: only a folder outside git has a record to forget
        return RevertResult(records[0] if records else Applied(recipe_id, "", "", ""), "would-forget" if dry_run else "forgotten")
    repo.refuse_busy()
    found = [r for r in repo.applied() if r.recipe == recipe_id]
    records = [r for r in found if not r.reverted]
    if not records:
        done = next((r for r in found if r.reverted), None)
        raise errors.RevertRefused(
            f"recipe {recipe_id} is not applied here"
            + (f" (its commits on {done.branch} were already reverted with --keep-commits)" if done else ""),
            where=str(repo.root),
            hint=f"`{commands.codemod('status', trees=[workspace])}` lists what is applied",
        )
    record = next((r for r in records if r.current), records[0])
    keep = commands.codemod("revert", recipe_id, "--keep-commits", trees=[workspace])
    if record.worktree:  # git deletes, and checks out, no branch another worktree has checked out
        raise errors.RevertRefused(
            f"{record.branch} is checked out in the worktree {record.worktree}; git will not delete or check it out from here",
            where=str(repo.root),
            hint=f"revert it there: {commands.codemod('revert', recipe_id, '--repo', record.worktree)}",
        )
    holder = repo.checked_out_elsewhere().get(record.base_ref) if record.current and record.base_ref and not keep_commits else None
    if holder is not None:
        raise errors.RevertRefused(
            f"the base branch {record.base_ref} is checked out in the worktree {holder}; git will not check it out here too",
            where=str(repo.root),
            hint=f"move that worktree off it ({commands.shell('git', '-C', str(holder), 'switch', '--detach')}), then run again",
        )
    if record.foreign and not keep_commits:
        listed = ", ".join(f"{sha[:10]} {subject!r}" for sha, subject in record.foreign)
        raise errors.RevertRefused(
            f"{len(record.foreign)} commit(s) on top of {record.branch} were not made by codemod: {listed}",
            where=str(repo.root),
            hint=f"`{keep}` undoes only the codemod commits with revert commits and keeps yours, "
            "or move your commits to another branch first",
        )
    if not keep_commits:
        ownership.refuse_unproven(repo, record, keep)
    tip = record.branch
    undone = {sha for _, sha in record.reverts}
    pending = [c for c in record.commits if c.sha not in undone]  # what --keep-commits still has to revert
    touched = repo.changed_files(record.base_sha, tip) if not keep_commits else [
        f for c in pending for f in repo.changed_files(f"{c.sha}^", c.sha)
    ]
    repo.refuse_hidden(touched)
    repo.refuse_changed_for_revert(repo.dirty(touched), recipe_id)
    if dry_run:
        base_exists = bool(record.base_ref) and repo.branch_exists(record.base_ref)
        checked_out = "" if keep_commits or not record.current else (record.base_ref if base_exists else record.base_sha)
        return RevertResult(record, "would-revert-commits" if keep_commits else "would-delete-branch",
                            checked_out=checked_out, reverted=[c.sha for c in (pending if keep_commits else record.commits)])
    if keep_commits:
        if not record.current:
            repo.checkout(record.branch)
        repo.revert_commits(pending)
        journal.checkpoint("commits-reverted")
        return RevertResult(record, "reverted-commits", checked_out=record.branch, reverted=[c.sha for c in pending])
    checked_out = ""
    entry = {"op": "revert", "recipe": recipe_id, "branch": record.branch, "base_ref": record.base_ref,
             "base_sha": record.base_sha, "step": "started", "pid": os.getpid(), "started_ns": time.time_ns()}
    journal.step(repo.state_dir, entry, "revert-journal-written")
    if record.current:
        base_exists = bool(record.base_ref) and repo.branch_exists(record.base_ref)
        checked_out = record.base_ref if base_exists else record.base_sha
        switch_keeping_bytes(repo, checked_out, touched)  # never `git checkout` under an editor's feet
        journal.step(repo.state_dir, entry, "base-checked-out")
    repo.delete_branch(record.branch)
    journal.step(repo.state_dir, entry, "branch-deleted")
    journal.clear(state)
    journal.checkpoint("revert-journal-cleared")
    return RevertResult(record, "deleted-branch", checked_out=checked_out, reverted=[c.sha for c in record.commits])


def revert_many(recipe_id: str, spots: list[Workspace], **options) -> list[tuple[Workspace, RevertResult]]:
    """Revert each distinct repository once (targets may share one)."""
    done: list[tuple[Workspace, RevertResult]] = []
    seen: set[str] = set()
    for workspace in spots:
        key = workspace.open().key
        if key in seen:
            continue
        seen.add(key)
        done.append((workspace, revert(recipe_id, workspace, **options)))
    return done


def jit_caches(recipe_id: str, workspaces: list[Workspace], recipes_dirs: list[Path], clear: bool,
               dry_run: bool) -> list[dict | None]:
    """Per tree, FlashInfer's cached builds of the JIT modules the reverted recipe had changed (removed with `clear`)."""
    caches = []
    for workspace in workspaces:
        try:
            recipe = recipes.find_recipe(recipe_id, recipes_dirs)
            target = workspace.detect(c.project for c in recipe.changes)
        except errors.CodemodError:
            continue
        modules = list(dict.fromkeys(m for c in recipe.changes if c.project == target.project.name for m in c.jit_modules))
        caches.append(jit_cache.affected(modules, target, clear, dry_run))
    return caches
