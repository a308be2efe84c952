"""Python lists of GPU archs: a keyword's list, or a call's argument (decorators too).

FlashInfer compiles each JIT module only for the majors its spec lists, and
checks devices against lists of compute capabilities:

    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[9, 10]
    )

    @supported_compute_capability([100, 103])
    def _cublaslt_mm_bf16_requirement(...): ...

    if _match_sm_version(a.device, ["100", "103", "110"]): ...

A gate is one such list (or tuple). By default it is the list given to the
`supported_major_versions` keyword of any call; a recipe picks others with
`call` (the callee's name: `supported_compute_capability`, or the last name of
`ctx.flags`) plus `position` (0-based positional argument) or `keyword`.
With `call` alone every list given to the call is a gate. `scan` also knows
the capability-list calls in `KNOWN_CALLS`.

The list's values decide its style and what it admits:

- majors, integers below 20 (`[9, 10]`): every arch of each major;
- full capabilities, integers from 20 (`[90, 120]`, major * 10 + minor):
  those archs, whichever variant;
- strings (`["100", "103"]`, `["sm_100a"]`, `["12.0a"]`): capabilities (or
  majors, `["9", "10"]`) spelled with one prefix, one form (`120` or `12.0`)
  and a suffix.

A list that is not all literals of one style (a name, a comprehension, a
`*spread`, `[9, 100]`, concatenated strings) admits unknown and is never
rewritten; a call's argument that is not a list at all (`CCS`) is such a
gate too, so a recipe that selects it is refused with the reason.

`widen` inserts what the list lacks where it sorts, in the list's own style:
`[9, 10]` gains the major `12`; `[120]` gains `121`; `["100", "103"]` gains
`"120", "121"` with the same quotes; `["9.0a", "10.0a"]` gains `"12.0a"`. A
list written one element per line gets a new line with the same indentation
and line ending. The brackets, the separators, a trailing comma and any
comment in or around the list stay byte for byte. An empty list has no style
to follow (unless it is `supported_major_versions`), nor has a string list
whose entries carry different suffixes: both are refused.
"""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass

from typing import TYPE_CHECKING

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.core.lazy import LazyModule
from codemods.gates import CannotWiden, Edit, Gate
from codemods.gates._arch_lists import Listed, Value, admits_of, ast_entries, cst_entries, majors_detail, read_entries
from codemods.gates._python import LONE_CR, PythonSource, mentioning, parse, skip_trivia

if TYPE_CHECKING:
    import libcst as cst
else:  # imported on first use: `codemod list` needs no libcst
    cst = LazyModule("libcst")

KIND = "python_arch_list"

MAJORS_KEYWORD = "supported_major_versions"
# Calls whose argument at this position is a list of compute capabilities (FlashInfer): what `scan` lists.
KNOWN_CALLS = {"supported_compute_capability": 0, "_match_sm_version": 1}


@dataclass(frozen=True)
class _Shape:
    """Which arguments are gates: a keyword of any call, or a call's argument by position or keyword."""

    keyword: str | None = None
    call: str | None = None
    position: int | None = None

    def matches(self, callee: str | None, keyword: str | None, index: int | None) -> bool:
        """`index`: the argument's position among the positional ones (None for a keyword or after a *spread)."""
        if self.call is not None and callee != self.call:
            return False
        if self.position is not None:
            return keyword is None and index == self.position
        if self.keyword is not None:
            return keyword == self.keyword
        return True

    def literal_only(self) -> bool:
        """Without a position or keyword, only list literals are gates; a selected argument is a gate whatever it is."""
        return self.call is None or (self.position is None and self.keyword is None)


def _shapes(keyword: str | None, call: str | None, position: int | None) -> tuple[_Shape, ...]:
    if call is None and position is None:
        return (_Shape(keyword=keyword or MAJORS_KEYWORD),)
    return (_Shape(keyword=keyword, call=call, position=position),)


KNOWN_SHAPES = (_Shape(keyword=MAJORS_KEYWORD),) + tuple(
    _Shape(call=name, position=position) for name, position in KNOWN_CALLS.items()
)


SELECTOR_HINTS = {"position": "position = 1   # the second positional argument"}


def check_selector(name: str, value) -> str:
    """`position` is a non-negative integer; the other selectors are strings."""
    if name == "position":
        return "" if type(value) is int and value >= 0 else "'position' must be a non-negative integer (0 is the first argument)"
    return "" if isinstance(value, str) and value else f"{name!r} must be a string"


# ---------------------------------------------------------------- finding


def find(
    source: bytes,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    *,
    function: str | None = None,
    keyword: str | None = None,
    call: str | None = None,
    position: int | None = None,
) -> list[Gate]:
    """Every list the selectors pick, in source order.

    Without `call` and `position`: lists given to `keyword` (default
    `supported_major_versions`) in any call. With `call`: that call's argument
    at `position`, or its `keyword` argument, or else every list it is given.
    With `function`, only those whose innermost enclosing function or method
    (or the function a decorator decorates) has that name.
    """
    shapes = _shapes(keyword, call, position)
    return _find(parse(source, mentioning(tuple(s.call or s.keyword or MAJORS_KEYWORD for s in shapes))), universe, shapes, function)


def find_known(source: bytes, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> list[Gate]:
    """Every gate of the shapes `scan` lists: `supported_major_versions` lists and the KNOWN_CALLS arguments."""
    return _find(parse(source, mentioning(tuple(s.call or s.keyword or MAJORS_KEYWORD for s in KNOWN_SHAPES))), universe, KNOWN_SHAPES, None)


def _callee(node: cst.CSTNode | None) -> str | None:
    if not isinstance(node, cst.Call):
        return None
    func = node.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return ""


def _find(parsed: PythonSource, universe, shapes: tuple[_Shape, ...], function: str | None) -> list[Gate]:
    gates = []
    for arg in parsed.nodes(cst.Arg):
        parent = parsed.parent(arg)
        callee = _callee(parent)
        keyword = arg.keyword.value if arg.keyword is not None else None
        index = _position_of(parent, arg) if keyword is None else None
        for shape in shapes:
            if not shape.matches(callee, keyword, index):
                continue
            if shape.literal_only() and not isinstance(arg.value, (cst.List, cst.Tuple)):
                continue
            if keyword is None and shape.call is None:
                continue
            context = parsed.enclosing_function(arg)
            if function is None or context == function:
                gates.append(_gate(parsed, arg.value, shape, callee, keyword, index, context, universe))
            break
    return gates


def _position_of(parent: cst.CSTNode | None, arg: cst.Arg) -> int | None:
    """The 0-based index of a positional argument; None after a `*spread` (its place is not known) or for one."""
    if not isinstance(parent, cst.Call):
        return None
    index = 0
    for other in parent.args:
        if other.star:
            return None
        if other is arg:
            return index
        if other.keyword is None:
            index += 1
    return None


def _detail(shape: _Shape, callee, keyword, index, listed: Listed) -> dict:
    detail = {"keyword": keyword, "majors": majors_detail(listed)}
    if shape.call is not None:
        detail.update(call=callee, position=index)
    detail["style"] = listed.style.kind if listed.style is not None else None
    return detail


def _gate(parsed: PythonSource, node: cst.BaseExpression, shape: _Shape, callee, keyword, index, context: str, universe) -> Gate:
    start, end = parsed.outer_span(node)
    entries = cst_entries(node)
    listed = read_entries(entries, keyword == MAJORS_KEYWORD) if entries is not None else Listed(None, None)
    return Gate(
        kind=KIND,
        start=start,
        end=end,
        line=parsed.line(start),
        text=parsed.text(start, end),
        admits=admits_of(listed, universe),
        context=context,
        detail=_detail(shape, callee, keyword, index, listed),
    )


def find_in_tree(
    source: bytes,
    tree: ast.Module,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    *,
    keyword: str = MAJORS_KEYWORD,
    known: bool = False,
) -> list[Gate] | None:
    """`find(source, keyword=keyword)` (or `find_known` with `known`) from a stdlib `ast` parse of the same bytes.

    Several times faster than libcst. ast columns are UTF-8 byte offsets in
    their line, so with the line starts (after a BOM on line 1) they give
    libcst's byte spans; the text keeps the parentheses written around a list
    (`=([9, 10])`), as libcst's outer span does. None when it cannot vouch to
    agree with `find` (a line ended by a lone CR, a list inside an f-string,
    anything but parentheses between `=` and the list): the caller then calls `find`.
    """
    shapes = KNOWN_SHAPES if known else (_Shape(keyword=keyword),)
    needles = []
    for shape in shapes:
        needle = shape.call or shape.keyword
        assert needle is not None  # KNOWN_SHAPES and `_Shape(keyword=keyword)` each name a call or a keyword
        needles.append(needle.encode())
    if not any(needle in source for needle in needles):
        return []
    if b"\r" in source and LONE_CR.search(source):
        return None
    bom = 3 if source.startswith(b"\xef\xbb\xbf") else 0
    starts = [bom] + [match.end() for match in re.finditer(b"\n", source)]

    def offset(line: int | None, column: int | None) -> int:
        # typeshed allows None for end positions, which ast.parse sets on every node it makes
        assert line is not None and column is not None
        return starts[line - 1] + column

    # (value, where to read on from toward it, its keyword or None, callee, position, the shape, function, in an f-string)
    found: list[tuple] = []

    def consider(value, at, keyword_name, callee, index, function, in_fstring) -> None:
        for shape in shapes:
            if not shape.matches(callee, keyword_name, index):
                continue
            if shape.literal_only() and not isinstance(value, (ast.List, ast.Tuple)):
                continue
            if keyword_name is None and shape.call is None:
                continue
            found.append((value, at, keyword_name, callee, index, shape, function, in_fstring))
            return

    def visit(node: ast.AST, function: str, in_fstring: bool) -> None:
        if isinstance(node, ast.Call):
            func = node.func
            callee = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            index: int | None = 0
            after_func = skip_trivia(source, offset(func.end_lineno, func.end_col_offset))
            at: int | None = after_func + 1 if source[after_func : after_func + 1] == b"(" else None
            for arg in node.args:
                if isinstance(arg, ast.Starred):
                    index = None
                    continue
                if index is not None and index > 0:
                    at = _after_comma(source, at)
                consider(arg, at, None, callee, index, function, in_fstring)
                if index is not None:
                    index += 1
                    at = offset(arg.end_lineno, arg.end_col_offset)
            for kw in node.keywords:
                if kw.arg is not None:
                    consider(kw.value, _after_equals(source, offset(kw.lineno, kw.col_offset), kw.arg), kw.arg, callee, None, function, in_fstring)
        elif isinstance(node, ast.ClassDef):
            for kw in node.keywords:
                if kw.arg is not None:
                    consider(kw.value, _after_equals(source, offset(kw.lineno, kw.col_offset), kw.arg), kw.arg, None, None, function, in_fstring)
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            visit(child, inner, in_fstring or isinstance(child, ast.JoinedStr))

    visit(tree, "", False)
    gates = []
    for value, at, keyword_name, callee, index, shape, function, in_fstring in found:
        if in_fstring or at is None:
            return None  # before Python 3.12, positions inside f-strings are computed after the fact
        start, end = offset(value.lineno, value.col_offset), offset(value.end_lineno, value.end_col_offset)
        outer, opened = start, 0
        while (at := skip_trivia(source, at)) < start:
            if source[at : at + 1] != b"(":
                return None
            outer = min(outer, at)
            opened += 1
            at += 1
        if at != start:
            return None
        for _ in range(opened):
            end = skip_trivia(source, end)
            if source[end : end + 1] != b")":
                return None
            end += 1
        entries = ast_entries(source, value, offset)
        listed = read_entries(entries, keyword_name == MAJORS_KEYWORD) if entries is not None else Listed(None, None)
        gates.append(
            Gate(
                kind=KIND,
                start=outer,
                end=end,
                line=bisect.bisect_right(starts, outer),
                text=source[outer:end].decode("utf-8"),
                admits=admits_of(listed, universe),
                context=function,
                detail=_detail(shape, callee, keyword_name, index, listed),
            )
        )
    gates.sort(key=lambda gate: gate.start)
    return gates


def _after_equals(source: bytes, at: int, keyword: str) -> int | None:
    """Just past the `=` of `keyword=` written at `at`; None when something else stands there."""
    at = skip_trivia(source, at + len(keyword))
    return at + 1 if source[at : at + 1] == b"=" else None


def _after_comma(source: bytes, at: int | None) -> int | None:
    """Just past the `,` after the previous argument (which ends at `at`, maybe inside parentheses)."""
    if at is None:
        return None
    while True:
        at = skip_trivia(source, at)
        if source[at : at + 1] == b")":
            at += 1
            continue
        return at + 1 if source[at : at + 1] == b"," else None


def widen(
    source: bytes,
    gate: Gate,
    targets: tuple[Arch, ...],
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
) -> list[Edit]:
    """Edits that add the values of `targets` the list lacks, in its style; `[]` if it has them all."""
    parsed = parse(source, mentioning((gate.detail.get("call") or gate.detail.get("keyword") or MAJORS_KEYWORD,)))
    node = _locate(parsed, gate)
    where = f"line {gate.line}: {gate.text}"
    if not isinstance(node, (cst.List, cst.Tuple)):
        raise CannotWiden(f"{where} is not a list literal (a name or a computed value); widen it by hand")
    entries = cst_entries(node)
    listed = read_entries(entries, gate.detail.get("keyword") == MAJORS_KEYWORD)
    if listed.values is None:
        raise CannotWiden(f"{where} is not a list of integer literals or arch strings in one style; widen it by hand")
    style = listed.style
    if style is None:
        why = "is empty, so it shows no style to follow" if not entries else "mixes suffixes, so a new entry's is not known"
        raise CannotWiden(f"{where} {why}; widen it by hand")
    wanted: list[Value]
    if style.kind == "majors" or style.majors_only:
        wanted = sorted({(arch.major, None) for arch in targets})
    else:
        wanted = sorted({(arch.major, arch.minor) for arch in targets})
    missing = [value for value in wanted if not any(_covers(listed_value, value) for listed_value in listed.values)]
    if not missing:
        return []
    keys = [_key(value) for value in listed.values]
    elements = list(node.elements)
    if not elements:
        return [_fill_empty(parsed, node, [style.spell(*value) for value in missing])]
    insert = _insert_lines if _one_per_line(parsed, node) else _insert_inline
    edits: list[Edit] = []
    positions: dict[int, list[str]] = {}
    for value in missing:
        positions.setdefault(_position(keys, _key(value)), []).append(style.spell(*value))
    for position in sorted(positions):
        edits.extend(insert(parsed, elements, position, positions[position]))
    return edits


def _covers(listed: Value, wanted: Value) -> bool:
    return listed[0] == wanted[0] and listed[1] in (None, wanted[1])


def _key(value: Value) -> tuple[int, int]:
    return (value[0], -1 if value[1] is None else value[1])


def _locate(parsed: PythonSource, gate: Gate) -> cst.BaseExpression:
    for arg in parsed.nodes(cst.Arg):
        if parsed.outer_span(arg.value) == (gate.start, gate.end):
            return arg.value
    raise CannotWiden(
        f"line {gate.line}: {gate.text} is no longer at this place; find the gates again"
    )


def _position(keys: list[tuple[int, int]], key: tuple[int, int]) -> int:
    """Index of the first listed value above `key` (ascending insert), or the end."""
    return next((i for i, listed in enumerate(keys) if listed > key), len(keys))


def _one_per_line(parsed: PythonSource, node: cst.List | cst.Tuple) -> bool:
    """True when every element starts on a line of its own."""
    return all(
        parsed.indent(parsed.outer_span(element.value)[0]) is not None for element in node.elements
    )


def _fill_empty(parsed: PythonSource, node: cst.List | cst.Tuple, added: list[str]) -> Edit:
    opening = node.lbracket if isinstance(node, cst.List) else node.lpar[0]
    at = parsed.span(opening)[0] + 1
    text = ", ".join(added)
    if isinstance(node, cst.Tuple) and len(added) == 1:
        text += ","
    return Edit(at, at, text.encode())


def _insert_inline(
    parsed: PythonSource, elements: list[cst.BaseElement], position: int, texts: list[str]
) -> list[Edit]:
    """`[9, 10]` -> `[9, 10, 12]`, reusing the separator the list already has."""
    separator = b", "
    if len(elements) > 1:
        between = parsed.source[
            parsed.outer_span(elements[0].value)[1] : parsed.outer_span(elements[1].value)[0]
        ]
        if b"\n" not in between and b"#" not in between:
            separator = between
    added = [text.encode() for text in texts]
    if position < len(elements):
        at = parsed.outer_span(elements[position].value)[0]
        return [Edit(at, at, b"".join(text + separator for text in added))]
    at = parsed.outer_span(elements[-1].value)[1]
    return [Edit(at, at, b"".join(separator + text for text in added))]


def _insert_lines(
    parsed: PythonSource, elements: list[cst.BaseElement], position: int, texts: list[str]
) -> list[Edit]:
    """A list written one element per line gets one new line per entry."""
    reference = elements[min(position, len(elements) - 1)]
    value_start, value_end = parsed.outer_span(reference.value)
    indent = parsed.indent(value_start)
    assert indent is not None  # _one_per_line chose this insert: every element starts a line of its own
    eol = parsed.eol(value_end)
    added = [text.encode() for text in texts]
    if position < len(elements):
        at = parsed.line_start(value_start)
        return [Edit(at, at, b"".join(indent + text + b"," + eol for text in added))]
    # Appending: keep the file's choice of a trailing comma after the last element.
    comma = reference.comma if isinstance(reference.comma, cst.Comma) else None
    has_comma = comma is not None
    after = parsed.span(comma)[1] if comma is not None else value_end
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
    """The archs a list, given as text (`[9, 10, 12]`, `["100", "103"]`), admits; read as `find` reads it."""

    def values(node: cst.BaseExpression):
        entries = cst_entries(node)
        listed = read_entries(entries, True) if entries is not None else Listed(None, None)
        return listed.values

    try:
        listed_values = values(cst.parse_expression(text))
    except cst.ParserSyntaxError:
        listed_values = None
    return admits_of(Listed(listed_values, None), universe)
