"""A C++ line a widening made longer than the file's column limit, broken as clang-format breaks it.

FlashInfer's csrc/ is clang-formatted (Google style, `ColumnLimit: 100`,
`AlignAfterOpenBracket: Align`), and upstream's own widenings come out that
way (9c609f050):

    if ((sm == 120 || sm == 121) &&
        !kernels::cutlass_kernels::isValidSM120MOESpecialisation<T, WeightType>()) {

`fit` breaks a too-long line after a `&&` or `||`: the one least deeply
nested in brackets among those whose line up to them fits (the rightmost of
those), the rest on a continuation line aligned one column after the bracket
that holds that operator (or after `return `, for an operand of the returned
expression), again while the rest is too long and has such a break. A line with no such break is left as it is. The limit is the file's
(`column_limit`: the length three of its lines reach, 100 at least), which
cuda_guard's continued `#if` lines keep to as well.
"""

from __future__ import annotations

from functools import lru_cache

from codemods.gates import Edit, apply_edits


@lru_cache(maxsize=8)
def column_limit(source: bytes) -> int:
    """The file's column limit: the length three of its lines reach, so that one or two stray long lines (a URL,
    a clang-format-off block) do not count; xqa/utils.cuh has one 102-column line and upstream still breaks its
    `#elif` at 100 (54101e953). 100 at least, FlashInfer's clang-format limit: a file of short lines (a recipe's
    test case, a small .cu) says nothing about its project's limit, and its real file is not broken at 80 (0.7.4's
    cake_blackwell_softmax.cu keeps a 94-column widened `if`)."""
    lengths = sorted((len(line.rstrip(b"\r")) for line in source.split(b"\n")), reverse=True)
    return max(100, lengths[2] if len(lengths) > 2 else 0)


_OPEN, _CLOSE = b"([{", b")]}"


def _breaks(line: bytes) -> list[tuple[int, int, int]]:
    """(depth, offset just past the operator, column of the bracket holding it) for each `&&`/`||` of `line`
    held by a bracket opened on the line, outside string and character literals and comments."""
    found: list[tuple[int, int, int]] = []
    opened: list[int] = []
    i, n = 0, len(line)
    word = line[len(line) - len(line.lstrip()) :]
    if word.startswith(b"return "):
        # `return a ||` / `       b;`: the operands of a returned expression align after `return `
        opened.append(n - len(word) + len(b"return ") - 1)
    while i < n:
        c = line[i : i + 1]
        if c in (b'"', b"'"):
            j = i + 1
            while j < n and line[j : j + 1] != c:
                j += 2 if line[j : j + 1] == b"\\" else 1
            i = j + 1
            continue
        if line.startswith((b"//", b"/*"), i):
            break  # a comment: nothing after it is broken
        if c in _OPEN:
            opened.append(i)
        elif c in _CLOSE:
            if opened:
                opened.pop()
            else:
                return []  # closes a bracket of an earlier line: the alignment is not on this line
        elif line.startswith((b"&&", b"||"), i) and opened:
            found.append((len(opened), i + 2, opened[-1]))
            i += 2
            continue
        i += 1
    return found


def _breaks_of(line: bytes, limit: int, eol: bytes) -> list[tuple[int, int, bytes]]:
    """Where `line` (no line ending) breaks until each piece fits, where it can: (start, end, text) in the line's
    own offsets, each the blanks after an operator replaced by a line ending and the continuation's indent."""
    out: list[tuple[int, int, bytes]] = []
    offset = 0  # where the line now being broken starts in `line`, less its indent
    current = line
    while len(current) > limit:
        fitting = [b for b in _breaks(current) if len(current[: b[1]].rstrip()) <= limit and current[b[1] :].strip()]
        if not fitting:
            break
        _, at, bracket = min(fitting, key=lambda b: (b[0], -b[1]))
        kept = len(current[:at].rstrip())
        rest = len(current) - len(current[at:].lstrip())
        indent = b" " * (bracket + 1)
        out.append((offset + kept, offset + rest, eol + indent))
        offset += rest - len(indent)
        current = indent + current[rest:]
    return out


def fit(source: bytes, edits: list[Edit]) -> list[Edit]:
    """`edits` of `source`, with each line they make longer than the file's column limit broken (see the module):
    a break inside an edit's new text is written into it, one elsewhere is an edit of its own (the blanks after
    the operator), so the edits stay as small as they were."""
    if not edits:
        return edits
    edits = sorted(set(edits))
    limit = column_limit(source)
    after = apply_edits(source, edits)
    eol = b"\r\n" if b"\r\n" in source else b"\n"
    placed: list[tuple[int, int, Edit]] = []  # each edit's new text in `after`, and the edit
    shift = 0
    for edit in edits:
        placed.append((edit.start + shift, edit.start + shift + len(edit.text), edit))
        shift += len(edit.text) - (edit.end - edit.start)
    breaks: list[tuple[int, int, bytes]] = []
    for line_start in sorted({after.rfind(b"\n", 0, start) + 1 for start, _, _ in placed}):
        end = after.find(b"\n", line_start)
        line = after[line_start : len(after) if end < 0 else end].rstrip(b"\r")
        breaks += [(line_start + a, line_start + b, text) for a, b, text in _breaks_of(line, limit, eol)]
    if not breaks:
        return edits
    texts = {edit: edit.text for edit in edits}
    out: list[Edit] = []
    for a, b, text in reversed(breaks):
        inside = next(((start, edit) for start, stop, edit in placed if start <= a and b <= stop), None)
        if inside is not None:
            start, edit = inside
            texts[edit] = texts[edit][: a - start] + text + texts[edit][b - start :]
            continue
        if any(a < stop and start < b for start, stop, _ in placed):
            return edits  # a break across an edit's edge: left unbroken rather than guessed
        before = sum(len(e.text) - (e.end - e.start) for start, stop, e in placed if stop <= a)
        out.append(Edit(a - before, b - before, text))
    return sorted(out + [Edit(edit.start, edit.end, texts[edit]) for edit in edits])
