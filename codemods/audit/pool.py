"""The worker side of a scan: files in chunks, each file read, prefiltered, answered from the cache or analysed."""

from __future__ import annotations

import hashlib
import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass

from codemods.audit.analysis import analyse
from codemods.audit.cache import load_object, store_object
from codemods.audit.listing import (
    BINARY_PROBE,
    NOT_REGULAR,
    read_regular,
    stamp_of,
    under,
)
from codemods.audit.prefilter import may_hold_gates
from codemods.audit.records import Context, FileScan

# Below this many files to parse a process pool costs more than it saves.
POOL_MINIMUM = 64
_CHUNK_BYTES = 4 << 20
_CHUNK_FILES = 256


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask (taskset, a container's cpuset, a CI runner's share),
    not every CPU of the machine, which `os.cpu_count` counts; at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity call on this system (macOS)
        return max(1, os.cpu_count() or 1)


def make_chunks(todo: list[tuple[str, int, bool]], workers: int) -> list[list[tuple[str, bool]]]:
    """Files (path, whether the finder found a runtime check) in groups of about _CHUNK_BYTES, at least one per worker."""
    most = max(1, min(_CHUNK_FILES, -(-len(todo) // max(1, workers))))
    chunks: list[list[tuple[str, bool]]] = []
    current: list[tuple[str, bool]] = []
    size = 0
    for rel, length, runtime in todo:
        current.append((rel, runtime))
        size += length
        if size >= _CHUNK_BYTES or len(current) >= most:
            chunks.append(current)
            current, size = [], 0
    if current:
        chunks.append(current)
    return chunks


@dataclass
class Outcome:
    """One file scanned in a worker."""

    rel: str
    stamp: list[int] | None  # size, mtime, inode: None when it could not be read
    digest: str | None  # the content hash; "" when nothing could be a gate, "binary" for a binary file
    item: FileScan | None
    reused: bool = False  # found in the cache by its content hash


def scan_chunk(chunk: tuple[int, Context, list[tuple[str, bool]]]) -> tuple[int, list[Outcome]]:
    """The files of one chunk of tree `number` (run in a worker): (number, their outcomes)."""
    number, context, files = chunk
    return number, [_scan_one(context, rel, runtime) for rel, runtime in files]


def _scan_one(context: Context, rel: str, runtime: bool) -> Outcome:
    path = os.path.join(context.root, rel)
    try:
        read = read_regular(path)
    except OSError as exc:
        return Outcome(rel, None, None, FileScan(rel, skipped=f"cannot read: {exc.strerror or exc}"))
    if read is None:  # replaced by a FIFO or a device since it was listed
        return Outcome(rel, None, None, FileScan(rel, skipped=NOT_REGULAR))
    data, status = read
    stamp = stamp_of(status)
    if not context.include_all and b"\0" in data[:BINARY_PROBE]:
        return Outcome(rel, stamp, "binary", None)
    in_jit = context.hazards and context.jit is not None and under(rel, context.jit)
    if not may_hold_gates(rel, data, in_jit, runtime):
        return Outcome(rel, stamp, "", None)
    digest = hashlib.sha1(data).hexdigest()
    if context.cache is not None:
        cached = load_object(context, digest, rel)
        if cached is not None:
            return Outcome(rel, stamp, digest, cached, reused=True)
    item = analyse(rel, data, context, in_jit, runtime)
    store_object(context, digest, in_jit, item)
    return Outcome(rel, stamp, digest, item)


class Feeder:
    """Work handed to a pool a few items at a time (`ahead` at most, running or queued), the next as one is done:
    what the scan's process submits to the pool itself meanwhile (audit.parallel: parts of a tree's assembly)
    waits behind those few, not behind every file of the trees listed after it. `taken` gives the futures
    submitted since it was last asked."""

    def __init__(self, pool: Executor, ahead: int) -> None:
        self._pool, self._ahead = pool, max(1, ahead)
        self._changed = threading.Condition(threading.RLock())  # a done-callback may run in the submitting thread
        self._waiting: deque[tuple[Callable, object]] = deque()
        self._running = 0
        self._submitted: list[Future] = []
        self._closed = False

    def add(self, function: Callable, argument: object) -> None:
        with self._changed:
            self._waiting.append((function, argument))
            self._top_up()

    def taken(self, block: bool) -> list[Future]:
        """The futures submitted since the last call; with `block`, waits for one unless nothing is left to run."""
        with self._changed:
            while block and not self._submitted and (self._running or self._waiting) and not self._closed:
                self._changed.wait()
            taken, self._submitted = self._submitted, []
            return taken

    def close(self) -> None:
        """Hand nothing more to the pool (it is shutting down)."""
        with self._changed:
            self._closed = True
            self._waiting.clear()
            self._changed.notify_all()

    def _top_up(self) -> None:
        while not self._closed and self._running < self._ahead and self._waiting:
            function, argument = self._waiting.popleft()
            try:
                future = self._pool.submit(function, argument)
            except RuntimeError:  # shut down under us (an error elsewhere): what is left never runs
                self.close()
                return
            self._running += 1
            self._submitted.append(future)
            self._changed.notify_all()
            future.add_done_callback(self._done)

    def _done(self, _: Future) -> None:
        with self._changed:
            self._running -= 1
            self._top_up()
            self._changed.notify_all()
