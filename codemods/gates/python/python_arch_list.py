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
With `call` alone every list given to the call is a gate. `function` keeps
those in (or decorating) one function, `assigns` those in the value assigned
to one target, of several calls alike:

    is_sm_supported = _match_sm_version(A.device, ["100", "103", "110"])
    is_sm120_supported = _match_sm_version(A.device, ["120", "121"])

With `assigns` and neither `call`, `position` nor `keyword`, the literal
assigned to that target is a gate too, module-level or a class attribute
(`function` then names the class):

    class _SubBlockSparseAttentionBackendResolver(_CudaAttentionBackendResolver):
        supported_capabilities = {(9, 0), (10, 0)}

A selected argument that is a name (`@supported_compute_capability(_CCS)`,
`supported_major_versions=_MAJORS`, or a copy of one, `list(_MAJORS)`)
stands for the list literal the file assigns it once at module level
(`_CCS = [100, 103]`): that literal is the gate, and widening it widens every
use of the name; `supported_major_versions=None` restricts nothing and is no
gate. A name bound more than once, elsewhere than at module
level, to a computed value, or changed in place is refused with the reason
(`python.lists.reading.Names`). `scan` also knows the capability-list calls in
`KNOWN_CALLS`, and pairs assigned to a name that says capability
(`KNOWN_LITERAL`).

One reader finds them all and `widen` edits through it: the stdlib `ast`
(`find` and `find_known` take the caller's parse, as `scan` has one), with
libcst only to split a module Python's own parser rejects into statements
(`_parse`). A list's span holds the parentheses written around it
(`=([9, 10])`).

The list's values decide its style and what it admits:

- majors, integers below 20 (`[9, 10]`): every arch of each major;
- full capabilities, integers from 20 (`[90, 120]`, major * 10 + minor):
  those archs, whichever variant;
- strings (`["100", "103"]`, `["sm_100a"]`, `["12.0a"]`): capabilities (or
  majors, `["9", "10"]`) spelled with one prefix, one form (`120` or `12.0`)
  and a suffix;
- `(major, minor)` pairs, in a list, tuple or set (`{(9, 0), (10, 0)}`): those
  archs, whichever variant.

A list that is not all literals of one style (a name, a comprehension, a
`*spread`, `[9, 100]`, concatenated strings) admits unknown and is never
rewritten; a selected argument that is not a list at all (`CCS + [120]`, a
name that cannot be followed) is such a gate too, so a recipe that selects
it is refused with the reason.

`widen` inserts what the list lacks where it sorts, in the list's own style:
`[9, 10]` gains the major `12`; `[120]` gains `121`; `["100", "103"]` gains
`"120", "121"` with the same quotes; `["9.0a", "10.0a"]` gains `"12.0a"`; `{(9, 0), (10, 0)}` gains `(12, 0)`. A
list written one element per line gets a new line with the same indentation
and line ending. The brackets, the separators, a trailing comma and any
comment in or around the list stay byte for byte. An empty list has no style
to follow (unless it is `supported_major_versions`), nor has a string list
whose entries carry different suffixes: both are refused.
"""

from __future__ import annotations

import ast
import bisect
from collections.abc import Callable
from dataclasses import dataclass

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.gates import CannotWiden, Edit, Gate, SourceError, TooDeep, decode, line_of
from codemods.gates.python.lists import walk
from codemods.gates.python.lists.insertion import _assigned_on_one_line, _covers, _element_span, _fill_empty, _insert_inline, _insert_lines, _key, _one_per_line, _position
from codemods.gates.python.lists.reading import (
    Lines,
    Listed,
    Names,
    Value,
    admits_of,
    ast_entries,
    majors_detail,
    outer_span,
    past,
    read_entries,
)
from codemods.gates.python.cst_source import parse
from codemods.gates.python.ast_text import MAX_DEPTH, ast_of, called, dotted, nested_too_deeply, too_deep
from codemods.gates.python import tree_index
from codemods.gates.python.layout.text import skip_trivia
from codemods.gates.python.layout.wrap import wrapped

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
        """Only list literals are gates for a shape that names no keyword and not both a call and a position (every
        list a call is given; every call's argument at a position); an argument selected by keyword
        (`supported_major_versions=_MAJORS` in any call) or by call and position is a gate whatever it is: a name
        stands for its literal, a computed value admits unknown and is refused with the reason."""
        return self.keyword is None and (self.call is None or self.position is None)


def _shapes(keyword: str | None, call: str | None, position: int | None) -> tuple[_Shape, ...]:
    if call is None and position is None:
        return (_Shape(keyword=keyword or MAJORS_KEYWORD),)
    return (_Shape(keyword=keyword, call=call, position=position),)


KNOWN_SHAPES = (_Shape(keyword=MAJORS_KEYWORD),) + tuple(
    _Shape(call=name, position=position) for name, position in KNOWN_CALLS.items()
)


def check_selector(name: str, value) -> str:
    """`position` is a non-negative integer; the other selectors are strings."""
    if name == "position":
        return "" if type(value) is int and value >= 0 else "'position' must be a non-negative integer (0 is the first argument)"
    return "" if isinstance(value, str) and value else f"{name!r} must be a string"


# ---------------------------------------------------------------- finding


def find(
    source: bytes,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    tree: ast.Module | None = None,
    *,
    function: str | None = None,
    keyword: str | None = None,
    call: str | None = None,
    position: int | None = None,
    assigns: str | None = None,
) -> list[Gate]:
    """Every list the selectors pick, in source order.

    Without `call` and `position`: lists given to `keyword` (default
    `supported_major_versions`) in any call. With `call`: that call's argument
    at `position`, or its `keyword` argument, or else every list it is given;
    a selected argument that is a name stands for the list literal that name
    is assigned once at module level (see `Names`). With `function`, only
    those whose innermost enclosing function or method (or the function a
    decorator decorates) has that name; with `assigns`, only those in a call
    inside the value assigned to that target (`is_sm_supported`, `self.ok`,
    `(ok := ...)`).
    With none of `keyword`, `call`, `position` and `assigns`, the shapes `scan`
    lists (`find_known`): a recipe naming only a file and a function selects
    what scan reports there (issue 38: scan and run agree).
    `tree`: the stdlib `ast` parse of `source`, when the caller has it.
    """
    if keyword is None and call is None and position is None and assigns is None:
        return _find(source, tree, universe, KNOWN_SHAPES, function, None, KNOWN_LITERAL)
    literal = _Literal(lambda target: target == assigns) if assigns is not None and call is None and keyword is None and position is None else None
    return _find(source, tree, universe, _shapes(keyword, call, position), function, assigns, literal)


def find_known(
    source: bytes, universe: tuple[Arch, ...] = DEFAULT_ARCHS, tree: ast.Module | None = None
) -> list[Gate]:
    """Every gate of the shapes `scan` lists: `supported_major_versions` lists, the KNOWN_CALLS arguments, and
    `(major, minor)` pairs assigned to a name that says capability (`supported_capabilities = {(9, 0), (10, 0)}`)."""
    return _find(source, tree, universe, KNOWN_SHAPES, None, None, KNOWN_LITERAL)


@dataclass(frozen=True)
class _Literal:
    """Which assignments' own list, tuple or set literal is a gate: by the target's name, maybe only `(major, minor)` pairs."""

    target: Callable[[str], bool]
    pairs_only: bool = False
    needles: tuple[bytes, ...] = ()  # what the source must hold for one to be there (besides the target's name)


# What `scan` lists of assigned literals: `(major, minor)` pairs assigned to a name that says capability.
KNOWN_LITERAL = _Literal(
    lambda target: "capabilit" in target.rpartition(".")[2].lower(), True, (b"apabilit", b"APABILIT")
)


def _parse(source: bytes, needles: list[bytes]) -> tuple[ast.Module, list[tuple[int, bytes]]]:
    """The module's tree, and the top-level statements left out of it (their line and bytes).

    libcst reads some syntax Python's own parser rejects (a newer Python's,
    or libcst's leniency); then each top-level statement is read alone, and
    one the parser rejects is left out when it holds no needle (a call or
    keyword asked for), else the file is refused with the parser's reason.
    """
    decode(source)
    try:
        # ast_text's shared tree of the source, read as UTF-8: a coding cookie must not change what the bytes say
        return ast_of(source), []
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        if too_deep(exc):
            raise nested_too_deeply(getattr(exc, "lineno", None)) from None
        rejected = f"not valid Python: line {getattr(exc, 'lineno', None)}: {getattr(exc, 'msg', exc)}"
    try:
        parsed = parse(source)
    except TooDeep:
        raise
    except SourceError:
        raise SourceError(rejected) from None
    starts = Lines(source).starts
    body: list[ast.stmt] = []
    left_out: list[tuple[int, bytes]] = []
    for statement in parsed.module.body:
        decorators = getattr(statement, "decorators", ())
        start, end = parsed.span(decorators[0] if decorators else statement)[0], parsed.span(statement)[1]
        piece, line = source[start:end], bisect.bisect_right(starts, start)
        try:
            tree = ast.parse(piece.decode("utf-8"))
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            if too_deep(exc):
                raise nested_too_deeply(line) from None
            if any(needle in piece for needle in needles):
                raise SourceError(f"not valid Python: line {line - 1 + (getattr(exc, 'lineno', None) or 1)}: {getattr(exc, 'msg', exc)}") from None
            left_out.append((line, piece))
            continue
        body += ast.increment_lineno(tree, line - 1).body
    return ast.Module(body=body, type_ignores=[]), left_out


@dataclass(frozen=True)
class _Argument:
    """A call's argument that a shape selects."""

    value: ast.expr
    at: int | None  # just past the `(`, `,` or `=` before it (parentheses may follow); None if not found
    keyword: str | None
    callee: str | None
    index: int | None
    shape: _Shape
    function: str
    in_fstring: bool
    assigned: str | None = None  # an assigned literal: the target it is selected by


def _find(
    source: bytes,
    tree: ast.Module | None,
    universe: tuple[Arch, ...],
    shapes: tuple[_Shape, ...],
    function: str | None,
    assigns: str | None,
    literal: _Literal | None = None,
) -> list[Gate]:
    needles = [(shape.call or shape.keyword or "").encode() for shape in shapes]
    if literal is not None:
        needles += list(literal.needles) or [(assigns or "").rpartition(".")[2].encode()]
    left_out: list[tuple[int, bytes]] = []
    if tree is None:
        tree, left_out = _parse(source, needles)
    elif not any(needle in source for needle in needles):
        return []  # the caller parsed it, so there is nothing left to check
    lines = Lines(source)
    found: list[_Argument] = []

    def consider(value: ast.expr, at: int | None, keyword: str | None, callee: str | None, index: int | None, where) -> None:
        for shape in shapes:
            if not shape.matches(callee, keyword, index):
                continue
            if shape.literal_only() and not isinstance(value, (ast.List, ast.Tuple)):
                continue
            if isinstance(value, ast.Constant) and value.value is None:
                continue  # `supported_major_versions=None`: no list, no arch restricted
            if keyword is None and shape.call is None:
                continue
            found.append(_Argument(value, at, keyword, callee, index, shape, *where))
            return

    def keywords(node: ast.Call | ast.ClassDef, callee: str | None, where) -> None:
        for kw in node.keywords:
            if kw.arg is not None and walk.by_keyword(shapes, callee, kw.arg):
                at = _after_equals(source, lines.offset(kw.lineno, kw.col_offset), kw.arg)
                consider(kw.value, at, kw.arg, callee, None, where)

    def assigned_literal(node: ast.Assign | ast.AnnAssign, where: tuple[str, bool]) -> None:
        assert literal is not None
        value = node.value
        if not isinstance(value, (ast.List, ast.Tuple, ast.Set)):
            return
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [name for name in map(dotted, targets) if name and literal.target(name)]
        if not names:
            return
        if literal.pairs_only:
            listed = read_entries(ast_entries(source, value, lines.offset) or [], False)
            if listed.style is None or listed.style.kind != "pairs":
                return
        before = targets[-1] if isinstance(node, ast.Assign) else node.annotation
        at = past(source, lines.offset(before.end_lineno, before.end_col_offset), b"=")
        found.append(_Argument(value, at, None, None, None, _Shape(), *where, assigned=names[0]))

    def examine(node: ast.AST, where: tuple[str, bool], assigned: frozenset[str]) -> None:
        """What one node gives: `where` is (the innermost def or class around or at it, whether in an f-string);
        `assigned`, the targets of the values it is part of."""
        selected = (function is None or where[0] == function) and (assigns is None or assigns in assigned)
        if selected and isinstance(node, ast.Call):
            func = node.func
            callee = called(node)
            index: int | None = 0
            # else no positional argument can be a gate (`consider` would take none)
            positional = walk.by_position(shapes, callee)
            after_func = skip_trivia(source, lines.offset(func.end_lineno, func.end_col_offset)) if positional else 0
            at: int | None = after_func + 1 if source[after_func : after_func + 1] == b"(" else None
            for arg in node.args if positional else ():
                if isinstance(arg, ast.Starred):
                    index = None  # the place of what follows a spread is not known
                    continue
                if index is not None and index > 0:
                    at = past(source, at, b",")
                consider(arg, at, None, callee, index, where)
                if index is not None:
                    index += 1
                    at = lines.offset(arg.end_lineno, arg.end_col_offset)
            keywords(node, callee, where)
        elif selected and isinstance(node, ast.ClassDef):
            keywords(node, None, where)
        elif literal is not None and isinstance(node, (ast.Assign, ast.AnnAssign)) and (function is None or where[0] == function):
            assigned_literal(node, where)

    walked = tree_index.index(tree)  # the tree's one shared walk
    deep = walked.deeper_than(MAX_DEPTH)  # what libcst cannot read, anywhere in the file
    if function is None:
        if deep is not None:
            _visit(tree, 0, ("", False), frozenset(), examine)  # refused at the first node too deep, as the walk meets it
        else:  # only the nodes `examine` can take something from, in the walk's order
            for node in walked.depth_first(walk.candidates(walked, shapes, literal is not None)):
                examine(node, walk.where(walked, node), walk.assigned(walked, node) if assigns is not None else frozenset())
    else:  # only the definitions of that name hold what it selects
        if deep is not None:
            raise nested_too_deeply(getattr(deep, "lineno", None))
        for node in walked.of_type(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            if node.name == function:
                _visit(node, _depth(walked, node), (function, False), frozenset(), examine)
    names = Names(tree, lines, left_out)
    gates: dict[int, Gate] = {}
    for argument in found:
        gate = _gate(lines, argument, names, universe)
        gates.setdefault(gate.start, gate)  # two calls naming one list: one gate
    return sorted(gates.values(), key=lambda gate: gate.start)


def _visit(node: ast.AST, depth: int, where: tuple[str, bool], assigned: frozenset[str], examine: Callable) -> None:
    """`_find`'s whole walk: `examine` at every node, with the function it is in and the names its value is assigned to."""
    if depth > MAX_DEPTH:  # what libcst cannot read, `widen` could not edit: refused here already
        raise nested_too_deeply(getattr(node, "lineno", None))
    examine(node, where, assigned)
    # as check_depth measures: `a or b or c` is one ast node, a nested pair per `or` in libcst
    step = len(node.values) if isinstance(node, ast.BoolOp) else 1
    for child in ast.iter_child_nodes(node):
        inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else where[0]
        targets = assigned
        if isinstance(node, ast.Assign) and child is node.value:
            targets = assigned | {dotted(target) for target in node.targets}
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and child is node.value:
            targets = assigned | {dotted(node.target)}
        _visit(child, depth + step, (inner, where[1] or isinstance(child, ast.JoinedStr)), targets, examine)


def _depth(walked: tree_index.TreeIndex, node: ast.AST) -> int:
    """How deep `_find`'s walk from the module reaches `node` (an `a or b or c` counts a level per operand)."""
    depth = 0
    while (parent := walked.parents.get(id(node))) is not None:
        depth += len(parent.values) if isinstance(parent, ast.BoolOp) else 1
        node = parent
    return depth


def _gate(lines: Lines, argument: _Argument, names: Names, universe: tuple[Arch, ...]) -> Gate:
    source, value = lines.source, argument.value
    detail: dict = {"keyword": argument.keyword}
    named = _named(value)
    if named is not None:  # only a selected argument (no list literal needed) can be one
        followed = names.follow(named.id)
        detail["name"] = named.id
        if isinstance(followed, str):
            detail["unread"] = followed
            start, end = lines.span(value)
        else:
            value, (start, end) = followed
            detail["named_at"] = line_of(source, lines.offset(argument.value.lineno, argument.value.col_offset))
    else:
        start, end = outer_span(source, argument.at, *lines.span(value))
        if argument.in_fstring:
            _check_placed(source, value, start, end)
    entries = ast_entries(source, value, lines.offset)
    listed = read_entries(entries, argument.keyword == MAJORS_KEYWORD) if entries is not None else Listed(None, None)
    detail["majors"] = majors_detail(listed)
    if argument.shape.call is not None:
        detail.update(call=argument.callee, position=argument.index)
    if argument.assigned is not None:
        detail["assigns"] = argument.assigned
    detail["style"] = listed.style.kind if listed.style is not None else None
    return Gate(
        kind=KIND,
        start=start,
        end=end,
        line=line_of(source, start),
        text=source[start:end].decode("utf-8"),
        admits=admits_of(listed, universe),
        context=argument.function,
        detail=detail,
    )


def _named(value: ast.expr) -> ast.Name | None:
    """The name a selected argument stands for: `_CCS`, or `list(_CCS)` / `tuple(_CCS)` (a copy of the same
    values: FlashInfer 0.7.4's `supported_major_versions=list(SUPPORTED_MAJOR_VERSIONS)`)."""
    if isinstance(value, ast.Name):
        return value
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in ("list", "tuple")
        and len(value.args) == 1
        and not value.keywords
        and isinstance(value.args[0], ast.Name)
    ):
        return value.args[0]
    return None


def _check_placed(source: bytes, value: ast.expr, start: int, end: int) -> None:
    """Before Python 3.12, positions inside f-strings are computed after the fact: the text there must be the list."""
    try:
        placed = ast.dump(ast.parse(source[start:end].decode("utf-8"), mode="eval").body) == ast.dump(value)
    except (SyntaxError, ValueError, UnicodeDecodeError):
        placed = False
    if not placed:
        raise SourceError(f"line {value.lineno}: an arch list inside an f-string that Python does not place exactly; edit it by hand")


def _after_equals(source: bytes, at: int, keyword: str) -> int | None:
    """Just past the `=` of `keyword=` written at `at`; None when something else stands there."""
    at = skip_trivia(source, at + len(keyword))
    return at + 1 if source[at : at + 1] == b"=" else None


def widen(
    source: bytes,
    gate: Gate,
    targets: tuple[Arch, ...],
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
) -> list[Edit]:
    """Edits that add the values of `targets` the list lacks, in its style; `[]` if it has them all."""
    where = f"line {gate.line}: {gate.text}"
    if "unread" in gate.detail:
        raise CannotWiden(f"{where} is not a list literal, and {gate.detail['unread']}; widen it by hand")
    tree, _ = _parse(source, [])
    lines = Lines(source)
    node, statement = _locate(tree, lines, gate)
    if not isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        raise CannotWiden(f"{where} is not a list literal (a name or a computed value); widen it by hand")
    entries = ast_entries(source, node, lines.offset) or []
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
    inside = lines.span(node)
    elements = [_element_span(source, inside, lines.span(element)) for element in node.elts]
    if not elements:
        return [_fill_empty(source, node, inside, [style.spell(*value) for value in missing])]
    insert = _insert_lines if _one_per_line(source, elements) else _insert_inline
    edits: list[Edit] = []
    positions: dict[int, list[str]] = {}
    for value in missing:
        positions.setdefault(_position(keys, _key(value)), []).append(style.spell(*value))
    for position in sorted(positions):
        edits.extend(insert(source, inside, elements, position, positions[position]))
    if insert is _insert_inline and _assigned_on_one_line(source, lines, statement):
        edits = wrapped(source, edits)  # a line grown too long is split as black splits it
    return edits


def _locate(tree: ast.Module, lines: Lines, gate: Gate) -> tuple[ast.expr, ast.stmt | None]:
    """The list `find` gave (an argument, or the literal a name stands for), or the argument it refused, with the
    innermost statement holding it. `find`'s span may hold parentheses written around the node (`=([9, 10])`)."""
    source = lines.source

    def only(between: bytes, bracket: bytes) -> bool:
        """Whether `between` holds nothing but `bracket`s, whitespace and comments."""
        at = 0
        while (at := skip_trivia(between, at)) < len(between):
            if between[at : at + 1] != bracket:
                return False
            at += 1
        return True

    def spans(node: ast.expr) -> bool:
        start, end = lines.span(node)
        return gate.start <= start and end <= gate.end and only(source[gate.start : start], b"(") and only(
            source[end : gate.end], b")"
        )

    found: list[tuple[ast.expr, ast.stmt | None]] = []  # the outermost node spanning the gate, or a list in it
    # the gate's lines as ast numbers them (lines.starts: every line end ast knows, `\r` alone too)
    first, last = bisect.bisect_right(lines.starts, gate.start), bisect.bisect_right(lines.starts, max(gate.start, gate.end - 1))

    _spanning(tree, None, first, last, spans, found)
    if not found:
        raise CannotWiden(f"line {gate.line}: {gate.text} is no longer at this place; find the gates again")
    return found[0]


def _spanning(
    node: ast.AST, statement: ast.stmt | None, first: int, last: int, spans: Callable[[ast.expr], bool],
    found: list[tuple[ast.expr, ast.stmt | None]],
) -> None:
    """`_locate`'s walk of the nodes on lines `first`..`last`: into `found`, the first node that `spans`, replaced by a
    list, tuple or set that does, where the walk stops."""
    for child in ast.iter_child_nodes(node):
        if found and isinstance(found[0][0], (ast.List, ast.Tuple, ast.Set)):
            return
        end = getattr(child, "end_lineno", None)
        if end is not None:  # a node on no line of the gate holds nothing that spans it (its decorators start it)
            start = min([child.lineno] + [d.lineno for d in getattr(child, "decorator_list", ())])  # type: ignore[attr-defined]
            if end < first or start > last:
                continue
        inner = child if isinstance(child, ast.stmt) else statement
        if isinstance(child, ast.expr) and hasattr(child, "end_lineno") and spans(child):
            if isinstance(child, (ast.List, ast.Tuple, ast.Set)) or not found:
                found[:] = [(child, statement)]
        _spanning(child, inner, first, last, spans, found)


def admits(text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> ArchSet:
    """The archs a list, given as text (`[9, 10, 12]`, `["100", "103"]`), admits; read as `find` reads it."""
    data = text.strip().encode("utf-8")
    try:
        node = ast.parse(data.decode("utf-8"), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return admits_of(Listed(None, None), universe)
    entries = ast_entries(data, node, Lines(data).offset)
    listed = read_entries(entries, True) if entries is not None else Listed(None, None)
    return admits_of(listed, universe)
