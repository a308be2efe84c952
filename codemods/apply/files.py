"""Reading and writing target files safely: inside the repo only, atomically, bytes kept."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from codemods.core import errors
from codemods.core.source import NotRegularFile, read_regular, read_regular_status  # noqa: F401  (callers read through files too)


def resolved(path: Path, where: str = "") -> Path:
    """`path.resolve()`, refusing a symlink loop (exit 9, naming the path) where Python raises RuntimeError."""
    try:
        return path.resolve()
    except RuntimeError:
        pass
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
    raise errors.FileRefused(
        "is a symlink loop (or goes through one)",
        where=where or str(path),
        hint="point it at a real file or folder, or remove the symlink",
    )


def require_folder(path: Path) -> None:
    """Refuse a --repo that does not exist, is a file, or is a symlink loop."""
    resolved(path)
    if not path.exists():
        raise errors.UnknownProject("no tree at --repo: path does not exist", where=str(path), hint="check --repo")
    if not path.is_dir():
        raise errors.RepoState("is a file, not a folder", where=str(path), hint="point --repo at the project's folder")


def check_output(path: Path) -> None:
    """Refuse, before anything is applied, an output file (--patch) that cannot be written."""

    parent = path.parent if str(path.parent) else Path(".")
    problem = ""
    try:
        if not parent.is_dir():
            problem = f"its folder {parent} does not exist"
        elif path.is_dir():
            problem = "is a directory"
        elif path.exists() and not stat.S_ISREG(path.stat().st_mode):
            problem = "is not a regular file"
        elif not os.access(path if path.exists() else parent, os.W_OK):
            problem = "is not writable"
    except OSError as exc:
        problem = exc.strerror or str(exc)
    if problem:
        raise errors.FileRefused(problem, where=str(path), hint="give --patch a writable file path; nothing was applied")


def inside(root: Path, rel: str) -> Path:
    """The real path of root/rel, refusing anything (a symlink included) that leads outside root."""
    base = resolved(root)
    path = resolved(root / rel, where=rel)
    if path != base and base not in path.parents:
        raise errors.FileRefused(
            f"resolves to {path}, outside the repository",
            where=rel,
            hint="codemod only reads and writes files inside --repo; replace the symlink with the file",
        )
    if any(part.lower() == ".git" for part in path.relative_to(base).parts):
        raise errors.FileRefused(
            f"resolves to {path}, inside git's own folder",
            where=rel,
            hint="codemod never reads or writes a repository's .git as a source file; replace the symlink with the file",
        )
    return path


def reader(root: Path):
    """A `read(rel) -> bytes` for planning that never follows a path out of root, nor reads a FIFO or device."""

    def read(rel: str) -> bytes:
        return read_regular(inside(root, rel))

    return read


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write through a temp file in the same folder and os.replace, keeping the file mode.

    `durable=False` is for caches (thousands of small files a run, any of
    which may be lost): no fsync, and a missing folder is created.
    """
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".codemod-tmp", dir=path.parent)
    except FileNotFoundError:
        if durable:
            raise
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".codemod-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def check_writable(root: Path, rels: list[str]) -> None:
    """Refuse before anything is written when a target or its folder is read-only."""
    for rel in rels:
        path = inside(root, rel)
        read_only = not path.stat().st_mode & 0o222 or not path.parent.stat().st_mode & 0o222
        if read_only or not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
            # Mode bits count even for root: a read-only file says "do not edit me".
            raise errors.FileRefused(
                "is read-only (or its folder is)",
                where=rel,
                hint="fix the permissions (or run as the owner of the files), then run again",
            )


def remove_leftovers(path: Path) -> None:
    """Delete temp files an interrupted write_atomic left beside path."""
    for leftover in path.parent.glob(f".{path.name}.*.codemod-tmp"):
        leftover.unlink()


def write_patch(path: Path, diff: str, applied: bool) -> None:
    """Write run's diff to --patch; a failure says whether the recipe itself was applied all the same."""
    try:
        path.write_text(diff, encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise errors.FileRefused(
            f"cannot write the patch: {exc.strerror or exc}" + ("; the recipe itself was applied" if applied else ""),
            where=str(path),
            hint="the diff is on the codemod branch too: `git diff BASE codemod/RECIPE`" if applied else "nothing was written",
        ) from None
