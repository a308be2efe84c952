"""nvcc -E outputs made comparable: absolute paths as tokens, line markers dropped, and the lines only one side has.

Before comparing, line markers, blank lines and trailing blanks are dropped
and the work tree's and the overlay's absolute paths are replaced with one
token (`__FILE__` expands to them); each kept line remembers the (file,
line) it came from, so a differing block can be mapped back to its guard.
"""

from __future__ import annotations

import bisect
import difflib
import posixpath
import re
from dataclasses import dataclass

ROOT_TOKEN = "<root>"
TEMP_TOKEN = "<tmp>"

_MARKER_RE = re.compile(r'#(?:line)?[ \t]+(\d+)(?:[ \t]+"((?:[^"\\]|\\.)*)")?')
_MARKER_LINES_RE = re.compile(r"^#(?:line)?[ \t]+\d+.*\n?", re.MULTILINE)


@dataclass
class Output:
    """Normalised preprocessor output: its lines and, for each, the (file, line) it came from."""

    lines: list[str]
    origins: list[tuple[str, int]]


def compact(text: str) -> list[str]:
    """The lines `normalise` keeps, without their origins (the fast path for identical outputs)."""
    return list(filter(None, map(str.rstrip, _MARKER_LINES_RE.sub("", text).split("\n"))))


def normalise(text: str) -> Output:
    """Drop line markers, blank lines and trailing blanks; remember where each kept line came from."""
    lines: list[str] = []
    origins: list[tuple[str, int]] = []
    file, number = "", 0
    for raw in text.split("\n"):
        if raw.startswith("#"):
            marker = _MARKER_RE.match(raw)
            if marker:
                number = int(marker.group(1))
                if marker.group(2) is not None:
                    file = marker.group(2).replace('\\"', '"').replace("\\\\", "\\")
                continue
        stripped = raw.rstrip()
        if stripped:
            lines.append(stripped)
            origins.append((file, number))
        number += 1
    return Output(lines, origins)


def relative(path: str) -> str:
    """A tokenized path of the tree made repo-relative (`<root>/a/../b.h` -> `b.h`); any other path as it is."""
    if path.startswith(ROOT_TOKEN + "/"):
        return posixpath.normpath(path[len(ROOT_TOKEN) + 1 :])
    return path


def blocks(before: Output, after: Output) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Line spans only in `after` (gained) and only in `before` (lost)."""
    spans: list[tuple[int, int, int, int]] = []
    _differences(before.lines, 0, len(before.lines), after.lines, 0, len(after.lines), spans)
    gained = [(b1, b2) for _, _, b1, b2 in spans if b2 > b1]
    lost = [(a1, a2) for a1, a2, _, _ in spans if a2 > a1]
    return gained, lost


# difflib's matcher is quadratic in the worst case; past this many line pairs
# the outputs are first cut at lines that occur once on each side (patience diff).
_SMALL_DIFF = 1_000_000


def _differences(a: list[str], alo: int, ahi: int, b: list[str], blo: int, bhi: int, spans: list) -> None:
    """Append the differing spans `(a1, a2, b1, b2)` of `a[alo:ahi]` and `b[blo:bhi]`, in order."""
    while alo < ahi and blo < bhi and a[alo] == b[blo]:
        alo, blo = alo + 1, blo + 1
    while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
        ahi, bhi = ahi - 1, bhi - 1
    if alo == ahi or blo == bhi:
        if alo < ahi or blo < bhi:
            spans.append((alo, ahi, blo, bhi))
        return
    anchors = _unique_anchors(a, alo, ahi, b, blo, bhi) if (ahi - alo) * (bhi - blo) > _SMALL_DIFF else []
    if not anchors:
        matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
        spans += [
            (alo + i1, alo + i2, blo + j1, blo + j2) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"
        ]
        return
    for i, j in anchors:
        _differences(a, alo, i, b, blo, j, spans)
        alo, blo = i + 1, j + 1
    _differences(a, alo, ahi, b, blo, bhi, spans)


def _unique_anchors(a: list[str], alo: int, ahi: int, b: list[str], blo: int, bhi: int) -> list[tuple[int, int]]:
    """The longest run, in order on both sides, of lines that occur exactly once in each range."""
    counts: dict[str, int] = {}
    for line in a[alo:ahi]:
        counts[line] = counts.get(line, 0) + 1
    in_b: dict[str, int] = {}
    for j in range(blo, bhi):
        line = b[j]
        if counts.get(line) == 1:
            in_b[line] = -1 if line in in_b else j
    pairs = [(i, in_b[a[i]]) for i in range(alo, ahi) if in_b.get(a[i], -1) >= 0]
    # Longest increasing subsequence of the b positions (patience sorting).
    tails: list[int] = []  # per length, the pair that ends the run of that length with the smallest b position
    ends: list[int] = []  # those b positions
    previous = [-1] * len(pairs)
    for index, (_, j) in enumerate(pairs):
        length = bisect.bisect_left(ends, j)
        if length > 0:
            previous[index] = tails[length - 1]
        if length == len(tails):
            tails.append(index)
            ends.append(j)
        else:
            tails[length], ends[length] = index, j
    chain, index = [], tails[-1] if tails else -1
    while index != -1:
        chain.append(pairs[index])
        index = previous[index]
    return chain[::-1]
