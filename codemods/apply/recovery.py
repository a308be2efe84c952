"""Putting back a run or revert that was killed part-way, from the journal it left."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from codemods.core import errors
from codemods.apply import files, journal
from codemods.apply.rollback import put_files_back
from codemods.apply.workspace import Workspace


def content_hash(data: bytes) -> str:
    """How the journal names a file's bytes."""
    return hashlib.sha256(data).hexdigest()


def recover_interrupted(spot: Workspace | Path, notify: Callable[[str], None]) -> None:
    """Put back a run or revert that was killed part-way, from its journal. Caller holds the lock."""
    workspace = Workspace.of(spot)
    state = workspace.state_dir
    entry = journal.read(state) if state is not None else None
    if state is None or not entry:
        return
    repo = workspace.open()
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
        states: dict[str, list[bytes]] = {}
        for rel in entry["files"]:
            current = files.inside(repo.root, rel)
            kept = entry.get("originals", {}).get(rel)
            original = journal.original(state, kept) if isinstance(kept, str) else None
            if original is None:
                original = repo.show(entry["base_sha"], rel)
            allowed = {entry["files"][rel]} | ({content_hash(original)} if original is not None else set())
            if current.exists() and content_hash(current.read_bytes()) not in allowed:
                raise errors.RepoState(
                    f"{rel} changed after codemod's interrupted run (step {entry.get('step')}); codemod will not overwrite it",
                    where=str(repo.root),
                    hint="keep or discard that edit yourself (git diff), then run again",
                )
            files.remove_leftovers(current)
            if original is not None and not current.exists():
                files.write_atomic(current, original)  # as `git checkout` did: a target is never left missing
            elif original is not None:
                now = current.read_bytes()
                states[rel] = [original, now] if content_hash(now) == entry["files"][rel] else [original]
        outcome = put_files_back(repo, states)
        if not outcome.complete:
            raise errors.RepoState(
                f"codemod could not put back its interrupted run: {outcome.describe()}",
                where=str(repo.root),
                hint="fix the cause named, then run again; the journal keeps the run until then",
            )
    head_branch, head_sha = repo.head()
    if op == "run" and (head_branch or head_sha) in (branch, base):
        repo.return_to(base, list(entry["files"]))  # the files are back already: git must not touch them
    elif head_branch == branch:
        repo.checkout(base)
    if repo.branch_exists(branch):
        record = next((a for a in repo.applied() if a.branch == branch), None)
        if record and record.foreign:
            raise errors.RepoState(f"branch {branch} has commits not made by codemod", where=str(repo.root), hint="move them, then run again")
        repo.delete_branch(branch)
    journal.clear(state)
    shown = base if base != entry["base_sha"] else base[:12]
    notify(f"recovered from an interrupted `{op} {entry.get('recipe')}` (stopped after step {entry.get('step')}): {repo.root} is back at {shown}")
