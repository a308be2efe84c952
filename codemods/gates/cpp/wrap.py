"""A C++ line a widening made longer than the file's column limit, broken as clang-format breaks it.

FlashInfer's csrc/ is clang-formatted (Google style, `ColumnLimit: 100`,
`AlignAfterOpenBracket: Align`), and upstream's own widenings come out that
way (9c609f050):

    if ((sm == 120 || sm == 121) &&
        !kernels::cutlass_kernels::isValidSM120MOESpecialisation<T, WeightType>()) {

`fit` breaks a too-long check macro streaming a message before its first `<<`
(`TVM_FFI_ICHECK(sm == 90 || sm == 100)` / `    << "msg";`), and a too-long
line (or what is left of it) after a `&&` or `||`: the one least deeply
nested in brackets among those whose line up to them fits (the rightmost of
those), the rest on a continuation line aligned one column after the bracket
that holds that operator (or after `return `, for an operand of the returned
expression; four columns further when that bracket holds a list of arguments,
so that the rest does not read as the next argument), again while the rest is too long and has such a break. A line
with no such break is left as it is. The limit is the file's (`column_limit`:
the length three of its lines reach, 100 at least), which cuda_guard's
continued `#if` lines keep to as well. The cuts are placed back into the
widening's edits by `python.layout.wrap.split_line`, as black's are for Python.
"""

from __future__ import annotations

import re
from functools import lru_cache

from codemods.cpp.lexer import OPAQUE_RE
from codemods.gates import Edit
from codemods.gates.python.layout.wrap import split_line


@lru_cache(maxsize=8)
def column_limit(source: bytes) -> int:
    """The file's column limit: the length three of its lines reach, so that one or two stray long lines (a URL,
    a clang-format-off block) do not count; xqa/utils.cuh has one 102-column line and upstream still breaks its
    `#elif` at 100 (54101e953). 100 at least, FlashInfer's clang-format limit: a file of short lines (a recipe's
    test case, a small .cu) says nothing about its project's limit, and its real file is not broken at 80 (0.7.4's
    cake_blackwell_softmax.cu keeps a 94-column widened `if`)."""
    lengths = sorted((len(line.rstrip(b"\r")) for line in source.split(b"\n")), reverse=True)
    return max(100, lengths[2] if len(lengths) > 2 else 0)


# The lexer's comments and string/character literals (cpp.lexer.OPAQUE_RE), for a line as text: nothing in them is
# a bracket or an operator to break at.
_OPAQUE = re.compile(OPAQUE_RE.pattern.decode("ascii"), re.DOTALL)


def _breaks(line: str) -> list[tuple[int, int, int]]:
    """(depth, offset just past the operator, column of the bracket holding it) for each `&&`/`||` of `line`
    held by a bracket opened on the line, outside string and character literals and comments."""
    masked = _OPAQUE.sub(lambda match: "\0" * len(match.group()), line)
    found: list[tuple[int, int, int]] = []
    opened: list[int] = []
    listing: set[int] = set()  # brackets holding a `,` of their own: an argument list
    angles = 0  # open template argument lists (`Foo<T, U>`: clang-formatted code spaces a comparison's `<`)
    word = line.lstrip()
    if word.startswith("return "):
        # `return a ||` / `       b;`: the operands of a returned expression align after `return `
        opened.append(len(line) - len(word) + len("return ") - 1)
    i = 0
    while i < len(masked):
        c = masked[i]
        if c in "([{":
            opened.append(i)
        elif c in ")]}":
            if not opened:
                return []  # closes a bracket of an earlier line: the alignment is not on this line
            opened.pop()
        elif c == "<" and i and (masked[i - 1].isalnum() or masked[i - 1] == "_") and masked[i + 1 : i + 2] not in ("<", "="):
            angles += 1
        elif c == ">" and angles:
            angles -= 1
        elif c == "," and opened and not angles:
            listing.add(opened[-1])
        elif masked.startswith(("&&", "||"), i):
            if opened:
                found.append((len(opened), i + 2, opened[-1]))
            i += 2
            continue
        i += 1
    # an operand broken inside one argument of several goes four columns deeper than the argument, so that it is
    # not read as the next argument: `CHECK((a) ||` / `          (b),` / `      "msg")` (8f4e806e2)
    return [(depth, at, bracket + 4 if bracket in listing else bracket) for depth, at, bracket in found]


# A statement that is a call (a check macro) streaming into `<<`: `TVM_FFI_ICHECK(cond) << "msg";`
_STREAMED_CALL = re.compile(r"^\s*[A-Za-z_][\w:]*\s*\(")


def _stream(line: str) -> int | None:
    """Where the first `<<` of a call statement streaming a message starts (`TVM_FFI_ICHECK(cond) << "msg";`),
    when it is outside every bracket and follows the call's closing parenthesis; else None."""
    if not _STREAMED_CALL.match(line):
        return None
    masked = _OPAQUE.sub(lambda match: "\0" * len(match.group()), line)
    depth = 0
    for i, c in enumerate(masked):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0 and masked.startswith("<<", i):
            return i if masked[:i].rstrip().endswith(")") else None
    return None


def _breaks_of(line: str, limit: int, eol: str) -> list[tuple[int, int, str]]:
    """Where `line` breaks until each piece fits, where it can: (start, end, text) columns of the line (its
    cuts), each the blanks after an operator replaced by a line ending and the continuation's indent. A check
    macro's streamed message goes first, before its `<<`, four columns deeper, as clang-format puts it:
    `TVM_FFI_ICHECK(sm == 90 || sm == 100)` / `    << "msg";` (the condition is then broken on its own)."""
    stream = _stream(line) if len(line) > limit else None
    if stream is not None:
        head = line[:stream].rstrip()
        indent = " " * (len(line) - len(line.lstrip()) + 4)
        return [*_breaks_of(head, limit, eol), (len(head), stream, eol + indent)]
    out: list[tuple[int, int, str]] = []
    offset = 0  # where the line now being broken starts in `line`, less its indent
    current = line
    while len(current) > limit:
        fitting = [b for b in _breaks(current) if len(current[: b[1]].rstrip()) <= limit and current[b[1] :].strip()]
        if not fitting:
            break
        _, at, bracket = min(fitting, key=lambda b: (b[0], -b[1]))
        kept = len(current[:at].rstrip())
        rest = len(current) - len(current[at:].lstrip())
        indent = " " * (bracket + 1)
        out.append((offset + kept, offset + rest, eol + indent))
        offset += rest - len(indent)
        current = indent + current[rest:]
    return out


def fit(source: bytes, edits: list[Edit]) -> list[Edit]:
    """`edits` of `source`, with the line they make longer than the file's column limit broken (see the module),
    placed back into them as python.layout.wrap.split_line places black's cuts."""
    return split_line(source, edits, lambda line, eol, first, last: _breaks_of(line, column_limit(source), eol))
