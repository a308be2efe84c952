"""Placing new entries in a Python list of archs, in the list's own style: where each goes (sorted among the
entries it reads), on one line or one per line as the list is written, and whether the line it grows is an
assignment black would split. Used by python_arch_list's `widen`.
"""

from __future__ import annotations

import ast

from codemods.gates import Edit
from codemods.gates.python.lists.reading import Lines, Value
from codemods.gates.python.layout.text import eol as line_eol, line_end, line_start, skip_trivia


def _assigned_on_one_line(source: bytes, lines: Lines, statement: ast.stmt | None) -> bool:
    """Whether the list is in the value of an assignment written on a line of its own (`X = frozenset({...})`)."""
    if not isinstance(statement, (ast.Assign, ast.AnnAssign)) or statement.lineno != statement.end_lineno:
        return False
    start, end = lines.span(statement)  # type: ignore[arg-type]  # a statement has positions as an expression has
    before, after = source[line_start(source, start) : start], source[end : line_end(source, end)]
    return not before.strip() and skip_trivia(after, 0) == len(after)  # nothing else on the line (no `; x = 1`)


def _covers(listed: Value, wanted: Value) -> bool:
    return listed[0] == wanted[0] and listed[1] in (None, wanted[1])


def _key(value: Value) -> tuple[int, int]:
    return (value[0], -1 if value[1] is None else value[1])


def _element_span(source: bytes, inside: tuple[int, int], span: tuple[int, int]) -> tuple[int, int]:
    """An element's span with the parentheses written around it (`[(9), 10]`), inside its list's brackets."""
    start, end = span
    while True:
        before = source[inside[0] + 1 : start].rstrip()
        after = skip_trivia(source, end)
        if not (before.endswith(b"(") and source[after : after + 1] == b")" and after < inside[1] - 1):
            return start, end
        start, end = inside[0] + len(before), after + 1


def _position(keys: list[tuple[int, int]], key: tuple[int, int]) -> int:
    """Index of the first listed value above `key` (ascending insert), or the end."""
    return next((i for i, listed in enumerate(keys) if listed > key), len(keys))


def _indent(source: bytes, offset: int) -> bytes | None:
    """The whitespace before `offset` on its line, or None when something else precedes it."""
    prefix = source[line_start(source, offset) : offset]
    return prefix if not prefix.strip() else None


def _one_per_line(source: bytes, elements: list[tuple[int, int]]) -> bool:
    """True when every element starts on a line of its own."""
    return all(_indent(source, start) is not None for start, _ in elements)


def _fill_empty(source: bytes, node: ast.List | ast.Tuple | ast.Set, inside: tuple[int, int], added: list[str]) -> Edit:
    at = inside[0] + 1  # just past `[` or `(` (a `()` tuple's span is its parentheses)
    text = ", ".join(added)
    if isinstance(node, ast.Tuple) and len(added) == 1:
        text += ","
    return Edit(at, at, text.encode())


def _insert_inline(
    source: bytes, inside: tuple[int, int], elements: list[tuple[int, int]], position: int, texts: list[str]
) -> list[Edit]:
    """`[9, 10]` -> `[9, 10, 12]`, reusing the separator the list already has."""
    separator = b", "
    if len(elements) > 1:
        between = source[elements[0][1] : elements[1][0]]
        if b"\n" not in between and b"#" not in between:
            separator = between
    added = [text.encode() for text in texts]
    if position < len(elements):
        at = elements[position][0]
        return [Edit(at, at, b"".join(text + separator for text in added))]
    at = elements[-1][1]
    return [Edit(at, at, b"".join(separator + text for text in added))]


def _insert_lines(
    source: bytes, inside: tuple[int, int], elements: list[tuple[int, int]], position: int, texts: list[str]
) -> list[Edit]:
    """A list written one element per line gets one new line per entry."""
    value_start, value_end = elements[min(position, len(elements) - 1)]
    indent = _indent(source, value_start)
    assert indent is not None  # _one_per_line chose this insert: every element starts a line of its own
    eol = line_eol(source, value_end)
    added = [text.encode() for text in texts]
    if position < len(elements):
        at = line_start(source, value_start)
        return [Edit(at, at, b"".join(indent + text + b"," + eol for text in added))]
    # Appending: keep the file's choice of a trailing comma after the last element.
    comma_at = skip_trivia(source, value_end)
    has_comma = source[comma_at : comma_at + 1] == b"," and comma_at < inside[1] - 1
    after = comma_at + 1 if has_comma else value_end
    rest = source[after : line_end(source, after)].strip()
    if rest and not rest.startswith(b"#"):
        # The closing bracket shares the last element's line.
        if has_comma:
            text = b"".join(eol + indent + major + b"," for major in added)
        else:
            text = b"".join(b"," + eol + indent + major for major in added)
        return [Edit(after, after, text)]
    at = line_end(source, after)
    if has_comma:
        return [Edit(at, at, b"".join(indent + text + b"," + eol for text in added))]
    lines = b"," + eol
    return [
        Edit(value_end, value_end, b","),
        Edit(at, at, lines.join(indent + text for text in added) + eol),
    ]
