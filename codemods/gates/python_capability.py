"""Comparisons of the device's compute capability in Python: read by `scan` and widened by recipes.

    if torch.cuda.get_device_capability()[0] >= 9:        # a bound: read only
    if get_device_sm() == 120:                            # sm = major * 10 + minor
    if torch.cuda.get_device_capability()[0] != 9:        # negated: a check for 9
    major, minor = torch.cuda.get_device_capability()
    if major == 12 and minor == 0:                        # each comparison is a gate

What a comparison admits is decided per arch from its (major, minor): the
major (`[0]`, a name bound from it), the minor (`[1]`), the pair (`>= (9,
0)`) or SGLang's `get_device_sm()` (`major * 10 + minor`). Only single
comparisons with integer literals (or tuples of them) are read. `scan`
reports where a comparison is true (`minor != 3` admits every minor but
3); a recipe reads a negated comparison (`!=`, `not in`) as a check *for*
its values (`if cap != 9: raise`, `if cap != 9: fallback()`): it admits the
archs its values name, and widening adds the targets to those values.

`widen` adds the targets' values in the comparison's own style: `== 120`
becomes `in (120, 121)`, `!= 9` becomes `not in (9, 12)`, `in (9, 10)`
gains `, 12` inside its brackets. A bound (`>=`, `<`) cannot be widened to
admit one arch more without admitting the ones between, and a comparison
with a computed value (`== SM_VERSION`) cannot be read: both are refused
(`CannotWiden`, naming the line and the reason).

Selectors pick the comparison: `function` (the function around it),
`assigns` (it is in the value assigned to that dotted target, or the body of
the `if` it is in assigns that target) and
`calls` (that body calls that function, or any of a list).
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.gates import CannotWiden, Edit, Gate, SourceError, _polarity

KIND = "python_capability"

CALLS = ("get_device_capability", "get_device_sm")
TOKENS = tuple(name.encode() for name in CALLS)
_BOM = b"\xef\xbb\xbf"
_SIDES = {0: "major", 1: "minor", None: "pair", "sm": "sm"}

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
    return (CAPABILITY_TOKEN in data and may_compare(data)) or bool(b"get_device_sm" in data and SM_COMPARE_RE.search(data))


def has_token(piece: bytes) -> bool:
    return any(token in piece for token in TOKENS)


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


def _literal(node: ast.AST):
    """An int, a tuple of ints, or a tuple/list/set of those; None for anything else."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [_literal(item) for item in node.elts]
        return None if any(item is None for item in items) else tuple(items)
    return None


def _have(arch: Arch, side) -> object:
    if side == "sm":
        return arch.major * 10 + arch.minor
    return (arch.major, arch.minor) if side is None else (arch.major, arch.minor)[side]


def _admitted(side, op: type[ast.cmpop], value, universe: tuple[Arch, ...], checked: bool = False) -> frozenset[Arch] | None:
    if checked:
        op = _CHECKED.get(op, op)
    try:
        return frozenset(arch for arch in universe if _COMPARE[op](_have(arch, side), value))
    except TypeError:
        return None  # a major compared with a pair


def gates(text: PythonText, body: list[ast.stmt], universe: tuple[Arch, ...], computed: bool = False) -> list[Gate]:
    """Every capability comparison in `body`; with `computed`, also those with a value it cannot read (unknown).

    Only statements that name a capability call (or a name bound from one) are walked.
    """
    return [gate for gate, _, _ in _found(text, body, universe, computed)]


def _found(
    text: PythonText, body: list[ast.stmt], universe, computed: bool, checked: bool = False
) -> list[tuple[Gate, ast.Compare, int]]:
    bound: dict[tuple[int, str], object] = {}  # (scope, name) -> 0 major, 1 minor, None the pair, "sm"
    compares: dict[int, tuple[ast.Compare, int]] = {}
    for node, scope in nodes_in(text, body, has_token, 0):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            bind(node.targets[0], node.value, scope, bound)
        elif isinstance(node, ast.Compare):
            compares[id(node)] = (node, scope)
    if bound:
        names = re.compile(rb"\b(?:%s)\b" % b"|".join(re.escape(name.encode()) for _, name in bound))
        for node, scope in nodes_in(text, body, lambda piece: bool(names.search(piece)), 0):
            if isinstance(node, ast.Compare):
                compares.setdefault(id(node), (node, scope))

    def part(node: ast.AST, scope: int):
        """0 or 1 for the major or minor, None for the (major, minor) pair, "sm", or "" for anything else."""
        call = _capability_call(node)
        if call is not None:
            return None if call == "pair" else "sm"
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in (0, 1):
            return node.slice.value if _capability_call(node.value) == "pair" or part(node.value, scope) is None else ""
        if isinstance(node, ast.Name):
            for where in (scope, 0):
                if (where, node.id) in bound:
                    return bound[(where, node.id)]
        return ""

    found = []
    readable: dict[int, frozenset[Arch] | None] = {}  # id of each comparison of the capability -> where it is true
    for node, scope in compares.values():
        if len(node.ops) != 1:
            continue
        left, op, right = node.left, type(node.ops[0]), node.comparators[0]
        side, value, flipped = part(left, scope), _literal(right), False
        if (side == "" or value is None) and op in _FLIPPED and part(right, scope) != "":
            side, value, op, flipped = part(right, scope), _literal(left), _FLIPPED[op], True
        if side == "" or op not in _COMPARE:
            continue
        admitted = None if value is None else _admitted(side, op, value, universe, checked)
        readable[id(node)] = admitted
        detail = {"side": _SIDES[side], "op": op.__name__, "flipped": flipped, "checked": checked}
        if admitted is None:
            if not computed:
                continue
            detail["unknown"] = "the value compared is computed, not a literal" if value is None else "a major compared with a pair"
            admits = ArchSet(universe, frozenset(), frozenset(universe))
        else:
            admits = ArchSet(universe, admitted)
        start, end = text.span(node)
        gate = Gate(
            kind=KIND, start=start, end=end, line=node.lineno, text=text.data[start:end].decode("utf-8"),
            admits=admits, detail=detail,
        )  # fmt: skip
        found.append((gate, node, scope))
    if not checked and found:
        found = _on_paths(found, body, readable, universe)
    found.sort(key=lambda item: (item[0].line, item[0].start))
    return found


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
    """The statements around each `get_device_capability`, parsed alone: the innermost function (or the
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
            if has_token(match.group()):
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
    for match in _TOKEN_RE.finditer(data):
        if in_hidden(match.start()):
            continue
        number = text.line(match.start())
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
    """The same selectors as python_arch_test (function, assigns, calls), checked the same way."""
    from codemods.gates import python_arch_test

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


def find(
    source: bytes,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    *,
    function: str | None = None,
    assigns: str | None = None,
    calls: str | list[str] | None = None,
) -> list[Gate]:
    """Every capability comparison the selectors pick, computed ones included (unknown: refused by `widen`)."""
    text, tree = _parse(source)
    wanted = {calls} if isinstance(calls, str) else set(calls or [])
    parents = _parents(tree)
    out = []
    for gate, node, _ in _found(text, tree.body, universe, computed=True, checked=True):
        up: ast.AST
        around, statement, assigned, up = "", None, False, node
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
        out.append(Gate(**{**gate.__dict__, "context": around}))
    return out


def _value_of(arch: Arch, side: str):
    return {"major": arch.major, "minor": arch.minor, "sm": arch.major * 10 + arch.minor, "pair": (arch.major, arch.minor)}[side]


def widen(source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> list[Edit]:
    """Edits that make the comparison admit `targets` too; `[]` if it does already."""
    if gate.detail.get("unknown"):
        raise CannotWiden(f"line {gate.line}: {gate.detail['unknown']}; edit it by hand")
    missing = [arch for arch in targets if not gate.admits.admits(arch)]
    if not missing:
        return []
    text, tree = _parse(source)
    node = next((n for g, n, _ in _found(text, tree.body, universe, computed=True, checked=True) if (g.start, g.end) == (gate.start, gate.end)), None)
    if node is None:
        raise CannotWiden(f"line {gate.line}: {gate.text} is no longer at this place; find the gates again")
    op = type(node.ops[0])
    if op not in (ast.Eq, ast.NotEq, ast.In, ast.NotIn):
        raise CannotWiden(
            f"line {gate.line}: `{gate.text}` is a bound ({'<, <=, >, >='}): moving it would admit every arch in between; "
            "edit it by hand"
        )
    if gate.detail.get("flipped"):
        raise CannotWiden(f"line {gate.line}: `{gate.text}` has its value on the left; edit it by hand")
    side = gate.detail["side"]
    values: list = []
    for arch in missing:
        value = _value_of(arch, side)
        if value not in values:
            values.append(value)
    right = node.comparators[0]
    start, end = text.span(right)
    spelled = [repr(v).replace(" ", "") if side == "pair" else repr(v) for v in values]
    if side == "pair":
        spelled = [s.replace(",", ", ") for s in spelled]
    if op in (ast.Eq, ast.NotEq):
        op_start = text.span(node.left)[1]
        between = source[op_start:start]
        word = b"in" if op is ast.Eq else b"not in"
        new_between = re.sub(rb"==|!=", word, between, count=1)
        items = ", ".join([source[start:end].decode("utf-8"), *spelled])
        return [Edit(op_start, start, new_between), Edit(start, end, f"({items})".encode())]
    if not isinstance(right, (ast.Tuple, ast.List, ast.Set)) or not right.elts:
        raise CannotWiden(f"line {gate.line}: `{gate.text}` compares with no literal collection; edit it by hand")
    last_end = text.span(right.elts[-1])[1]
    if len(right.elts) == 1 and isinstance(right, ast.Tuple) and source[last_end:end].lstrip().startswith(b","):
        comma = source.index(b",", last_end) + 1
        return [Edit(last_end, comma, ("".join(", " + s for s in spelled)).encode())]
    return [Edit(last_end, last_end, ("".join(", " + s for s in spelled)).encode())]


def admits(text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS, detail: Mapping[str, Any] | None = None) -> ArchSet:
    """The archs a comparison, given as text, admits; `detail` (from `find`) says which part of the capability it reads."""
    unknown = ArchSet(universe, frozenset(), frozenset(universe))
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return unknown
    if not isinstance(node, ast.Compare) or len(node.ops) != 1 or not detail or "side" not in detail:
        return unknown
    op, value = type(node.ops[0]), _literal(node.comparators[0])
    if detail.get("flipped"):
        flipped = _FLIPPED.get(op)
        if flipped is None:  # no operator to flip to: as unknown as one _COMPARE lacks
            return unknown
        op, value = flipped, _literal(node.left)
    if op not in _COMPARE or value is None:
        return unknown
    side = {"major": 0, "minor": 1, "pair": None, "sm": "sm"}[detail["side"]]
    admitted = _admitted(side, op, value, universe, bool(detail.get("checked")))
    return unknown if admitted is None else ArchSet(universe, admitted)
