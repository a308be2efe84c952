"""Following a live log as `tail -F` does: feed each complete line to a Diagnosis, yield its events, stop once final."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from codemods.doctor.diagnosis import Diagnosis
from codemods.doctor.logfile import MAX_LINE, decode, open_log
from codemods.doctor.report import Event


def follow(
    path: Path,
    diagnosis: Diagnosis,
    *,
    poll: float = 0.2,
    timeout: float | None = None,
    on_wait: Callable[[str], None] = lambda message: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Event]:
    """Tail a growing log, feeding each complete line; yield state changes; stop once the verdict is final.

    Stops also when `timeout` seconds have passed, and at the end of a pipe
    (path "-"). A file that is not there yet is waited for; a file that
    shrinks (truncated, rotated by copy) is read again from its start; a file
    renamed away with a new one at the path (rotated, as `tail -F` sees it) is
    read to its end, then the new one is followed.
    """
    start = clock()

    def expired() -> bool:
        return timeout is not None and clock() - start >= timeout

    if str(path) != "-":
        announced = False
        while not path.exists():
            if not announced:
                on_wait(f"waiting for {path} to appear")
                announced = True
            if expired():
                return
            sleep(poll)
    stream = open_log(path)
    pending = b""
    cut = False  # inside the rest of a line over MAX_LINE: dropped
    try:
        while True:
            raw = stream.readline(MAX_LINE)
            if raw:
                if cut:
                    cut = not raw.endswith(b"\n")
                    continue
                pending += raw
                if not pending.endswith(b"\n"):
                    if len(pending) < MAX_LINE:
                        if str(path) != "-":
                            sleep(poll)  # a line being written: wait for its end
                            if expired():
                                return
                        continue
                    pending, cut = pending[:MAX_LINE], True
                line, pending = decode(pending), b""
                yield from diagnosis.feed(line)
                if diagnosis.final:
                    return
                continue
            if str(path) == "-":
                if pending:
                    yield from diagnosis.feed(decode(pending))
                yield from diagnosis.finish()
                return
            if expired():
                return
            try:
                if os.fstat(stream.fileno()).st_size < stream.tell():
                    on_wait(f"{path} shrank; reading it again from the start")
                    stream.seek(0)
                    pending = b""
                elif os.fstat(stream.fileno()).st_size > stream.tell() and _replaced(path, stream):
                    continue  # rotated, but the old file grew after the last read: read it to its end first
                elif _replaced(path, stream):  # rotated (renamed, a new file at the path)
                    on_wait(f"{path} was rotated; following the new file")
                    if pending:
                        yield from diagnosis.feed(decode(pending))
                        pending = b""
                        if diagnosis.final:
                            return
                    stream.close()
                    stream = open_log(path)
                    continue
            except (OSError, ValueError):
                pass
            sleep(poll)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _replaced(path: Path, stream: BinaryIO) -> bool:
    """The path now names another file than the open one (as `tail -F` checks); False while nothing is there."""
    try:
        now = os.stat(path)
    except OSError:
        return False
    was = os.fstat(stream.fileno())
    return (now.st_ino, now.st_dev) != (was.st_ino, was.st_dev)
