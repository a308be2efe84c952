"""How codemod records an applied recipe in git: the commit trailers, and what they read back as.

`Codemod-Recipe: <id>`, `Codemod-Change: <change id>`, `Codemod-Base:
<branch>@<sha>` (or `<sha>` when HEAD was detached) and `Codemod-Forced:
<half-patch>`, so the state survives clones and needs no side files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TRAILER_RECIPE = "Codemod-Recipe"
TRAILER_CHANGE = "Codemod-Change"
TRAILER_BASE = "Codemod-Base"
TRAILER_FORCED = "Codemod-Forced"


def trailers(message: str) -> dict[str, str]:
    found = {}
    for line in message.splitlines():
        m = re.match(r"^(Codemod-[A-Za-z]+):\s*(.+?)\s*$", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


@dataclass
class CodemodCommit:
    sha: str
    subject: str
    change: str
    recipe: str
    base: str


@dataclass
class Applied:
    """A recipe applied on a branch: its base and its commits (oldest first)."""

    recipe: str
    branch: str
    base_ref: str  # branch name, or "" when the base was a detached HEAD
    base_sha: str
    commits: list[CodemodCommit] = field(default_factory=list)
    foreign: list[tuple[str, str]] = field(default_factory=list)  # (sha, subject) of user commits on top
    current: bool = False
    worktree: str = ""  # another worktree of the repository that has the branch checked out ("" when none does)
