"""The command lines codemod prints for the user to paste (to back out, check out, finish): one builder for all.

Every printed command names the trees exactly as the command that printed it
was given them (each --repo, each --package, and --python when given) and is
quoted for a POSIX shell, so pasting it runs what it says.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable


def tree_options(trees: Iterable) -> list[str]:
    """--repo PATH / --package NAME for each tree (a Workspace: .path, .package, .python), then --python once."""
    words: list[str] = []
    python = None
    for tree in trees:
        if getattr(tree, "package", None):
            words += ["--package", tree.package]
            python = python or getattr(tree, "python", None)
        else:
            words += ["--repo", str(tree.path)]
    if python:
        words += ["--python", str(python)]
    return _unique_pairs(words)


def _unique_pairs(words: list[str]) -> list[str]:
    """Option/value pairs once each, in order (two trees in one repository name it once)."""
    seen, out = set(), []
    for option, value in zip(words[0::2], words[1::2]):
        if (option, value) not in seen:
            seen.add((option, value))
            out += [option, value]
    return out


def codemod(command: str, *words: str, trees: Iterable = ()) -> str:
    """`codemod COMMAND WORDS... TREE-OPTIONS`, quoted for the shell."""
    return shlex.join(["codemod", command, *words, *tree_options(trees)])


def shell(*words: str) -> str:
    """Any other command (git ...), quoted for the shell."""
    return shlex.join(list(words))
