"""The files of a tree a scan reads: git's listing (submodules and nested repositories too) or a plain walk, and their stamps.

`git ls-files -co --exclude-standard` in a git work tree, so .gitignore is
respected, and submodules and nested repositories are listed the same way;
a plain walk elsewhere, skipping `.git` and `__pycache__`. Symlinks out of
the tree, FIFOs and devices ("not a regular file") and submodules not
initialised (an empty folder, or files without a repository of their own:
skipped with the `git submodule update --init` to run) are left out. Binary
files (a NUL byte in the first 8 KiB) are skipped by the workers;
`include_all` scans them and ignored files too.
"""

from __future__ import annotations

import os
import posixpath
import shlex
import stat
from pathlib import Path

from codemods.apply import locate
from codemods.apply.git_safety import work_tree_top
from codemods.cpp.lexer import C_SUFFIXES
from codemods.core.source import NotRegularFile, read_regular_status
from codemods.gates.cmake.cmake_arch_list import is_cmake

PYTHON_SUFFIXES = (".py",)
SKIP_DIRS = frozenset({".git", "__pycache__"})
BINARY_PROBE = 8192
NOT_REGULAR = "not a regular file"  # the skip reason of a FIFO, socket or device in the tree


def list_files(root: Path, include_all: bool) -> tuple[list[str], list[dict]]:
    """Relative POSIX paths of the files that may hold a gate, sorted; and the folders left out, with why.

    A submodule or nested repository is listed by its own git; one that is
    not its own work tree (a submodule never initialised: an empty folder,
    or files without a repository) is left out with a hint, never listed
    through the enclosing repository (whose listing of it is itself again).
    """
    found: list[str] = []
    unlisted: list[dict] = []
    _collect(root, "", include_all, found, root.resolve(), unlisted)
    return sorted(set(found)), unlisted


def _collect(root: Path, prefix: str, include_all: bool, found: list[str], base: Path, unlisted: list[dict]) -> None:
    folder = root / prefix if prefix else root
    names = None if include_all else locate.listed_files(folder)
    if names is None:
        _walk(folder, prefix, found, base)
        return
    for name in names:
        name = name.rstrip("/")
        parts = name.split("/")
        if not name or any(part in SKIP_DIRS for part in parts):
            continue
        if "." in parts or ".." in parts:
            # `./`: the folder is itself a submodule git knows only as an entry of the enclosing repository
            if name == "." and not prefix:
                unlisted.append({"file": ".", "reason": _not_a_work_tree(folder, ".")})
            continue
        rel = f"{prefix}/{name}" if prefix else name
        path = root / rel
        if path.is_dir() and not path.is_symlink():
            top = work_tree_top(path)
            if top is None or top == path.resolve():
                _collect(root, rel, include_all, found, base, unlisted)  # a submodule or a nested repository
            else:
                unlisted.append({"file": rel, "reason": _not_a_work_tree(path, rel)})
        elif _wanted(posixpath.basename(name)) and inside_tree(path, base):
            found.append(rel)


def _not_a_work_tree(folder: Path, rel: str) -> str:
    """Why a submodule folder (a folder git lists, in no work tree of its own) is not scanned, and what to run."""
    command = f"`git submodule update --init {shlex.quote(rel)}`"
    try:
        with os.scandir(folder) as entries:
            empty = next(entries, None) is None
    except OSError:
        empty = True
    if empty:
        return f"submodule not initialised; run {command} to scan it"
    return (
        f"submodule not initialised (its folder holds files but no repository); move them away and run "
        f"{command} to scan it, or scan them as they are with `codemod scan --all`"
    )


def _walk(folder: Path, prefix: str, found: list[str], base: Path) -> None:
    stack = [(str(folder), prefix)]
    while stack:
        current, rel_dir = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIP_DIRS:
                        stack.append((entry.path, rel))
                    continue
            except OSError:
                continue
            if _wanted(entry.name) and (not entry.is_symlink() or inside_tree(Path(entry.path), base)):
                found.append(rel)


def _wanted(name: str) -> bool:
    """Source files by suffix, extension-less files (C++ headers such as `nv/target`), and CMake files."""
    return name.endswith(C_SUFFIXES + PYTHON_SUFFIXES) or "." not in name or is_cmake(name)


def inside_tree(path: Path, base: Path) -> bool:
    """A symlink counts only when it resolves to a file inside the tree."""
    if not path.is_symlink():
        return True
    try:
        target = path.resolve()
    except (RuntimeError, OSError):  # a symlink loop: no file at all
        return False
    return base in target.parents and target.is_file()


def stamp_at(path: Path) -> list[int] | None:
    """`stamp_of` a file, None when there is none."""
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(status.st_mode):
        return None
    return stamp_of(status)


def stamp_of(status: os.stat_result) -> list[int]:
    """[size, mtime, inode]: what says a file is unchanged since the cache saw it."""
    return [status.st_size, status.st_mtime_ns, status.st_ino]


def under(rel: str, folder: str) -> bool:
    return rel.startswith(folder.rstrip("/") + "/")


def read_regular(path: str | Path) -> tuple[bytes, os.stat_result] | None:
    """The bytes and stat of a regular file; None for anything else (a FIFO or a device is never read)."""
    try:
        return read_regular_status(path)
    except (NotRegularFile, IsADirectoryError):
        return None
