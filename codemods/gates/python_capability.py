"""Comparisons of the device's compute capability in Python: read by `scan` and widened by recipes.

    if torch.cuda.get_device_capability()[0] >= 9:        # a bound
    if get_device_sm() == 120:                            # sm = major * 10 + minor
    if torch.cuda.get_device_capability()[0] != 9:        # negated: a check for 9
    major, minor = torch.cuda.get_device_capability()
    elif major == 10 and minor != 3:                      # one condition: sm_100, not sm_103

What a comparison admits is decided per arch from its (major, minor): the
major (`[0]`, a name bound from it), the minor (`[1]`), the pair (`>= (9,
0)`) or SGLang's `get_device_sm()` (`major * 10 + minor`). Only comparisons
with integer literals (or tuples of them) are read; one with a computed
value (`== SM_VERSION`) is unknown. `scan` lists each comparison with where
it is true (`minor != 3` admits every minor but 3).

A recipe's gate is a whole condition: the comparisons joined by `and`,
`or` and `not` (in an `and`/`or` that also tests other things, its
comparisons together: `major == 12 and w.ok and minor == 0`). It admits
exactly the archs on which it holds, so `major == 10 and minor != 3` does
not admit sm_103; one unknown comparison makes it unknown (refused). A lone
negated comparison (`!=`, `not in`) is read as a check *for* its values
(`if cap != 9: raise`, `if cap != 9: fallback()`): it admits the archs its
values name, and widening adds the targets to those values.

`widen` tries, in order, and keeps the first rewrite that, read again,
admits exactly the old archs plus the targets (and what the condition
cannot tell from them: `major == 12` admits sm_121 with sm_120):
add the values to an equality or membership in its own style (`== 120`
becomes `in (120, 121)`, or `in [120, 121]` in a file that lists numbers in
brackets; `!= 9` alone becomes `not in (9, 12)`; `in (9, 10)` gains `, 12`);
drop the comparisons of an `and` that rule a target out (`major == 10 and
minor != 3` becomes `major == 10`); move a bound (`[0] >= 10` becomes `>= 9`
only where no arch lies between); keep a bound and add an equality (`major <
10` becomes `major < 10 or major == 12`, in parentheses inside an `and`).
Anything else is refused (`CannotWiden`, naming the line and the reason).

A capability is also read where real code holds it otherwise
(`_capability_values`): an arch named by a string (`if sm_version !=
"sm_120": raise` becomes `not in ("sm_120", "sm_121")`), a platform's
capability object (`capability.to_int() != 90`, `capability.major`), and
names a recipe declares with `names` (`{"backend" = "sm"}`: `backend in
("100", "110")` gains `"107"` in its place). New values are spelled like
those there and go in their place where those are in ascending order.
`scan` reads a comparison deciding an `if` that raises or skips by what
runs after it (`if sm_version != "sm_120": raise` admits sm_120 only).

Selectors pick the condition: `function` (the function around it),
`assigns` (it is in the value assigned to that dotted target, or the body of
the `if` it is in assigns that target),
`calls` (that body calls that function, or any of a list) and `names`. A change's
`admits` picks one branch of an `if`/`elif` by what it admits.
"""


from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass, replace
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.gates import CannotWiden, Edit, Gate, SourceError, _polarity, apply_edits
from codemods.gates._capability_values import NAME_RE, arch_comparisons, named, names_arch, spell, strings

KIND = "python_capability"

CALLS = ("get_device_capability", "get_device_sm")
TOKENS = tuple(name.encode() for name in CALLS)
_BOM = b"\xef\xbb\xbf"
_SIDES = {0: "major", 1: "minor", None: "pair", "sm": "sm", "cuda_arch": "cuda_arch"}
Side = int | str | None  # 0 the major, 1 the minor, None the (major, minor) pair, "sm", "cuda_arch"; "" for none of them
# What a recipe's `names` says a name holds (cpp_runtime_check.MEANINGS), as a side of the capability.
_DECLARED: dict[str, Side] = {"major": 0, "minor": 1, "sm": "sm", "cuda_arch": "cuda_arch"}
_EQUALITY = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)

COMPOUND: tuple[type[ast.stmt], ...] = (
    ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
    ast.AsyncFunctionDef, ast.ClassDef, ast.Match, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()),
)  # fmt: skip
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")
_COMPARE = {
    ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}  # fmt: skip
_CHECKED = {ast.NotEq: ast.Eq, ast.NotIn: ast.In}  # a recipe's view of a negated comparison: the values it checks for
_FLIPPED = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}


class PythonText:
    """Byte offsets of ast positions (ast columns are UTF-8 byte offsets)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.bom = len(_BOM) if data.startswith(_BOM) else 0
        self.starts = [0]
        for line in data.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, column: int) -> int:
        return self.starts[line - 1] + column + (self.bom if line == 1 else 0)

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)

    def span(self, node: ast.stmt | ast.expr) -> tuple[int, int]:
        # typeshed allows None for end positions, which ast.parse sets on every node it makes
        assert node.end_lineno is not None and node.end_col_offset is not None
        start = self.offset(node.lineno, node.col_offset)
        decorators = getattr(node, "decorator_list", None)
        if decorators:
            first = decorators[0]
            start = self.data.rfind(b"@", 0, self.offset(first.lineno, first.col_offset))
        return start, self.offset(node.end_lineno, node.end_col_offset)


def callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


# The byte tests `codemod scan` runs before it parses a file for this kind.
CAPABILITY_TOKEN = b"get_device_capability"
# A comparison with the call, or a name bound from it: nothing else can be a python_capability gate.
CAPABILITY_RE = re.compile(
    rb"get_device_capability\s*\((?:[^()]|\([^()]*\))*\)\s*(?:\[\s*[01]\s*\]\s*)?\)*\s*(?:[<>!=]=|[<>]|\bin\b|\bnot\b)"
    rb"|(?:[<>!=]=|[<>]|\bin)\s*[\w.]*get_device_capability|=\s*[\w.]*get_device_capability"
)
# SGLang's `get_device_sm()` (major * 10 + minor), compared or bound
SM_COMPARE_RE = re.compile(rb"\bget_device_sm\s*\(\s*\)\s*(?:[<>!=]=|[<>]|\bin\b|\bnot\b)|=\s*[\w.]*\bget_device_sm\s*\(")
_CAPABILITY_CALL_RE = re.compile(CAPABILITY_RE.pattern.split(b"|(?:")[0])
_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.")
_SPACE_BYTES = frozenset(b" \t\n\r\f\v")


def may_compare(data: bytes) -> bool:
    """True whenever `CAPABILITY_RE.search(data)` matches (rarely also when it does not).

    The regex's last two branches start with no literal, so re tries them at
    every byte; this looks at each `get_device_capability` and what precedes it.
    """
    pos = data.find(CAPABILITY_TOKEN)
    while pos >= 0:
        if _CAPABILITY_CALL_RE.match(data, pos):
            return True
        name = pos
        while name > 0 and data[name - 1] in _NAME_BYTES:
            name -= 1
        before = name
        while before > 0 and data[before - 1] in _SPACE_BYTES:
            before -= 1
        if data[before - 1 : before] in (b"<", b">", b"=") if before else False:
            return True
        if data[max(0, before - 2) : before] == b"in" or b"in" in data[name:pos]:
            return True
        pos = data.find(CAPABILITY_TOKEN, pos + 1)
    return False


def may_hold(data: bytes) -> bool:
    """Whether `data` may hold a comparison of this kind: nothing else is worth parsing."""
    return (
        (CAPABILITY_TOKEN in data and may_compare(data))
        or bool(b"get_device_sm" in data and SM_COMPARE_RE.search(data))
        or names_arch(data)
    )


def has_token(piece: bytes) -> bool:
    return any(token in piece for token in TOKENS)


def _holds(piece: bytes) -> bool:
    """Whether a statement's bytes may hold a comparison found without a declared name."""
    return has_token(piece) or names_arch(piece)


def _capability_call(node: ast.AST) -> str | None:
    """"pair" for `get_device_capability(...)`, "sm" for `get_device_sm(...)`, else None."""
    if not isinstance(node, ast.Call):
        return None
    name = callee(node)
    if name.endswith("get_device_capability"):
        return "pair"
    if name == "get_device_sm":
        return "sm"
    return None


def _literal(node: ast.AST, strings: bool = False):
    """An int, a tuple of ints, or a tuple/list/set of those; None for anything else.

    With `strings`, a string naming an arch (`"sm_120"`, `"120"`, `"12.0a"`) reads as its number
    (major * 10 + minor: 120); a collection mixing strings and ints is not read (Python's `"120" != 120`).
    """
    if isinstance(node, ast.Constant):
        if type(node.value) is int and not strings:
            return node.value
        if isinstance(node.value, str) and strings:
            try:
                return Arch.parse(node.value).code
            except ValueError:
                return None
        return None
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [_literal(item, strings) for item in node.elts]
        return None if any(item is None for item in items) else tuple(items)
    return None


def _spelled(node: ast.AST) -> str:
    """A compared expression as a recipe's `names` writes it: `x`, `self.backend`, `capability.to_int()`."""
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        inner = _dotted(node.func)
        return f"{inner}()" if inner else ""
    return _dotted(node)


def _have(arch: Arch, side) -> object:
    if side == "sm":
        return arch.major * 10 + arch.minor
    if side == "cuda_arch":
        return arch.cuda_arch
    return (arch.major, arch.minor) if side is None else (arch.major, arch.minor)[side]


def gates(text: PythonText, body: list[ast.stmt], universe: tuple[Arch, ...], computed: bool = False) -> list[Gate]:
    """Every capability comparison in `body`; with `computed`, also those with a value it cannot read (unknown).

    Only statements that name a capability call (or a name bound from one, or an arch string) are walked.
    Each gate admits what the code path it guards admits (`_on_paths`: polarity), not where its comparison
    is true (`if sm_version != "sm_120": raise` admits sm_120).
    """
    readable: dict[int, frozenset[Arch] | None] = {}
    found = [(gate, leaf.node, scope) for gate, leaf, scope in _found(text, body, universe, computed, readable)]
    if not found:
        return []
    names = _function_names(body)  # each gate's context: the function around it, as the other Python kinds give it
    return [replace(gate, context=names.get(scope, "")) for gate, _, scope in _on_paths(found, body, readable, universe)]


def _function_names(body: list) -> dict[int, str]:
    """id -> name of every function (or method) defined in `body`'s statements: nodes_in's scopes."""
    names: dict[int, str] = {}
    stack = list(body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[id(stmt)] = stmt.name
        for field in _BODIES:
            stack.extend(getattr(stmt, field, None) or [])
    return names


def _found(
    text: PythonText, body: list[ast.stmt], universe, computed: bool,
    readable: dict[int, frozenset[Arch] | None] | None = None, names: Mapping[str, Side] | None = None,
) -> list[tuple[Gate, _Leaf, int]]:
    """Each capability comparison of `body`, its gate (where it is true) and its scope; `readable` collects
    id -> where each comparison read is true (None: computed), unknown ones included. Read: the comparisons
    of the capability calls, of names bound from them, of arch strings and of the `names` a recipe declares
    (`{"_device_sm": "sm"}`, read as sides)."""
    declared = dict(names or {})
    bound: dict[tuple[int, str], Side] = {}  # (scope, name) -> 0 major, 1 minor, None the pair, "sm"
    compares: dict[int, tuple[ast.Compare, int]] = {}
    for node, scope in nodes_in(text, body, _holds, 0):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            bind(node.targets[0], node.value, scope, bound)
        elif isinstance(node, ast.Compare):
            compares[id(node)] = (node, scope)
    words = {name for _, name in bound} | {re.findall(r"\w+", spelled)[-1] for spelled in declared if re.search(r"\w", spelled)}
    if words:
        pattern = re.compile(rb"\b(?:%s)\b" % b"|".join(re.escape(word.encode()) for word in sorted(words)))
        for node, scope in nodes_in(text, body, lambda piece: bool(pattern.search(piece)), 0):
            if isinstance(node, ast.Compare):
                compares.setdefault(id(node), (node, scope))

    def bound_in(scope: int) -> Callable[[str], Side]:
        return lambda name: bound.get((scope, name), bound.get((0, name), declared.get(name, "")))

    found = []
    for node, scope in compares.values():
        leaf = _leaf(node, bound_in(scope))
        if leaf is None:
            continue
        side, op, flipped = leaf.side, leaf.op, leaf.flipped
        truth = {arch: _truth(node, arch, lambda _: leaf) for arch in universe}  # where the comparison is true
        admitted = None if None in truth.values() else frozenset(arch for arch, true in truth.items() if true)
        if readable is not None:
            readable[id(node)] = admitted
        detail = {"side": _SIDES[side], "op": op.__name__, "flipped": flipped}
        if admitted is None:
            if not computed:
                continue
            detail["unknown"] = _unreadable(leaf)
            admits = ArchSet(universe, frozenset(), frozenset(universe))
        else:
            admits = ArchSet(universe, admitted)
        start, end = text.span(node)
        gate = Gate(
            kind=KIND, start=start, end=end, line=node.lineno, text=text.data[start:end].decode("utf-8"),
            admits=admits, detail=detail,
        )  # fmt: skip
        found.append((gate, leaf, scope))
    found.sort(key=lambda item: (item[0].line, item[0].start))
    return found


def _unreadable(leaf: _Leaf) -> str:
    if leaf.strings and leaf.op not in _EQUALITY:
        return "a string compared by order (`<`, `>=`), not by value"
    if leaf.strings:
        return "the string compared is not an arch name (`\"sm_120\"`, `\"120\"`, `\"12.0a\"`) or holds no capability"
    return "the value compared is computed, not a literal" if leaf.value is None else "a major compared with a pair"


def _part(node: ast.AST, lookup: Callable[[str], Side]) -> Side:
    """0 or 1 for the major or minor, None for the (major, minor) pair, "sm", "cuda_arch", or "" for anything
    else; `lookup` says what a name holds (the same codes, "" for nothing known), a bound or declared one."""
    call = _capability_call(node)
    if call is not None:
        return None if call == "pair" else "sm"
    if isinstance(node, (ast.Attribute, ast.Call)) and _spelled(node) and lookup(_spelled(node)) != "":
        return lookup(_spelled(node))  # declared: `self.backend`, `cap.to_int()`
    if isinstance(node, ast.Attribute) and node.attr in ("major", "minor"):  # a capability object's fields
        return ("major", "minor").index(node.attr) if _part(node.value, lookup) is None else ""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to_int" and not node.args:
        return "sm" if _part(node.func.value, lookup) is None else ""  # SGLang's DeviceCapability.to_int()
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in (0, 1):
        index: Side = 0 if node.slice.value == 0 else 1
        return index if _capability_call(node.value) == "pair" or _part(node.value, lookup) is None else ""
    if isinstance(node, ast.Name):
        return lookup(node.id)
    return ""


@dataclass(frozen=True)
class _Leaf:
    """One comparison of the capability with a literal, read with the capability on the left."""

    node: ast.Compare
    side: Side
    op: type[ast.cmpop]
    value: object  # the literal; None when computed
    flipped: bool  # the value is on the left
    names: tuple[tuple[str, Side], ...] = ()  # the names it reads the capability through, and what each holds
    strings: bool = False  # its values are strings naming archs (read as major * 10 + minor)

    @property
    def operand(self) -> ast.expr:
        return self.node.comparators[0] if self.flipped else self.node.left

    @property
    def literal(self) -> ast.expr:
        return self.node.left if self.flipped else self.node.comparators[0]


def _leaf(node: ast.AST, lookup: Callable[[str], Side]) -> _Leaf | None:
    """`node` read as a capability comparison, or None when it is none."""
    if not isinstance(node, ast.Compare) or len(node.ops) != 1:
        return None
    left, op, right = node.left, type(node.ops[0]), node.comparators[0]

    def read(held: ast.AST, literal: ast.AST) -> tuple[Side, object, bool]:
        """(side, value, strings) of `held` compared with `literal`: side "" when `held` holds no capability."""
        side = _part(held, lookup)
        if strings(literal) is None:
            return side, _literal(literal), False
        if side == "" and named(literal) and isinstance(held, (ast.Name, ast.Attribute, ast.Call)):
            side = "sm"  # "sm_120" says what it is, whatever name holds it (`arch[:5]` is not the arch)
        return side, (_literal(literal, strings=True) if side == "sm" else None), True

    (side, value, is_text), flipped = read(left, right), False
    if (side == "" or value is None) and op in _FLIPPED and (_part(right, lookup) != "" or named(left)):
        (side, value, is_text), op, flipped = read(right, left), _FLIPPED[op], True
    if side == "" or op not in _COMPARE:
        return None
    if is_text and op not in _EQUALITY:
        value = None  # "sm_90" < "sm_100" is False: strings compare by their letters
    operand = right if flipped else left
    names = tuple(
        (spelled, lookup(spelled)) for n in ast.walk(operand)
        if isinstance(n, (ast.Name, ast.Attribute, ast.Call)) and (spelled := _spelled(n)) and lookup(spelled) != ""
    )  # fmt: skip
    return _Leaf(node, side, op, value, flipped, names, is_text)


def _on_paths(
    found: list[tuple[Gate, ast.Compare, int]], body: list[ast.stmt], readable: dict[int, frozenset[Arch] | None],
    universe: tuple[Arch, ...],
) -> list[tuple[Gate, ast.Compare, int]]:
    """Each readable comparison's gate admits what the code path it guards admits (`_polarity`): `if cap != 9:
    raise` admits 9, `skipif(cap[0] not in [10, 12])` 10 and 12, the comparisons of one test the same archs."""
    lines = {node.lineno for _, node, _ in found}
    def first(stmt: ast.stmt) -> int:
        return min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])

    tops = [stmt for stmt in body if any(first(stmt) <= line <= (stmt.end_lineno or stmt.lineno) for line in lines)]
    up = _polarity.parents(tops)
    out = []
    for gate, node, scope in found:
        if readable.get(id(node)) is None:
            out.append((gate, node, scope))
            continue
        test, runs = _polarity.need(node, up)
        unread = any(isinstance(n, ast.Compare) and id(n) in readable and readable[id(n)] is None for n in ast.walk(test))
        admitted, unknown = set(), set()
        for arch in universe:

            def leaf(operand: ast.expr, arch: Arch = arch) -> bool | None:
                archs = readable.get(id(operand))
                return None if archs is None else arch in archs

            result = _polarity.value(test, leaf)
            if result is runs or (result is None and not unread):
                admitted.add(arch)  # an operand that does not depend on the GPU may let it through
            elif result is None:
                unknown.add(arch)
        detail = {**gate.detail, "runs_where": "true" if runs else "false"}
        if test is not node:
            detail["test"] = ast.unparse(test)
        out.append((replace(gate, admits=ArchSet(universe, frozenset(admitted), frozenset(unknown)), detail=detail), node, scope))
    return out


def nodes_in(text: PythonText, body: list, test: Callable[[bytes], bool], scope: int) -> Iterator[tuple[ast.AST, int]]:
    """Every node of the statements whose source passes `test`, with the id of the function around it (0: none)."""
    for stmt in body:
        if hasattr(stmt, "lineno"):  # a match_case has no position: look inside it
            start, end = text.span(stmt)
            if not test(text.data[start:end]):
                continue
        if not (isinstance(stmt, COMPOUND) or isinstance(stmt, (ast.ExceptHandler, ast.match_case))):
            for node in ast.walk(stmt):
                yield node, scope
            continue
        inner = id(stmt) if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else scope
        for name, value in ast.iter_fields(stmt):
            if name in _BODIES:
                continue
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, ast.AST):
                    for node in ast.walk(item):
                        yield node, scope
        for name in _BODIES:
            yield from nodes_in(text, getattr(stmt, name, None) or [], test, inner)


def bind(target: ast.AST, value: ast.AST, scope: int, bound: dict) -> None:
    call = _capability_call(value)
    if isinstance(target, ast.Name):
        if call is not None:
            bound[(scope, target.id)] = None if call == "pair" else "sm"
        elif (
            isinstance(value, ast.Subscript)
            and _capability_call(value.value) == "pair"
            and isinstance(value.slice, ast.Constant)
            and value.slice.value in (0, 1)
        ):
            bound[(scope, target.id)] = value.slice.value
    elif isinstance(target, ast.Tuple) and len(target.elts) == 2 and call == "pair":
        for index, element in enumerate(target.elts):
            if isinstance(element, ast.Name):
                bound[(scope, element.id)] = index


# ---------------------------------------------------------------- scan: only the blocks that name the call

_TOKEN_RE = re.compile(b"|".join(re.escape(token) for token in TOKENS))
_PY_LEXEME_RE = re.compile(rb"""\'\'\'.*?\'\'\'|\"\"\".*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|\#[^\n]*""", re.DOTALL)
_NOT_A_START = (b")", b"]", b"}", b"else", b"elif", b"except", b"finally", b"#")


def blocks(data: bytes) -> tuple[PythonText, list[ast.stmt]] | None:
    """The statements around each `get_device_capability` (or arch string compared), parsed alone: the innermost function (or the
    top-level statement) holding it, at its own line numbers and columns.

    None when that cannot be done safely: a block does not parse alone, or a name is bound from the call
    outside any function (its comparisons may be anywhere); the caller then parses the whole file.
    A whole-module parse of a 5000-line SGLang file costs more than all the rest of its scan.
    """
    text = PythonText(data)
    lines = data.split(b"\n")
    # multi-line strings (and comments): no statement starts inside one
    hidden: list[tuple[int, int]] = []
    for match in _PY_LEXEME_RE.finditer(data):
        if match.group().startswith(b"#"):
            if _holds(match.group()):
                hidden.append((match.start(), match.end()))
        elif b"\n" in match.group() or has_token(match.group()):
            hidden.append((match.start(), match.end()))
    hidden_starts = [span[0] for span in hidden]

    def in_hidden(offset: int) -> bool:
        i = bisect.bisect_right(hidden_starts, offset) - 1
        return i >= 0 and offset < hidden[i][1]

    def indent(number: int) -> int | None:
        """The indentation of line `number` (1-based) when a statement may start there."""
        line = lines[number - 1]
        body = line.lstrip(b" \t")
        if not body.strip() or body.startswith(_NOT_A_START) or in_hidden(text.starts[number - 1]):
            return None
        if number > 1 and lines[number - 2].rstrip(b"\r").endswith(b"\\"):
            return None
        return len(line) - len(body)

    blocks: dict[int, tuple[int, int, int]] = {}  # first line -> (first line, last line, indentation)
    for at in [match.start() for match in _TOKEN_RE.finditer(data)] + arch_comparisons(data):
        if in_hidden(at):
            continue
        number = text.line(at)
        limit = indent(number)
        limit = len(lines[number - 1]) if limit is None else limit + 1
        start = None
        for candidate in range(number, 0, -1):
            level = indent(candidate)
            if level is None or level >= limit:
                continue
            limit = level
            head = lines[candidate - 1].lstrip()
            if head.startswith((b"def ", b"async def ")) or level == 0:
                start = candidate
                break
        if start is None:
            return None
        while start > 1 and lines[start - 2].lstrip().startswith(b"@"):
            start -= 1  # its decorators
        level = len(lines[start - 1]) - len(lines[start - 1].lstrip(b" \t"))
        decorated = lines[start - 1].lstrip().startswith(b"@")
        end = len(lines)
        for candidate in range(number + 1, len(lines) + 1):
            found = indent(candidate)
            if found is not None and found <= level:
                head = lines[candidate - 1].lstrip()
                if decorated and head.startswith((b"@", b"def ", b"async def ", b"class ")):
                    decorated = head.startswith(b"@")  # the decorated definition itself belongs to the block
                    continue
                end = candidate - 1
                break
        if start not in blocks or blocks[start][1] < end:
            blocks[start] = (start, end, level)
    body: list[ast.stmt] = []
    covered = -1
    for start, end, level in sorted(blocks.values()):
        if start <= covered:
            if end > covered:
                return None  # overlapping blocks: let the whole file decide
            continue
        covered = end
        piece = b"\n".join(lines[start - 1 : end])
        prefix = b"\n" * (start - 1) if level == 0 else b"\n" * (start - 2) + b"if 1:\n"
        try:
            parsed = ast.parse(prefix + piece)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if level == 0:
            statements = parsed.body
        else:
            wrapper = parsed.body[0]
            assert isinstance(wrapper, ast.If)  # the `if 1:` put around the indented piece
            statements = wrapper.body
        if level == 0 and not isinstance(statements[0], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound: dict = {}
            for node in ast.walk(parsed):
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    bind(node.targets[0], node.value, 0, bound)
            if bound:
                return None  # a name bound at module level: compared anywhere
        body += statements
    return text, body



# ---------------------------------------------------------------- the kind's interface (recipes)


def check_selector(name: str, value) -> str:
    """The same selectors as python_arch_test (function, assigns, calls), checked the same way; `names` as
    cpp_runtime_check's (a table of name = sm | major | minor | cuda_arch)."""
    from codemods.gates import python_arch_test

    if name == "names":
        from codemods.gates import cpp_runtime_check

        wrong = cpp_runtime_check.check_selector(name, value)
        if wrong:
            return wrong
        for spelled in value:
            if not NAME_RE.fullmatch(spelled):
                return f"names: {spelled!r} is not a name as Python code writes it (`x`, `self.backend`, `cap.to_int()`)"
        return ""
    return python_arch_test.check_selector(name, value)


def _parse(source: bytes) -> tuple[PythonText, ast.Module]:
    from codemods.gates import _python

    try:
        return PythonText(source), ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        if _python.too_deep(exc):
            raise _python.nested_too_deeply(getattr(exc, "lineno", None)) from None
        raise SourceError(f"not valid Python: line {getattr(exc, 'lineno', None)}: {getattr(exc, 'msg', exc)}") from None


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _body_assigns(statements: list[ast.stmt], target: str) -> bool:
    for stmt in statements:
        for node in ast.walk(stmt):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                for leaf in ast.walk(t):
                    if _dotted(leaf) == target:
                        return True
    return False


def _body_calls(statements: list[ast.stmt], wanted: set[str]) -> bool:
    for stmt in statements:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and ({callee(node), _dotted(node.func)} & wanted):
                return True
    return False


# ---------------------------------------------------------------- conditions: the comparisons an `and`/`or` joins


LeafOf = Callable[[ast.AST], "_Leaf | None"]
# operators that bind tighter than `or`: an `or` added inside one needs parentheses
_TIGHTER = (ast.BoolOp, ast.UnaryOp, ast.Compare, ast.BinOp, ast.Attribute, ast.Starred, ast.Await)


def _pure(node: ast.AST, leaf_of: LeafOf) -> bool:
    """Whether `node` is made only of capability comparisons joined by `and`, `or` and `not`."""
    if isinstance(node, ast.Compare):
        return leaf_of(node) is not None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _pure(node.operand, leaf_of)
    if isinstance(node, ast.BoolOp):
        return all(_pure(value, leaf_of) for value in node.values)
    return False


def _leaves(node: ast.AST, leaf_of: LeafOf) -> list[_Leaf]:
    """The comparisons a condition reads (in an `and`/`or` with other operands, only its pure operands')."""
    if isinstance(node, ast.Compare):
        leaf = leaf_of(node)
        return [leaf] if leaf is not None else []
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _leaves(node.operand, leaf_of)
    if isinstance(node, ast.BoolOp):
        return [leaf for value in node.values if _pure(value, leaf_of) for leaf in _leaves(value, leaf_of)]
    return []


def _checked(node: ast.AST, leaf_of: LeafOf) -> bool:
    """A recipe reads a lone negated comparison (`!= 9`, `not in (9, 10)`) as a check *for* its values."""
    leaf = leaf_of(node) if isinstance(node, ast.Compare) else None
    return leaf is not None and leaf.op in _CHECKED


def _truth(node: ast.AST, arch: Arch, leaf_of: LeafOf, checked: bool = False) -> bool | None:
    """Whether the condition holds on `arch`: True, False, or None (unknown). In an `and`/`or` that
    also has other operands, only its pure operands count: it admits what they do not rule out."""
    if isinstance(node, ast.Compare):
        leaf = leaf_of(node)
        if leaf is None or leaf.value is None:
            return None
        op = _CHECKED.get(leaf.op, leaf.op) if checked else leaf.op
        try:
            return bool(_COMPARE[op](_have(arch, leaf.side), leaf.value))
        except TypeError:
            return None  # a major compared with a pair
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        value = _truth(node.operand, arch, leaf_of)
        return None if value is None else not value
    if isinstance(node, ast.BoolOp):
        values = [_truth(v, arch, leaf_of) for v in node.values if _pure(v, leaf_of)]
        decisive = isinstance(node.op, ast.Or)  # True decides an `or`, False an `and`
        if decisive in values:
            return decisive
        return None if None in values or not values else not decisive
    return None


def _reading(node: ast.AST, leaf_of: LeafOf, universe: tuple[Arch, ...]) -> ArchSet:
    checked = _checked(node, leaf_of)
    admitted, unknown = set(), set()
    for arch in universe:
        value = _truth(node, arch, leaf_of, checked)
        if value is None:
            unknown.add(arch)
        elif value:
            admitted.add(arch)
    return ArchSet(universe, frozenset(admitted), frozenset(unknown))


def _conditions(
    text: PythonText, tree: ast.Module, universe, parents: dict[int, ast.AST], names: Mapping[str, Side] | None = None
) -> tuple[list[ast.expr], LeafOf]:
    """Each condition over the capability: the largest `and`/`or`/`not` of comparisons around each one;
    in an `and`/`or` that also has other operands, its comparisons together (`major == 10 and x and minor != 3`)."""
    found = _found(text, tree.body, universe, computed=True, names=names)
    leaves = {id(leaf.node): leaf for _, leaf, _ in found}

    def leaf_of(node: ast.AST) -> _Leaf | None:
        return leaves.get(id(node))

    roots: dict[int, ast.expr] = {}
    for _, leaf, _ in found:
        top: ast.expr = leaf.node
        while isinstance(parents.get(id(top)), (ast.BoolOp, ast.UnaryOp)) and _pure(parents[id(top)], leaf_of):
            top = parents[id(top)]  # type: ignore[assignment]  # a BoolOp or a `not`: an expression
        up = parents.get(id(top))
        if isinstance(up, ast.BoolOp) and sum(_pure(value, leaf_of) for value in up.values) > 1:
            top = up
        roots.setdefault(id(top), top)
    return sorted(roots.values(), key=text.span), leaf_of


def _condition_gate(text: PythonText, root: ast.expr, leaf_of: LeafOf, universe, context: str) -> Gate:
    leaves = _leaves(root, leaf_of)
    names = {name: _SIDES[side] for leaf in leaves for name, side in leaf.names}
    detail: dict[str, Any] = {"names": names}
    admits = _reading(root, leaf_of, universe)
    if any(leaf.value is None for leaf in leaves):
        detail["unknown"] = next(_unreadable(leaf) for leaf in leaves if leaf.value is None)
    elif admits.unknown:
        detail["unknown"] = "a major compared with a pair"
    start, end = text.span(root)
    return Gate(
        kind=KIND, start=start, end=end, line=root.lineno, text=text.data[start:end].decode("utf-8"),
        admits=admits, context=context, detail=detail,
    )  # fmt: skip


def find(
    source: bytes,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    *,
    function: str | None = None,
    assigns: str | None = None,
    calls: str | list[str] | None = None,
    names: Mapping[str, str] | None = None,
) -> list[Gate]:
    """Every condition over the capability the selectors pick, computed ones included (unknown: refused by `widen`).

    `names` declares what other names hold (`{"_device_sm": "sm", "backend": "sm"}`, as cpp_runtime_check's):
    their comparisons are read too, with ints or strings (`backend in ("100", "110")`) as values.
    """
    text, tree = _parse(source)
    wanted = {calls} if isinstance(calls, str) else set(calls or [])
    parents = _parents(tree)
    declared = {spelled: _DECLARED[meaning] for spelled, meaning in (names or {}).items()}
    roots, leaf_of = _conditions(text, tree, universe, parents, declared)
    out = []
    for root in roots:
        up: ast.AST
        around, statement, assigned, up = "", None, False, root
        while id(up) in parents:
            child, up = up, parents[id(up)]
            if statement is None and isinstance(up, (ast.If, ast.While)) and up.test is child:
                statement = up
            if assigns is not None and isinstance(up, (ast.Assign, ast.AnnAssign)) and up.value is child:
                targets = up.targets if isinstance(up, ast.Assign) else [up.target]
                assigned = assigned or any(_dotted(t) == assigns for t in targets)
            if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)):
                around = up.name
                break
        if function is not None and around != function:
            continue
        if assigns is not None and not (assigned or statement is not None and _body_assigns(statement.body, assigns)):
            continue
        if wanted and not (statement is not None and _body_calls(statement.body, wanted)):
            continue
        out.append(_condition_gate(text, root, leaf_of, universe, around))
    return out


# ---------------------------------------------------------------- widening a condition


_EQUAL = (ast.Eq, ast.In)
_BOUNDS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


@dataclass(frozen=True)
class _Place:
    """A condition being widened: the file, the condition's node and the archs it must gain."""

    source: bytes
    text: PythonText
    tree: ast.Module
    parents: dict[int, ast.AST]
    root: ast.expr
    leaf_of: LeafOf
    missing: tuple[Arch, ...]

    def failing(self, node: ast.AST) -> tuple[Arch, ...]:
        """The missing archs `node` (a part of the condition) rules out."""
        return tuple(arch for arch in self.missing if _truth(node, arch, self.leaf_of) is False)

    def failing_operands(self) -> list[ast.expr]:
        """The operands of an `and` condition that rule out a missing arch."""
        if not (isinstance(self.root, ast.BoolOp) and isinstance(self.root.op, ast.And)):
            return []
        return [v for v in self.root.values if _pure(v, self.leaf_of) and self.failing(v)]

    def span(self, node: ast.AST) -> tuple[int, int]:
        """`node`'s bytes with the parentheses written around it inside the condition."""
        assert isinstance(node, (ast.expr, ast.stmt))
        start, end = self.text.span(node)
        low, high = self.text.span(self.root)
        data = self.source
        while True:
            before, after = data[low:start].rstrip(), data[end:high].lstrip()
            if not (before.endswith(b"(") and after.startswith(b")")):
                return start, end
            start, end = low + len(before) - 1, high - len(after) + 1

    def brackets(self) -> tuple[str, str]:
        """The file's own collection for a membership test of numbers: a list when it writes more `in [9, 10]`
        than `in (9, 10)`, else a tuple (other values say nothing: SGLang's unquant.py has `in ['silu', ...]`
        and upstream wrote `not in (9, 12)` there)."""
        counts = {ast.List: 0, ast.Tuple: 0}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Compare):
                for op, right in zip(node.ops, node.comparators):
                    if isinstance(op, (ast.In, ast.NotIn)) and type(right) in counts and _literal(right):
                        counts[type(right)] += 1
        return ("[", "]") if counts[ast.List] > counts[ast.Tuple] else ("(", ")")


def _values(side: Side, archs: tuple[Arch, ...]) -> list:
    return sorted({_have(arch, side) for arch in archs})  # type: ignore[type-var]  # ints, or pairs of ints


def _extend(place: _Place) -> list[Edit] | None:
    """Add the values to an equality or membership: `== 120` -> `in (120, 121)`, `in [9, 10]` -> `in [9, 10, 12]`,
    `!= 9` (alone: a check for 9) -> `not in (9, 12)`; in an `and`, the one comparison a target fails."""
    root, leaf_of = place.root, place.leaf_of
    if isinstance(root, ast.Compare):
        leaf, allowed = leaf_of(root), (*_EQUAL, *_CHECKED)
    elif isinstance(root, ast.BoolOp) and isinstance(root.op, ast.And):
        failing = place.failing_operands()
        leaf, allowed = (leaf_of(failing[0]) if len(failing) == 1 else None), _EQUAL
    elif isinstance(root, ast.BoolOp):
        equal = [leaf_of(v) for v in root.values if isinstance(v, ast.Compare)]
        leaf, allowed = next((e for e in equal if e is not None and e.op in _EQUAL), None), _EQUAL
    else:
        return None
    if leaf is None or leaf.flipped or leaf.op not in allowed or leaf.value is None:
        return None
    archs = place.missing if leaf.node is root else place.failing(leaf.node)
    have = [leaf.value] if leaf.op in (ast.Eq, ast.NotEq) else list(leaf.value)  # type: ignore[call-overload]
    values = [v for v in _values(leaf.side, archs) if v not in have]
    if not values:
        return None
    source, text, node = place.source, place.text, leaf.node
    right = node.comparators[0]
    start, end = text.span(right)
    spelled = [repr(v) for v in values]
    if leaf.strings:  # in the spelling of a string already there: "sm_120" gains "sm_121", "100" gains "107"
        sample = right.elts[0] if isinstance(right, (ast.Tuple, ast.List, ast.Set)) and right.elts else right
        model = source[slice(*text.span(sample))].decode("utf-8")
        spelled = [spell(next(a for a in archs if _have(a, leaf.side) == v), model) for v in values]
    if leaf.op in (ast.Eq, ast.NotEq):
        op_start = text.span(node.left)[1]
        word = b"in" if leaf.op is ast.Eq else b"not in"
        new_between = re.sub(rb"==|!=", word, source[op_start:start], count=1)
        opening, closing = place.brackets()
        written = (leaf.value, source[start:end].decode("utf-8"))
        items = ", ".join(item for _, item in sorted([written, *zip(values, spelled)]))
        return [Edit(op_start, start, new_between), Edit(start, end, f"{opening}{items}{closing}".encode())]
    if not isinstance(right, (ast.Tuple, ast.List, ast.Set)) or not right.elts:
        return None
    return _insert(source, text, right, have, dict(zip(values, spelled)))


def _insert(source: bytes, text: PythonText, right: ast.Tuple | ast.List | ast.Set, there: list, new: dict) -> list[Edit]:
    """Edits adding `new` (value -> spelling) to the literal collection `right` holding the values `there`:
    each in its place where those are in ascending order (`("100", "110")` gains `"107"` between), else at the end."""
    spans = [text.span(item) for item in right.elts]
    ordered = there == sorted(there)
    after: dict[int, list[str]] = {}  # the index of the item each new value follows (-1: before the first)
    for value, spelled in sorted(new.items()) if ordered else new.items():
        index = sum(1 for old in there if old < value) - 1 if ordered else len(there) - 1
        after.setdefault(index, []).append(spelled)
    edits = []
    end = text.span(right)[1]
    for index, items in sorted(after.items()):
        if index < 0:
            edits.append(Edit(spans[0][0], spans[0][0], "".join(s + ", " for s in items).encode()))
            continue
        last_end = spans[index][1]
        added = "".join(", " + s for s in items).encode()
        if len(spans) == 1 and isinstance(right, ast.Tuple) and source[last_end:end].lstrip().startswith(b","):
            edits.append(Edit(last_end, source.index(b",", last_end) + 1, added))  # `(90,)` becomes `(90, 120)`
        else:
            edits.append(Edit(last_end, last_end, added))
    return edits


def _drop(place: _Place) -> list[Edit] | None:
    """Drop the comparisons of an `and` that rule a target out: `major == 10 and minor != 3` -> `major == 10`."""
    root = place.root
    failing = {id(v) for v in place.failing_operands()}
    if not failing or len(failing) == sum(_pure(v, place.leaf_of) for v in root.values):  # type: ignore[attr-defined]
        return None
    assert isinstance(root, ast.BoolOp)
    spans = [place.span(v) for v in root.values]
    cuts, kept_before = [], False
    for i, value in enumerate(root.values):
        if id(value) not in failing:
            kept_before = True
        elif kept_before:
            cuts.append(Edit(spans[i - 1][1], spans[i][1], b""))
        else:
            cuts.append(Edit(spans[i][0], spans[i + 1][0], b""))
    return cuts


def _move_bound(place: _Place) -> list[Edit] | None:
    """Move a bound to the targets' value: `[0] >= 10` -> `[0] >= 9` (kept only when that admits no arch between)."""
    root, leaf_of = place.root, place.leaf_of
    failing = [root] if isinstance(root, ast.Compare) else place.failing_operands()
    leaf = leaf_of(failing[0]) if len(failing) == 1 and isinstance(failing[0], ast.Compare) else None
    if leaf is None or leaf.op not in _BOUNDS or leaf.value is None:
        return None
    values = _values(leaf.side, place.failing(leaf.node))
    if not values or type(values[0]) is not type(leaf.value):
        return None
    lower = leaf.op in (ast.Gt, ast.GtE)
    new = values[0] if lower else values[-1]
    if leaf.op in (ast.Gt, ast.Lt):
        if not isinstance(new, int):
            return None
        new = new - 1 if lower else new + 1
    literal = leaf.literal
    if isinstance(literal, ast.Constant):
        return [Edit(*place.text.span(literal), str(new).encode())]
    if isinstance(literal, ast.Tuple) and all(isinstance(e, ast.Constant) for e in literal.elts):
        return [Edit(*place.text.span(e), str(n).encode()) for e, n in zip(literal.elts, new) if e.value != n]  # type: ignore[attr-defined,arg-type]
    return None


def _add_disjunct(place: _Place) -> list[Edit] | None:
    """Keep a bound and add an equality for the targets: `major < 10` -> `major < 10 or major == 12`."""
    root, leaf_of = place.root, place.leaf_of
    if isinstance(root, ast.Compare):
        leaf = leaf_of(root)
        if leaf is None or leaf.op not in _BOUNDS:
            return None
    elif isinstance(root, ast.BoolOp) and isinstance(root.op, ast.Or):
        leaf = _leaves(root, leaf_of)[0]
    else:
        return None
    values = _values(leaf.side, place.missing)
    operand = place.source[slice(*place.text.span(leaf.operand))].decode("utf-8")
    if len(values) == 1:
        term = f"{operand} == {values[0]!r}"
    else:
        opening, closing = place.brackets()
        term = f"{operand} in {opening}{', '.join(map(repr, values))}{closing}"
    start, end = place.text.span(root)
    parent = place.parents.get(id(root))
    binds_tighter = isinstance(parent, _TIGHTER) and not (isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.Or))
    if isinstance(root, ast.BoolOp) or not binds_tighter:
        return [Edit(end, end, f" or {term}".encode())]
    return [Edit(start, start, b"("), Edit(end, end, f" or {term})".encode())]


def widen(source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> list[Edit]:
    """Edits that make the condition admit `targets` too, and no arch it can tell from them; `[]` if it does already.

    Tried in order, each kept only when the rewritten condition, read again,
    admits exactly its archs plus the targets (and what its comparisons
    cannot tell from them: `== 12` admits sm_121 with sm_120): add values to
    an equality or membership, drop the comparisons of an `and` that rule a
    target out, move a bound, add an equality after a bound or in an `or`.
    """
    if gate.detail.get("unknown"):
        raise CannotWiden(f"line {gate.line}: {gate.detail['unknown']}; edit it by hand")
    if all(gate.admits.admits(arch) for arch in targets):
        return []
    text, tree = _parse(source)
    parents = _parents(tree)
    codes = {name: code for code, name in _SIDES.items()}
    names = {name: codes[side] for name, side in gate.detail.get("names", {}).items()}
    roots, leaf_of = _conditions(text, tree, universe, parents, names)
    root = next((r for r in roots if text.span(r) == (gate.start, gate.end)), None)
    if root is None:
        raise CannotWiden(f"line {gate.line}: {gate.text} is no longer at this place; find the gates again")
    lone = leaf_of(root) if isinstance(root, ast.Compare) else None
    if lone is not None and lone.flipped and lone.op not in _BOUNDS:
        raise CannotWiden(f"line {gate.line}: `{gate.text}` has its value on the left; edit it by hand")
    scope = tuple(dict.fromkeys((*universe, *targets)))
    before = _reading(root, leaf_of, scope)
    sides = sorted({repr(leaf.side) for leaf in _leaves(root, leaf_of)})
    leaf_sides = {repr(leaf.side): leaf.side for leaf in _leaves(root, leaf_of)}

    def told(arch: Arch) -> tuple:
        return tuple(_have(arch, leaf_sides[side]) for side in sides)

    wanted = {told(arch) for arch in targets}
    expected = before.admitted | {arch for arch in scope if told(arch) in wanted}
    place = _Place(source, text, tree, parents, root, leaf_of, tuple(a for a in targets if not before.admits(a)))
    for rewrite in (_extend, _drop, _move_bound, _add_disjunct):
        edits = rewrite(place)
        if not edits:
            continue
        end = gate.end + sum(len(e.text) - (e.end - e.start) for e in edits)
        after = admits(apply_edits(source, edits)[gate.start : end].decode("utf-8"), scope, gate.detail)
        if not after.unknown and after.admitted == expected:
            return edits
    plus = ", ".join(a.name for a in targets if not before.admits(a))
    bound = any(leaf.op in _BOUNDS for leaf in _leaves(root, leaf_of))
    raise CannotWiden(
        f"line {gate.line}: no rewrite of `{gate.text}` admits exactly what it admits plus {plus}"
        + (" (moving its bound would admit the archs in between)" if bound else "")
        + "; edit it by hand"
    )


def admits(text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS, detail: Mapping[str, Any] | None = None) -> ArchSet:
    """The archs a condition, given as text, admits; `detail` (from `find`) says what each name it compares holds."""
    unknown = ArchSet(universe, frozenset(), frozenset(universe))
    try:
        node = ast.parse("(\n" + text + "\n)", mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return unknown
    names = dict((detail or {}).get("names", {}))
    codes = {name: code for code, name in _SIDES.items()}
    cache: dict[int, _Leaf | None] = {}

    def leaf_of(node: ast.AST) -> _Leaf | None:
        if id(node) not in cache:
            cache[id(node)] = _leaf(node, lambda name: codes[names[name]] if name in names else "")
        return cache[id(node)]

    if not _leaves(node, leaf_of) or not (_pure(node, leaf_of) or isinstance(node, ast.BoolOp)):
        return unknown
    return _reading(node, leaf_of, universe)
