"""How codemod records an applied recipe in git: the commit trailers, and what they read back as.

`Codemod-Recipe: <id>`, `Codemod-Change: <change id>`, `Codemod-Base:
<branch>@<sha>` (or `<sha>` when HEAD was detached), `Codemod-Branch: <the
branch codemod made>`, one `Codemod-File: <blob before> <blob after> <path>`
per file the commit changes, and `Codemod-Forced: <half-patch>`, so the state
survives clones and needs no side files. `revert --keep-commits` marks each
revert commit it makes with `Codemod-Reverts: <sha>`.

Trailers survive `git commit --amend` and `git rebase`, so they only say what
codemod meant to commit; the recorded blobs are what tell an amended commit
(its diff is no longer the recorded one) from codemod's own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

TRAILER_RECIPE = "Codemod-Recipe"
TRAILER_CHANGE = "Codemod-Change"
TRAILER_BASE = "Codemod-Base"
TRAILER_BRANCH = "Codemod-Branch"
TRAILER_FILE = "Codemod-File"
TRAILER_FORCED = "Codemod-Forced"
TRAILER_REVERTS = "Codemod-Reverts"

_LINE = re.compile(r"^(Codemod-[A-Za-z]+):[ \t]*(.*?)[ \t]*$")
_GIT_REVERT = re.compile(r"^This reverts commit ([0-9a-f]{40,64})\b", re.MULTILINE)


def trailer_lines(message: str) -> list[tuple[str, str]]:
    """Every `Codemod-*: value` line of a message, in order (a key may repeat: Codemod-File)."""
    found = []
    for line in message.splitlines():
        m = _LINE.match(line)
        if m and m.group(2):
            found.append((m.group(1), m.group(2)))
    return found


def trailers(message: str) -> dict[str, str]:
    """The Codemod-* trailers of a message, the last value of each key."""
    return dict(trailer_lines(message))


@dataclass(frozen=True)
class FileChange:
    """One file of a commit: its blob before and after (all zeros: absent), as git names them."""

    path: str
    before: str
    after: str

    def trailer(self) -> str:
        # a path git could hold but one trailer line cannot (line break, edge spaces, a leading quote) goes as JSON
        plain = self.path == self.path.strip() and not self.path.startswith('"') and self.path.isprintable()
        return f"{TRAILER_FILE}: {self.before} {self.after} {self.path if plain else json.dumps(self.path, ensure_ascii=False)}"

    @classmethod
    def parse(cls, value: str) -> FileChange | None:
        parts = value.split(" ", 2)
        if len(parts) != 3:
            return None
        before, after, path = parts
        if path.startswith('"'):
            try:
                path = json.loads(path)
            except ValueError:
                return None
        return cls(path, before, after)


def recorded_files(message: str) -> frozenset[FileChange] | None:
    """The file changes a codemod commit recorded; None when it recorded none (made by an older codemod)."""
    found = [FileChange.parse(v) for k, v in trailer_lines(message) if k == TRAILER_FILE]
    if not found:
        return None
    return frozenset(f for f in found if f is not None)


def reverted_sha(message: str) -> str | None:
    """The commit a revert commit undoes: codemod's trailer, or the line `git revert` writes."""
    t = trailers(message)
    if TRAILER_REVERTS in t:
        return t[TRAILER_REVERTS].split()[0]
    m = _GIT_REVERT.search(message)
    return m.group(1) if m else None


@dataclass
class CodemodCommit:
    sha: str
    subject: str
    change: str
    recipe: str
    base: str
    branch: str = ""  # the branch codemod made it on ("" when made by a codemod that did not record it)
    files: frozenset[FileChange] | None = None  # what codemod committed (None: not recorded)


@dataclass
class Applied:
    """A recipe applied on a branch: its base and its commits (oldest first).

    `foreign` are user commits above codemod's; `below` are commits that are
    not codemod's between the recorded base and codemod's newest commit (a
    rebase moved them under it); `reverts` are the revert commits `revert
    --keep-commits` made, as (revert sha, reverted sha). `base_found` says
    whether the recorded base is an ancestor on the branch's first-parent line.
    """

    recipe: str
    branch: str
    base_ref: str  # branch name, or "" when the base was a detached HEAD
    base_sha: str
    commits: list[CodemodCommit] = field(default_factory=list)
    foreign: list[tuple[str, str]] = field(default_factory=list)  # (sha, subject) of user commits on top
    current: bool = False
    below: list[tuple[str, str]] = field(default_factory=list)
    reverts: list[tuple[str, str]] = field(default_factory=list)
    base_found: bool = True
    worktree: str = ""  # another worktree of the repository that has the branch checked out ("" when none does)

    @property
    def made_on(self) -> str:
        """The branch codemod made (recorded in the trailers), or "" when an older codemod did not record it."""
        return next((c.branch for c in reversed(self.commits) if c.branch), "")

    @property
    def reverted(self) -> bool:
        """Every codemod commit has been undone by a revert commit on the branch (`revert --keep-commits`)."""
        undone = {sha for _, sha in self.reverts}
        return bool(self.commits) and all(c.sha in undone for c in self.commits)


def read_branch(name: str, log) -> Applied | None:
    """The recipe applied on branch `name`, from its first-parent log (newest first: (sha, subject, message)).

    Above codemod's newest commit are the user's commits and codemod's revert
    commits; below it, down to the recorded base, codemod's own commits of
    the same recipe and anything a rebase put among them. None when the
    branch has no codemod commit.
    """
    record: Applied | None = None
    top: list[tuple[str, str, str | None]] = []  # above codemod's newest commit: (sha, subject, reverted sha)
    pending: list[tuple[str, str]] = []  # not codemod's, below a codemod commit
    commits: list[CodemodCommit] = []
    found_base = False
    for sha, subject, message in log:
        if record is not None and sha == record.base_sha:
            found_base = True
            break
        t = trailers(message)
        recipe = t.get(TRAILER_RECIPE)
        if recipe and (record is None or recipe == record.recipe):
            base = t.get(TRAILER_BASE, "")
            ref, _, base_sha = base.rpartition("@") if "@" in base else ("", "", base)
            if record is None:
                record = Applied(recipe, name, ref, base_sha)
            commits.append(CodemodCommit(sha, subject, t.get(TRAILER_CHANGE, ""), recipe, base,
                                         t.get(TRAILER_BRANCH, ""), recorded_files(message)))
            record.below += pending
            pending = []
        elif record is None:
            top.append((sha, subject, reverted_sha(message)))
        else:
            pending.append((sha, subject))
    if record is None:
        return None
    record.commits = list(reversed(commits))
    mine = {c.sha for c in commits}
    record.reverts = [(sha, undone) for sha, _, undone in reversed(top) if undone in mine]  # oldest first
    record.foreign = [(sha, subject) for sha, subject, undone in top if undone not in mine]
    record.base_found = found_base
    # under codemod's oldest commit: what a rebase put there (all of it when the base was reached, else its parent)
    record.below += pending if found_base else pending[:1]
    return record
