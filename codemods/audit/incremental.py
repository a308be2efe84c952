"""A scan after some files changed: the last result, with only the changed files' records made again.

A tree's result has two parts. Each file's own records (its gates, what it
skips, the `unsupported-instruction` hazards of a file no JIT module
compiles) come from that file alone. The rest comes from the assembly
(audit.scan `_assemble`), which reads across files: the JIT specs and their
include closures, the callers of a spec's function or of a keyed map's
function, the Python gates of the package, the imports of a folder without
`__init__.py`. Everything the assembly reads goes through one `TreeFiles`,
which records each path it looked at (`touched`, with its stamp, also for a
path that did not exist); and it finds the Python files that name a word with
one search per word (finder.holding), which the scan records (`words`).

A changed file F (changed, added or deleted since the last scan, whose
snapshot is kept) needs no assembly when nothing the assembly read depends on
it:

- its bytes are what they were (same content hash), only its stamp changed; or
- the assembly never looked at F, and if F is a Python file, neither its old
  nor its new bytes hold a gate or a JIT spec and its new bytes hold none of
  the searched words (a file holding one would have been read, so the old
  bytes held none that mattered).

A C, CUDA or CMake file the assembly never looked at is in no JIT module's
closure: the assembly leaves its gates as the file's reader made them, and
its hazards are `unsupported`'s for a file no module compiles, made here by
that same function. When every changed file passes, `patch` gives the new
result; when one does not, it gives None and the scan assembles the whole
tree as before. Both give the same bytes (tests/audit/test_incremental.py).
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable
from dataclasses import dataclass

from codemods.audit.jit_hazards import unsupported
from codemods.audit.listing import PYTHON_SUFFIXES, stamp_at
from codemods.audit.python_advice import ADVISED
from codemods.audit.records import FileScan, ScanResult
from codemods.core.arch import Arch

_HASH_LENGTH = 40  # a content hash (sha1), not "" (nothing could be a gate) or "binary"


@dataclass
class Previous:
    """What the last scan of a tree left in its snapshot, besides the result: enough to patch it."""

    result: ScanResult
    entries: dict[str, list]  # each file's [size, mtime, inode, content hash] at that scan (the cache's index)
    touched: dict[str, list[int] | None]  # every path the assembly looked at, with its stamp then
    words: list[bytes]  # the words the assembly searched the Python files for
    parsed: set[str]  # the files that were parsed


@dataclass
class Change:
    """One file changed since the last scan: its new outcome (None: deleted) and its new bytes, when asked."""

    rel: str
    digest: str | None
    item: FileScan | None
    stamp: list[int] | None


def patch(
    previous: Previous, changes: list[Change], read: Callable[[str], bytes | None], settled: Callable[[int], bool],
    root: str, arch: Arch, hazards: bool,
) -> tuple[ScanResult, dict[str, list[int] | None], set[str]] | None:
    """The new result, the paths the assembly looked at (stamps renewed) and the parsed files, else None when
    a change may change what the assembly made (see the module). `read(rel)` gives a file's bytes (None when it
    is gone); `settled(mtime_ns)` whether a stamp can be trusted (cache.Index.settled)."""
    touched = dict(previous.touched)
    kept: dict[str, Change] = {}
    read_now: set[str] = set()  # looked-at paths whose bytes this scan read and found as they were
    for change in changes:
        entry = previous.entries.get(change.rel)
        same = entry is not None and len(str(entry[3])) == _HASH_LENGTH and change.digest == entry[3]
        if same:
            if change.rel in touched:
                touched[change.rel] = change.stamp
                read_now.add(change.rel)
            continue
        if change.rel in touched or not _alone(previous, change, read):
            return None
        kept[change.rel] = change
    for rel, stamp in touched.items():  # a path outside the listing (a header .gitignore hides) changed
        if rel in read_now:
            continue
        now = stamp_at(Path(root) / rel)
        if now != stamp or (now is not None and not settled(now[1])):
            return None
    old = previous.result
    result = ScanResult(old.root, arch, old.universe, layout=old.layout)
    result.modules = old.modules
    result.gates = [gate for gate in old.gates if gate["file"] not in kept]
    result.skipped = [item for item in old.skipped if item["file"] not in kept]
    result.hazards = [hazard for hazard in old.hazards if hazard["file"] not in kept]
    parsed = {rel for rel in previous.parsed if rel not in kept}
    for rel, change in sorted(kept.items()):
        item = change.item
        if item is None:
            continue
        for gate in item.gates:
            gate.pop(ADVISED, None)
        result.gates += item.gates
        if item.skipped:
            result.skipped.append({"file": rel, "reason": item.skipped})
        if item.parsed:
            parsed.add(rel)
        if hazards and item.structure is not None:  # no JIT module compiles it: the assembly would say the same
            result.hazards += unsupported([], {rel: item.structure}, arch, False)
    result.gates.sort(key=lambda g: (g["file"], g["line"]))
    result.skipped.sort(key=lambda s: s["file"])
    result.hazards.sort(key=lambda h: (h["file"], h["line"], h["kind"]))
    return result, touched, parsed


def _alone(previous: Previous, change: Change, read: Callable[[str], bytes | None]) -> bool:
    """Whether the assembly made nothing of a file it never looked at, before the change and after it."""
    if not change.rel.endswith(PYTHON_SUFFIXES):
        return True
    if change.item is not None and (change.item.gates or change.item.specs):
        return False
    if any(gate["file"] == change.rel for gate in previous.result.gates):
        return False
    if any(module.get("file") == change.rel for module in previous.result.modules):
        return False
    data = read(change.rel)
    return data is None or not any(word in data for word in previous.words)
