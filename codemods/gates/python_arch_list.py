"""Python lists of major compute-capability versions passed as a keyword.

FlashInfer compiles each JIT module only for the majors its spec lists:

    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[9, 10]
    )

A gate is the list (or tuple) given to that keyword. It admits every arch of
the universe whose major is listed. A list that is not all integer literals (a
name, a comprehension, a `*spread`) admits unknown and is never rewritten.

`widen` inserts the missing majors where they sort, in the list's own style:
`[9, 10]` becomes `[9, 10, 12]`, `(9, 10)` becomes `(9, 10, 12)`, and a list
written one element per line gets a new line with the same indentation and
line ending. The brackets, the separators, a trailing comma and any comment in
or around the list stay byte for byte.
"""

from __future__ import annotations

import ast
import bisect
import re

import libcst as cst

from codemods.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.gates import CannotWiden, Edit, Gate
from codemods.gates._python import LONE_CR, TRIVIA, PythonSource, admits_of_expression, parse

KIND = "python_arch_list"


def find(
    source: bytes,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    *,
    function: str | None = None,
    keyword: str = "supported_major_versions",
) -> list[Gate]:
    """Every `keyword=[...]` (or `keyword=(...)`) call argument, in source order.

    With `function`, only arguments whose innermost enclosing function or
    method has that name.
    """
    parsed = parse(source)
    gates = []
    for arg in parsed.nodes(cst.Arg):
        if arg.keyword is None or arg.keyword.value != keyword:
            continue
        if not isinstance(arg.value, (cst.List, cst.Tuple)):
            continue
        context = parsed.enclosing_function(arg)
        if function is not None and context != function:
            continue
        gates.append(_gate(parsed, arg.value, keyword, context, universe))
    return gates


def find_in_tree(
    source: bytes,
    tree: ast.Module,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    *,
    keyword: str = "supported_major_versions",
) -> list[Gate] | None:
    """`find(source)` from a stdlib `ast` parse of the same bytes, several times faster than libcst.

    ast columns are UTF-8 byte offsets in their line, so with the line
    starts (after a BOM on line 1) they give libcst's byte spans; the text
    keeps the parentheses written around a list (`=([9, 10])`), as libcst's
    outer span does. None when it cannot vouch to agree with `find` (a line
    ended by a lone CR, a list inside an f-string, anything but parentheses
    between `=` and the list): the caller then calls `find`.
    """
    if keyword.encode() not in source:
        return []
    if b"\r" in source and LONE_CR.search(source):
        return None
    bom = 3 if source.startswith(b"\xef\xbb\xbf") else 0
    starts = [bom] + [match.end() for match in re.finditer(b"\n", source)]

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column

    found: list[tuple[ast.keyword, str, bool]] = []  # (keyword, innermost function, inside an f-string)

    def visit(node: ast.AST, function: str, in_fstring: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.keyword) and child.arg == keyword and isinstance(child.value, (ast.List, ast.Tuple)):
                found.append((child, function, in_fstring))
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            visit(child, inner, in_fstring or isinstance(child, ast.JoinedStr))

    visit(tree, "", False)
    gates = []
    for node, function, in_fstring in found:
        if in_fstring:
            return None  # before Python 3.12, positions inside f-strings are computed after the fact
        value = node.value
        at = TRIVIA.match(source, offset(node.lineno, node.col_offset) + len(keyword)).end()
        if source[at : at + 1] != b"=":
            return None
        start, end = offset(value.lineno, value.col_offset), offset(value.end_lineno, value.end_col_offset)
        at, outer, opened = at + 1, start, 0
        while (at := TRIVIA.match(source, at).end()) < start:
            if source[at : at + 1] != b"(":
                return None
            outer = min(outer, at)
            opened += 1
            at += 1
        if at != start:
            return None
        for _ in range(opened):
            end = TRIVIA.match(source, end).end()
            if source[end : end + 1] != b")":
                return None
            end += 1
        majors = _literal_majors(value)
        if majors is None:
            admits = ArchSet(universe, frozenset(), frozenset(universe))
        else:
            admits = ArchSet(universe, frozenset(a for a in universe if a.major in majors))
        gates.append(
            Gate(
                kind=KIND,
                start=outer,
                end=end,
                line=bisect.bisect_right(starts, outer),
                text=source[outer:end].decode("utf-8"),
                admits=admits,
                context=function,
                detail={"keyword": keyword, "majors": majors},
            )
        )
    gates.sort(key=lambda gate: gate.start)
    return gates


def _literal_majors(node: ast.List | ast.Tuple) -> list[int] | None:
    """`_majors` over an ast list: None when any element is not an integer literal."""
    majors = []
    for element in node.elts:
        if not (isinstance(element, ast.Constant) and type(element.value) is int):
            return None
        majors.append(element.value)
    return majors


def widen(
    source: bytes,
    gate: Gate,
    targets: tuple[Arch, ...],
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
) -> list[Edit]:
    """Edits that add the majors of `targets` the list lacks; `[]` if it has them all."""
    parsed = parse(source)
    node = _locate(parsed, gate)
    majors = _majors(node)
    if majors is None:
        raise CannotWiden(
            f"line {gate.line}: {gate.text} is not a list of integer literals; widen it by hand"
        )
    missing = sorted({arch.major for arch in targets} - set(majors))
    if not missing:
        return []
    elements = list(node.elements)
    if not elements:
        return [_fill_empty(parsed, node, missing)]
    insert = _insert_lines if _one_per_line(parsed, node) else _insert_inline
    edits: list[Edit] = []
    for position in sorted({_position(majors, major) for major in missing}):
        added = [major for major in missing if _position(majors, major) == position]
        edits.extend(insert(parsed, elements, position, added))
    return edits


def _gate(
    parsed: PythonSource,
    node: cst.List | cst.Tuple,
    keyword: str,
    context: str,
    universe: tuple[Arch, ...],
) -> Gate:
    start, end = parsed.outer_span(node)
    majors = _majors(node)
    if majors is None:
        admits = ArchSet(universe, frozenset(), frozenset(universe))
    else:
        admits = ArchSet(universe, frozenset(a for a in universe if a.major in majors))
    return Gate(
        kind=KIND,
        start=start,
        end=end,
        line=parsed.line(start),
        text=parsed.text(start, end),
        admits=admits,
        context=context,
        detail={"keyword": keyword, "majors": majors},
    )


def _locate(parsed: PythonSource, gate: Gate) -> cst.List | cst.Tuple:
    for node in parsed.nodes((cst.List, cst.Tuple)):
        if parsed.outer_span(node) == (gate.start, gate.end):
            return node
    raise CannotWiden(
        f"line {gate.line}: {gate.text} is no longer at this place; find the gates again"
    )


def _majors(node: cst.List | cst.Tuple) -> list[int] | None:
    """The listed majors, or None when any element is not an integer literal."""
    majors = []
    for element in node.elements:
        if not isinstance(element, cst.Element) or not isinstance(element.value, cst.Integer):
            return None
        majors.append(element.value.evaluated_value)
    return majors


def _position(majors: list[int], major: int) -> int:
    """Index of the first listed major above `major` (ascending insert), or the end."""
    return next((i for i, listed in enumerate(majors) if listed > major), len(majors))


def _one_per_line(parsed: PythonSource, node: cst.List | cst.Tuple) -> bool:
    """True when every element starts on a line of its own."""
    return all(
        parsed.indent(parsed.outer_span(element.value)[0]) is not None for element in node.elements
    )


def _fill_empty(parsed: PythonSource, node: cst.List | cst.Tuple, majors: list[int]) -> Edit:
    opening = node.lbracket if isinstance(node, cst.List) else node.lpar[0]
    at = parsed.span(opening)[0] + 1
    text = ", ".join(str(major) for major in majors)
    if isinstance(node, cst.Tuple) and len(majors) == 1:
        text += ","
    return Edit(at, at, text.encode())


def _insert_inline(
    parsed: PythonSource, elements: list[cst.Element], position: int, majors: list[int]
) -> list[Edit]:
    """`[9, 10]` -> `[9, 10, 12]`, reusing the separator the list already has."""
    separator = b", "
    if len(elements) > 1:
        between = parsed.source[
            parsed.outer_span(elements[0].value)[1] : parsed.outer_span(elements[1].value)[0]
        ]
        if b"\n" not in between and b"#" not in between:
            separator = between
    added = [str(major).encode() for major in majors]
    if position < len(elements):
        at = parsed.outer_span(elements[position].value)[0]
        return [Edit(at, at, b"".join(text + separator for text in added))]
    at = parsed.outer_span(elements[-1].value)[1]
    return [Edit(at, at, b"".join(separator + text for text in added))]


def _insert_lines(
    parsed: PythonSource, elements: list[cst.Element], position: int, majors: list[int]
) -> list[Edit]:
    """A list written one element per line gets one new line per major."""
    reference = elements[min(position, len(elements) - 1)]
    value_start, value_end = parsed.outer_span(reference.value)
    indent = parsed.indent(value_start)
    eol = parsed.eol(value_end)
    added = [str(major).encode() for major in majors]
    if position < len(elements):
        at = parsed.line_start(value_start)
        return [Edit(at, at, b"".join(indent + text + b"," + eol for text in added))]
    # Appending: keep the file's choice of a trailing comma after the last element.
    has_comma = isinstance(reference.comma, cst.Comma)
    after = parsed.span(reference.comma)[1] if has_comma else value_end
    rest = parsed.source[after : parsed.line_end(after)].strip()
    if rest and not rest.startswith(b"#"):
        # The closing bracket shares the last element's line.
        if has_comma:
            text = b"".join(eol + indent + major + b"," for major in added)
        else:
            text = b"".join(b"," + eol + indent + major for major in added)
        return [Edit(after, after, text)]
    at = parsed.line_end(after)
    if has_comma:
        return [Edit(at, at, b"".join(indent + text + b"," + eol for text in added))]
    lines = b"," + eol
    return [
        Edit(value_end, value_end, b","),
        Edit(at, at, lines.join(indent + text for text in added) + eol),
    ]



def admits(text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> ArchSet:
    """The archs a list of majors, given as text (`[9, 10, 12]`), admits."""

    def majors(node: cst.BaseExpression) -> set[int] | None:
        listed = _majors(node) if isinstance(node, (cst.List, cst.Tuple)) else None
        return None if listed is None else set(listed)

    return admits_of_expression(text, universe, majors)
