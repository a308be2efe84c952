"""Doctor's input files, read safely: a server log one bounded line at a time, a rules or topology file as text.

A log is streamed (never read whole): a line longer than MAX_LINE is cut, a
.gz log is unpacked on the fly, "-" reads stdin, and a FIFO, socket or device
is refused (/dev/zero never ends).
"""

from __future__ import annotations

import gzip
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from codemods.core import source as files
from codemods.core import errors

MAX_LINE = 1 << 20  # bytes; the rest of a longer line is dropped


def open_log(path: Path) -> BinaryIO:
    """A log opened for reading in bytes: stdin for "-", unpacked when it ends in .gz."""
    if str(path) == "-":
        return sys.stdin.buffer
    try:
        # Opened without blocking and checked on the descriptor: a FIFO would block here and
        # a device such as /dev/zero never ends; only regular files are logs.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            os.close(fd)
            raise errors.FileRefused(
                "not a regular file (a FIFO, socket or device is never read as a log)",
                where=str(path),
                hint="give the log file itself; a live stream can be piped to `codemod doctor -`",
            )
        if stat.S_ISDIR(mode):
            os.close(fd)
            raise IsADirectoryError(path)
        os.set_blocking(fd, True)
        stream = os.fdopen(fd, "rb")
        if path.suffix == ".gz":
            unpacked = gzip.GzipFile(filename=str(path), mode="rb", fileobj=stream)
            unpacked.myfileobj = stream  # type: ignore[assignment]  # closed with it
            return unpacked  # type: ignore[return-value]
        return stream
    except FileNotFoundError:
        raise errors.FileRefused("log file does not exist", where=str(path), hint="check the path, or use --follow to wait for it") from None
    except IsADirectoryError:
        raise errors.FileRefused("is a folder, not a log file", where=str(path)) from None
    except OSError as exc:
        raise errors.FileRefused(f"cannot read the log: {exc.strerror or exc}", where=str(path)) from None


def decode(raw: bytes) -> str:
    """A log line as text: bytes that are not UTF-8 become U+FFFD (a log is never refused for them)."""
    return raw.decode("utf-8", errors="replace")


def log_lines(path: Path) -> Iterator[str]:
    """The log's lines, one at a time (never the whole file); a line over 1 MiB keeps its first 1 MiB."""
    stream = open_log(path)
    try:
        cut = False
        while True:
            raw = stream.readline(MAX_LINE)
            if not raw:
                return
            whole = raw.endswith(b"\n")
            if not cut:
                yield decode(raw)
            cut = not whole
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def read_text(path: Path, option: str = "--rules") -> str:
    """A small input file (rules, a saved topology) as text; a failure names the option that gave the path."""
    try:
        # never a FIFO or device (/dev/zero never ends); newlines read as read_text would
        return files.read_regular(path).decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except FileNotFoundError:
        raise errors.FileRefused("file does not exist", where=str(path), hint=f"check {option}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.FileRefused(f"cannot read the file: {exc}", where=str(path), hint=f"check {option}") from None
