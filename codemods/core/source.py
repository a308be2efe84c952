"""Source bytes as every reader takes them: from regular files only, and UTF-8 or a SourceError saying where not."""

from __future__ import annotations

import errno
import os
import stat
import warnings
from pathlib import Path


class SourceError(Exception):
    """The source cannot be decoded or parsed; the message says why."""


def decode(source: bytes) -> str:
    """Decode UTF-8 (a BOM is kept as U+FEFF); raise SourceError otherwise."""
    try:
        return source.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"not UTF-8 (byte {exc.start}: {source[exc.start:exc.start + 1]!r})") from None


def quiet_compiler_warnings() -> None:
    """Silence what Python's compiler says about the code codemod reads (`1if x` gives a SyntaxWarning,
    `"\\d"` a DeprecationWarning or SyntaxWarning, each printed as `<unknown>:3: ...`): the user's source, not
    codemod's output. Called once per process that parses (the CLI, each scan worker)."""
    warnings.filterwarnings("ignore", category=SyntaxWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning, message="invalid escape sequence")


class NotRegularFile(OSError):
    """A FIFO, socket or device where a source file was expected: never read (it may block or never end)."""


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file at `path`; NotRegularFile for anything else.

    Opened without blocking and checked on the open descriptor, so a FIFO swapped
    in after a check can neither hang the read nor slip past it.
    """
    return read_regular_status(path)[0]


def read_regular_status(path: str | Path) -> tuple[bytes, os.stat_result]:
    """`read_regular`, with the status of the open file (what a cache stamps it with)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(status.st_mode):
            raise NotRegularFile(f"{path}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(), status
    finally:
        os.close(fd)
