"""How a widened `#if` directive is laid out: its file's column limit and continuation style, new terms joined
into a chain where they sort, and escaped newlines aligned as clang-format aligns them.

cuda_guard decides what a guard becomes; this module decides where its lines break. `Lines` reads the file
once (`_file_style`: the column limit `cpp.wrap.column_limit` gives, whether long `#if` lines continue with the
operator first, the blanks before a `\\`, the continuation indent, the line ending, whether `\\`s are aligned).
`inserted` puts new terms into a chain (`joined` fills lines with them up to the limit, `refilled` says when the
terms after them are laid out again), `laid_out` puts an `&&` operand that grew too long on a line of its own as
clang-format does, and `aligned` moves a directive's `\\`s to one space past its longest line.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from copy import copy
from functools import lru_cache

from codemods.cpp.evaluate import Guard
from codemods.cpp.expression import Node
from codemods.gates import Edit, Gate, apply_edits
from codemods.gates.cpp.wrap import column_limit


def after_opening(opening: int, lines: Lines) -> bytes:
    """The indent of a continuation line inside the `(` at snippet offset `opening`: one column past it, as
    clang-format aligns it."""
    opening += lines.shift
    return b" " * (opening - (lines.source.rfind(b"\n", 0, opening) + 1) + 1)


@lru_cache(maxsize=8)
def _file_style(source: bytes) -> tuple[int, bool, bytes, bytes, bytes, bool]:
    """Once per file (bytes cache their hash): column limit, how long `#if` lines continue, line ending, and
    whether the file aligns their `\\`s clang-format's way (its first continued `#if` does, `_left_aligned`)."""
    match = Lines._CONTINUED.search(source)
    aligned = False
    if match:
        end = match.start()
        while (end := source.find(b"\n", end) + 1) and source[max(0, end - 3) : end - 1].rstrip(b"\r").endswith(b"\\"):
            pass
        aligned = _left_aligned(source[match.start() : end or len(source)])
    return (
        column_limit(source),
        bool(match and match.group("lead")),
        # padding up to an aligned `\\` is no style of its own: one `\\` of a line goes one space past it
        match.group("before") if match and match.group("before") and not aligned else b" ",
        match.group("indent") if match else b"    ",
        b"\r\n" if b"\r\n" in source else b"\n",
        aligned,
    )


class Lines:
    """The file around a condition: its longest line, and how it continues long `#if` lines."""

    _CONTINUED = re.compile(rb"^[ \t]*#[ \t]*(?:if|elif)\b.*?(?P<before>[ \t]*)\\\r?\n(?P<indent>[ \t]*)(?P<lead>\|\||\bor\b)?", re.M)

    def __init__(self, source: bytes, shift: int) -> None:
        self.source = source
        self.shift = shift  # add to an offset in the snippet to get one in the source
        self.longest, self.operator_first, self.before_backslash, self.indent, self.eol, self.aligned = _file_style(source)

    def column(self, offset: int) -> tuple[int, int]:
        """(length of the line holding `offset` in the source, its column) for a snippet offset."""
        at = offset + self.shift
        start = self.source.rfind(b"\n", 0, at) + 1
        end = self.source.find(b"\n", at)
        end = len(self.source) if end < 0 else end
        return len(self.source[start:end].rstrip(b"\r")), at - start

    def unlimited(self) -> Lines:
        """These lines with no column limit: `joined` continues no line."""
        lines = copy(self)
        lines.longest = sys.maxsize
        return lines


def break_before(guard: Guard, operand: Node, lines: Lines, added: int) -> Edit | None:
    """clang-format's break before an `&&` operand that grows by `added` bytes past the column limit: the line
    continued after the `&&` (before it, where the file puts operators first), the operand on a line of its own
    indented as the file continues its `#if` lines. None where the line still fits, the operand starts its line or
    spans lines, is not right after an `&&`, or would not fit on a line of its own either."""
    length, column = lines.column(operand.start)
    if length + added <= lines.longest:
        return None
    tokens = [t for t in guard.tokens if t.end <= operand.start]
    if len(tokens) < 2 or tokens[-1].text != "&&" or b"\n" in lines.source[tokens[-2].end + lines.shift : operand.end + lines.shift]:
        return None
    if len(lines.indent) + length - column + added > lines.longest:
        return None
    operator, previous = tokens[-1], tokens[-2]
    if lines.operator_first:
        return Edit(previous.end, operator.start, lines.before_backslash + b"\\" + lines.eol + lines.indent)
    return Edit(operator.end, operand.start, lines.before_backslash + b"\\" + lines.eol + lines.indent)


def laid_out(guard: Guard, lines: Lines, held: Node, insert: Callable[[Lines, bytes | None], list[Edit]]) -> list[Edit]:
    """The edits `insert(lines, indent)` makes inside `held`, an operand in parentheses (or about to be): on its
    line where they fit, else `held` on a continuation line of its own after its `&&` (`break_before`), else
    broken inside, one column past its `(`."""
    inline = insert(lines.unlimited(), None)
    broken = break_before(guard, held, lines, sum(len(edit.text) for edit in inline))
    if broken is not None:
        return [broken, *inline]
    return insert(lines, after_opening(held.start, lines))


def inserted(
    guard: Guard, lines: Lines, terms: list, values: list[int], wanted: list[int], respell: Callable[[int, int], bytes],
    indent: bytes | None = None,
) -> list[Edit]:
    """Each wanted value a new term of a chain (`terms`, whose values are `values`), joined by the chain's
    operator (`||`, or `or` where the guard spells it so) after the greatest term below it (before the first when
    none is), spelled by `respell(i, value)`: term i with its value changed; continued where too long (`joined`).
    New terms that go where a continued chain breaks its line and do not fit there push the terms after them
    along: those lines are filled again up to the limit, as clang-format refills them (`refilled`)."""
    operator_text = b"or" if any(t.alternative and t.text == "||" for t in guard.tokens) else b"||"
    inserts: dict[int, list[int]] = {}  # index of the term to insert after (-1: before the first) -> values
    for value in wanted:
        after = max((i for i, listed in enumerate(values) if listed < value), default=-1)
        inserts.setdefault(after, []).append(value)
    edits = []
    for after, added in sorted(inserts.items()):
        reference = terms[max(after, 0)]
        texts = [respell(max(after, 0), value) for value in added]
        at = reference.end if after >= 0 else reference.start
        text = joined(lines, at, operator_text, texts, prefix=after >= 0, indent=indent)
        if after < 0:  # before the first term: the whole chain is laid out again where the new terms alone overflow
            first = 0 if len(text.split(b"\n")[0]) + lines.column(at)[1] > lines.longest and _continuous(lines, terms) else None
        else:  # the rest of the chain, old terms and new, laid out again from here where the line breaks after it
            first = after + 1 if b"\n" in text and refilled(lines, terms[after:]) else None
        if first is not None:
            for index in range(first, len(terms)):
                texts.append(lines.source[terms[index].start + lines.shift : terms[index].end + lines.shift])
                texts += [respell(index, value) for value in inserts.get(index, [])]
            lead = texts.pop(0) if after < 0 else b""  # before the first: the first new term goes where it stood
            length, column = lines.column(terms[-1].end)
            body = joined(lines, at, operator_text, texts, True, indent, length - column, lead=len(lead))
            edits.append(Edit(at, terms[-1].end, lead + body))
            break
        edits.append(Edit(at, at, text))
    return edits


_BETWEEN = re.compile(rb"[ \t]*(?:\|\||or)?[ \t]*(?:\\\r?\n[ \t]*)?(?:\|\||or)?[ \t]*")


def refilled(lines: Lines, terms: list) -> bool:
    """Whether the terms of a chain from `terms[0]` on may be laid out again: `terms[0]` ends its line, which
    continues, and between them stand only one operator, blanks and escaped newlines."""
    if len(terms) < 2:
        return False
    gap = lines.source[terms[0].end + lines.shift : terms[1].start + lines.shift]
    return b"\n" in gap and _continuous(lines, terms)


def _continuous(lines: Lines, terms: list) -> bool:
    """Whether only one operator, blanks and escaped newlines stand between each two terms of `terms` (no comment,
    no other token): a chain that can be laid out again from its terms' texts alone."""
    gaps = [lines.source[a.end + lines.shift : b.start + lines.shift] for a, b in zip(terms, terms[1:])]
    return all(_BETWEEN.fullmatch(gap) and gap.count(b"||") + gap.count(b"or") == 1 for gap in gaps)


def joined(
    lines: Lines, at: int, operator_text: bytes, texts: list[bytes], prefix: bool, indent: bytes | None = None,
    refill: int | None = None, lead: int = 0,
) -> bytes:
    """`|| t1 || t2` to insert at snippet offset `at` (or `t1 || t2 || ` before a term), continued where too long
    (on a line indented as the file continues its `#if` lines, or by `indent`). With `refill` (the length of what
    follows the last text on its line), each line is filled up to the limit, its `operator \\` included; `lead`
    columns of text are written at `at` before it."""
    indent = lines.indent if indent is None else indent
    length, column = lines.column(at)
    if not prefix:  # before the first term: the new terms stay where the condition starts (`#if` keeps it)
        leading = b" ".join(text + b" " + operator_text for text in texts)
        if column + len(leading) + 1 + length - column <= lines.longest:
            return leading + b" "
        # too long: the line breaks after them, and the old terms go on the continuation line
        if lines.operator_first:
            return leading[: -len(operator_text) - 1] + lines.before_backslash + b"\\" + lines.eol + indent + operator_text + b" "
        return leading + lines.before_backslash + b"\\" + lines.eol + indent
    out = b""
    width = column + lead  # where the text being written starts on its line
    rest = length - column  # what follows the insertion point on the original line
    pieces = [(b" " + operator_text + b" ", text) for text in texts]
    # upstream breaks before the terms it adds rather than filling the old line up (ef687e900)
    fits = refill is not None or length + sum(len(joiner + text) for joiner, text in pieces) <= lines.longest
    continued = len(lines.before_backslash) + 1 + (0 if lines.operator_first else len(operator_text) + 1)
    for index, (joiner, text) in enumerate(pieces):
        piece = joiner + text
        if refill is not None:
            rest = refill if index == len(pieces) - 1 else continued
        too_long = width + len(piece) + rest > lines.longest or (index == 0 and not fits)
        if too_long and width > 0:
            if lines.operator_first:
                out += lines.before_backslash + b"\\" + lines.eol + indent + joiner.lstrip() + text
                width = len(indent) + len(joiner.lstrip() + text)
            else:
                out += joiner.rstrip() + lines.before_backslash + b"\\" + lines.eol + indent + text
                width = len(indent) + len(text)
            continue
        out += piece
        width += len(piece)
    return out


def in_parentheses(term: Node, edits: list[Edit]) -> list[Edit]:
    """`edits` that insert before and after `term`, with `(` and `)` around the whole."""
    before = b"".join(edit.text for edit in edits if edit.start == term.start)
    after = b"".join(edit.text for edit in edits if edit.start == term.end)
    return [Edit(term.start, term.start, b"(" + before), Edit(term.end, term.end, after + b")")]


def aligned(source: bytes, gate: Gate, edits: list[Edit]) -> list[Edit]:
    """`edits` of a guard, with the directive's escaped newlines aligned again where the edits continued it onto
    a new line and the directive had them aligned clang-format's way (`AlignEscapedNewlines: Left`, FlashInfer's:
    every `\\` one space past the longest of those lines; true of a directive with one): each is moved to one space
    past the longest line now, and so are those of a directive on one line where the file aligns them so. A
    directive whose `\\`s follow another rule keeps them as the edits wrote them."""
    start = source.rfind(b"\n", 0, gate.start) + 1
    old = source[start : gate.end]
    new = apply_edits(old, [Edit(e.start - start, e.end - start, e.text) for e in edits])  # the edits are in the gate
    if not any(b"\n" in edit.text for edit in edits) or not (_left_aligned(old) or b"\n" not in old and _file_style(source)[5]):
        return edits  # no line was continued, or neither the directive nor (on one line) the file aligns its `\\`s
    lines = new.split(b"\n")
    escaped = [i for i, line in enumerate(lines) if line.removesuffix(b"\r").endswith(b"\\")]
    width = max(len(lines[i].removesuffix(b"\r")[:-1].rstrip()) for i in escaped)
    for i in escaped:
        eol = b"\r" if lines[i].endswith(b"\r") else b""
        content = lines[i].removesuffix(b"\r")[:-1].rstrip()
        lines[i] = content + b" " * (width - len(content) + 1) + b"\\" + eol
    return [Edit(start, gate.end, b"\n".join(lines))]


def _left_aligned(directive: bytes) -> bool:
    """Whether every `\\` of the directive stands one space past the longest of its escaped lines (true of one;
    false of none: a directive on one line says nothing of how the file aligns them)."""
    lines = [line.removesuffix(b"\r") for line in directive.split(b"\n")]
    escaped = [line for line in lines if line.endswith(b"\\")]
    if not escaped:
        return False
    width = max(len(line[:-1].rstrip()) for line in escaped)
    return all(len(line) - 1 == width + 1 for line in escaped)
