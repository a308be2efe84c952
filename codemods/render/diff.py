"""Unified diffs that `git apply` accepts, fast enough for generated files of many MB.

When the byte edits that turn `before` into `after` are known, the changed
line ranges come straight from them (linear time); otherwise difflib aligns
the lines. Pure: bytes in, text out.
"""

from __future__ import annotations

import bisect
import difflib
from typing import TYPE_CHECKING

from codemods.gates import Edit

if TYPE_CHECKING:
    from codemods.plan.changes import Plan, PlannedChange

Group = tuple[int, int, int, int]  # before lines [b0, b1) replaced by after lines [a0, a1)


def unified_diff(rel: str, before: bytes, after: bytes, edits: list[Edit] | None = None, context: int = 3) -> str:
    if before == after:
        return ""
    old, new = _split(before), _split(after)
    groups = _groups_from_edits(before, after, edits, len(old), len(new)) if edits else None
    if groups is None:
        groups = _aligned(old, new, (0, len(old), 0, len(new)), limit=None)
    else:  # an edit's lines hold unchanged ones too (a directive continued over three lines gains one term)
        groups = [part for group in groups for part in _aligned(old, new, group)]
    out = [f"diff --git a/{rel} b/{rel}\n--- a/{rel}\n+++ b/{rel}\n".encode()]
    for hunk in _hunks(groups, len(old), context):
        out.append(_render(hunk, old, new))
    return b"".join(out).decode("utf-8", errors="surrogateescape")


def plan_diff(plan: Plan, prefix: str = "", changes: list[PlannedChange] | None = None) -> str:
    """One diff per file over the selected changes, paths relative to the git root (prefix)."""
    chosen = changes if changes is not None else plan.changed
    per_file: dict[str, list[PlannedChange]] = {}
    for change in chosen:
        per_file.setdefault(change.file, []).append(change)
    return "".join(
        unified_diff(f"{prefix}{file}", done[0].before, done[-1].after, done[0].edits if len(done) == 1 else None)
        for file, done in per_file.items()
    )


def _groups_from_edits(before: bytes, after: bytes, edits: list[Edit], n_old: int, n_new: int) -> list[Group] | None:
    starts_old, starts_new = _line_starts(before), _line_starts(after)

    def line(starts: list[int], pos: int, count: int) -> int:
        return min(bisect.bisect_right(starts, pos) - 1, max(count - 1, 0))

    groups: list[list[int]] = []
    shift = 0
    for e in sorted(edits):
        new_start = e.start + shift
        new_end = new_start + len(e.text)
        shift += len(e.text) - (e.end - e.start)
        b0, b1 = line(starts_old, e.start, n_old), line(starts_old, e.end, n_old) + 1
        a0, a1 = line(starts_new, new_start, n_new), line(starts_new, new_end, n_new) + 1
        if groups and b0 <= groups[-1][1]:
            groups[-1][1] = max(groups[-1][1], b1)
            groups[-1][3] = max(groups[-1][3], a1)
        else:
            groups.append([b0, b1, a0, a1])
    # Unchanged lines between groups must pair up one to one; if not, let difflib align them.
    prev_b = prev_a = 0
    for b0, b1, a0, a1 in groups:
        if b0 - prev_b != a0 - prev_a or b0 > b1 or a0 > a1:
            return None
        prev_b, prev_a = b1, a1
    if n_old - prev_b != n_new - prev_a:
        return None
    return [(b0, b1, a0, a1) for b0, b1, a0, a1 in groups]


_ALIGN_MAX = 400  # lines per side above which a region is shown whole rather than aligned by difflib


def _aligned(old: list[bytes], new: list[bytes], group: Group, limit: int | None = _ALIGN_MAX) -> list[Group]:
    """The changed parts of old lines [b0, b1) replaced by new lines [a0, a1): lines both sides hold are left out
    (aligned by difflib unless a side is longer than `limit` lines)."""
    b0, b1, a0, a1 = group
    while b0 < b1 and a0 < a1 and old[b0] == new[a0]:
        b0, a0 = b0 + 1, a0 + 1
    while b1 > b0 and a1 > a0 and old[b1 - 1] == new[a1 - 1]:
        b1, a1 = b1 - 1, a1 - 1
    if b0 == b1 and a0 == a1:
        return []
    if b0 == b1 or a0 == a1 or (limit is not None and max(b1 - b0, a1 - a0) > limit):
        return [(b0, b1, a0, a1)]
    matcher = difflib.SequenceMatcher(None, old[b0:b1], new[a0:a1], autojunk=False)
    return [(b0 + i1, b0 + i2, a0 + j1, a0 + j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _split(data: bytes) -> list[bytes]:
    """Lines as git sees them: split after each LF only (a lone CR is not a line end)."""
    lines = data.split(b"\n")
    last = lines.pop()
    return [line + b"\n" for line in lines] + ([last] if last else [])


def _line_starts(data: bytes) -> list[int]:
    starts = [0]
    pos = data.find(b"\n")
    while pos >= 0:
        starts.append(pos + 1)
        pos = data.find(b"\n", pos + 1)
    return starts


def _hunks(groups: list[Group], n_old: int, context: int) -> list[list[Group]]:
    """Groups closer than 2*context unchanged lines share a hunk."""
    hunks: list[list[Group]] = []
    for group in groups:
        if hunks and group[0] - hunks[-1][-1][1] <= 2 * context:
            hunks[-1].append(group)
        else:
            hunks.append([group])
    return [h + [(min(n_old, h[-1][1] + context), context)] for h in hunks]  # type: ignore[list-item]


def _render(hunk, old: list[bytes], new: list[bytes]) -> bytes:
    *groups, (trail_end, context) = hunk
    first = groups[0]
    lead = min(context, first[0])
    b_start, a_start = first[0] - lead, first[2] - lead
    b_end = trail_end
    a_end = groups[-1][3] + (b_end - groups[-1][1])
    lines = [f"@@ -{_range(b_start, b_end)} +{_range(a_start, a_end)} @@\n".encode()]
    cursor = b_start
    for b0, b1, a0, a1 in groups:
        lines += [b" " + line for line in old[cursor:b0]]
        lines += [b"-" + line for line in old[b0:b1]]
        lines += [b"+" + line for line in new[a0:a1]]
        cursor = b1
    lines += [b" " + line for line in old[cursor:b_end]]
    return b"".join(line if line.endswith(b"\n") else line + b"\n\\ No newline at end of file\n" for line in lines)


def _range(start: int, end: int) -> str:
    length = end - start
    first = start + 1 if length else start
    return f"{first}" if length == 1 else f"{first},{length}"
