"""The proof that a codemod branch holds only codemod's work, before `revert` deletes it.

A branch is codemod's to delete when:
- it is the branch codemod made (the `Codemod-Branch` trailer names it, and
  its reflog, where it still says, shows it created at the recorded base);
- codemod's oldest commit sits directly on the recorded base, with nothing
  of anyone else's under or among its commits;
- every codemod commit changes exactly the files and blobs codemod recorded
  for it (`Codemod-File`): an amended commit keeps its trailers, not its diff;
- a revert commit of one of them (a partial `--keep-commits`, or the user's
  `git revert`) is exactly its undo.

Anything else is refused naming the foreign change; `revert --keep-commits`
(revert commits, no branch deleted) is always offered.
"""

from __future__ import annotations

from codemods.core import errors
from codemods.apply.trailers import Applied, FileChange


def problems(repo, record: Applied) -> list[str]:
    """Why `record`'s branch cannot be proven codemod's; empty when it can."""
    if any(c.files is None or not c.branch for c in record.commits):
        return [
            f"{record.branch} was made by an older codemod that did not record its diffs and branch, "
            "so codemod cannot prove that every change on it is its own"
        ]
    found = []
    made_on = sorted({c.branch for c in record.commits} - {record.branch})
    if made_on:
        found.append(f"branch {record.branch} is not the branch codemod made ({', '.join(made_on)}); codemod deletes only its own")
    else:
        created = repo.branch_created_at(record.branch)
        if created is not None and created != record.base_sha:
            found.append(
                f"branch {record.branch} was created at {created[:10]}, not at the recorded base {record.base_sha[:10]}: "
                "it is not the branch codemod made (deleted and made again?)"
            )
    found += [f"commit {sha[:10]} {subject!r} is not codemod's and sits below codemod's commits" for sha, subject in record.below]
    if not record.base_found and not record.below:
        found.append(f"the recorded base {record.base_sha[:10]} is not on {record.branch} below codemod's commits")
    for commit in record.commits:
        parents, actual = repo.commit_files(commit.sha)
        if parents != 1:
            found.append(f"commit {commit.sha[:10]} {commit.subject!r} is a merge, which codemod never makes")
            continue
        differ = sorted({f.path for f in actual ^ (commit.files or frozenset())})
        if differ:
            found.append(
                f"commit {commit.sha[:10]} {commit.subject!r} is not the diff codemod recorded for it "
                f"(amended?); the diff differs in: {', '.join(differ)}"
            )
    recorded = {c.sha: c.files or frozenset() for c in record.commits}
    for sha, undone in record.reverts:  # a revert commit is deleted with the branch only when it is the exact undo
        expected = frozenset(FileChange(f.path, f.after, f.before) for f in recorded.get(undone, frozenset()))
        if repo.commit_files(sha) != (1, expected):
            found.append(f"commit {sha[:10]} reverts codemod's {undone[:10]} but is not its exact undo (edited?)")
    return found


def refuse_unproven(repo, record: Applied, keep_commits_command: str) -> None:
    """Refuse (exit 7) deleting a branch that holds anything codemod cannot prove is its own."""
    found = problems(repo, record)
    if found:
        raise errors.RevertRefused(
            f"{record.branch} holds work codemod cannot prove is its own, so it deletes nothing:\n  " + "\n  ".join(found),
            where=str(repo.root),
            hint=f"`{keep_commits_command}` undoes only codemod's changes with revert commits and deletes no branch",
        )
