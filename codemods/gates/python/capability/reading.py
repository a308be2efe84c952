"""Reading python_capability's comparisons: each one, and a condition of them.

A comparison of the capability with a literal is a `_Leaf` (which part of
the capability it compares, the operator, the value); `_truth` says whether
a condition of them holds on an arch and `_reading` where it does (`admits`,
for a condition given as text). Finding every one in a file is `finding`'s.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.gates.python.capability.blocks import _capability_call, callee
from codemods.gates.python.capability.values import named, strings
from codemods.gates.python.ast_text import PythonText, dotted

KIND = "python_capability"

_SIDES = {0: "major", 1: "minor", None: "pair", "sm": "sm", "cuda_arch": "cuda_arch"}
Side = int | str | None  # 0 the major, 1 the minor, None the (major, minor) pair, "sm", "cuda_arch"; "" for none of them
# What a recipe's `names` says a name holds (cpp_runtime_check.MEANINGS), as a side of the capability.
_DECLARED: dict[str, Side] = {"major": 0, "minor": 1, "sm": "sm", "cuda_arch": "cuda_arch", "pair": None}
_EQUALITY = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
_COMPARE = {
    ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}  # fmt: skip
_CHECKED = {ast.NotEq: ast.Eq, ast.NotIn: ast.In}  # a recipe's view of a negated comparison: the values it checks for
_FLIPPED = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}


# ---------------------------------------------------------------- one comparison


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
    members: bool = False  # its values are CuTe DSL `Arch.sm_100f` members (read as major * 10 + minor)
    # a chained comparison, `90 <= sm < 120`: `op`/`value` are its first bound read capability first (`sm >= 90`,
    # `flipped`), and this its second (`((ast.Lt, 120),)`); the capability is the middle operand
    chain: tuple[tuple[type[ast.cmpop], object], ...] = ()
    rebound: str = ""  # a local it reads is also assigned something else in its scope (capability.locals)

    @property
    def operand(self) -> ast.expr:
        return self.node.comparators[0] if self.flipped else self.node.left

    @property
    def computed(self) -> bool:
        """A value it compares with is no literal (or no arch string): where it holds is unknown."""
        return bool(self.rebound) or self.value is None or any(value is None for _, value in self.chain)

    @property
    def literal(self) -> ast.expr:
        return self.node.left if self.flipped else self.node.comparators[0]


_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _chained(node: ast.Compare, lookup: Callable[[str], Side]) -> _Leaf | None:
    """`90 <= sm < 120`, two bounds around the capability (SGLang 0.5.14's deepseek_v2.py), as one leaf."""
    if len(node.ops) != 2 or not all(isinstance(op, _ORDER) for op in node.ops):
        return None
    low, middle, high = node.left, node.comparators[0], node.comparators[1]
    side = _part(middle, lookup)
    members = _members(low) is not None and _members(high) is not None  # `Arch.sm_100 <= arch <= Arch.sm_100f`
    if members and side == "" and isinstance(middle, (ast.Name, ast.Attribute, ast.Call)):
        side = "sm"
    if side == "" or any(_part(bound, lookup) != "" for bound in (low, high)):
        return None
    value = _members if members and side == "sm" else _literal
    names = tuple(
        (spelled, lookup(spelled)) for n in ast.walk(middle)
        if isinstance(n, (ast.Name, ast.Attribute, ast.Call)) and (spelled := _spelled(n)) and lookup(spelled) != ""
    )  # fmt: skip
    first, second = _FLIPPED[type(node.ops[0])], type(node.ops[1])
    return _Leaf(node, side, first, value(low), True, names, members=members, chain=((second, value(high)),))


def _leaf(node: ast.AST, lookup: Callable[[str], Side]) -> _Leaf | None:
    """`node` read as a capability comparison, or None when it is none."""
    if isinstance(node, ast.Compare) and len(node.ops) == 2:
        return _chained(node, lookup)
    if not isinstance(node, ast.Compare) or len(node.ops) != 1:
        return None
    left, op, right = node.left, type(node.ops[0]), node.comparators[0]

    def read(held: ast.AST, literal: ast.AST) -> tuple[Side, object, bool]:
        """(side, value, strings) of `held` compared with `literal`: side "" when `held` holds no capability."""
        side = _part(held, lookup)
        if _members(literal) is not None:  # CuTe DSL's `Arch.sm_100f`: an arch by itself, like "sm_100f"
            if side == "" and isinstance(held, (ast.Name, ast.Attribute, ast.Call)):
                side = "sm"
            if op in _EQUALITY and not _default_targets(literal):
                return side, None, False  # `arch == Arch.sm_100f`: which target the DSL compiles for decides
            return side, (_members(literal) if side == "sm" else None), False
        if strings(literal) is None:
            return side, _literal(literal), False
        if side == "" and named(literal) and isinstance(held, (ast.Name, ast.Attribute, ast.Call)):
            side = "sm"  # "sm_120" says what it is, whatever name holds it (`arch[:5]` is not the arch)
        return side, (_literal(literal, strings=True) if side == "sm" else None), True

    (side, value, is_text), flipped = read(left, right), False
    member_target = side != "" and _members(right) is not None  # `arch == Arch.sm_100f`: read, its target unknown
    if (side == "" or value is None) and not member_target and op in _FLIPPED and (
        _part(right, lookup) != "" or named(left) or _members(left) is not None
    ):
        (side, value, is_text), op, flipped = read(right, left), _FLIPPED[op], True
    if side == "" or op not in _COMPARE:
        return None
    members = _members(left if flipped else right) is not None
    if is_text and op not in _EQUALITY:
        value = None  # "sm_90" < "sm_100" is False: strings compare by their letters
    operand = right if flipped else left
    names = tuple(
        (spelled, lookup(spelled)) for n in ast.walk(operand)
        if isinstance(n, (ast.Name, ast.Attribute, ast.Call))
        and (spelled := _spelled(n) or (f"{callee(n)}(...)" if isinstance(n, ast.Call) and callee(n) else ""))
        and lookup(spelled) != ""
    )  # fmt: skip
    return _Leaf(node, side, op, value, flipped, names, is_text, members)


_MEMBER_RE = re.compile(r"sm_(\d{2,3})[af]?")


def _members(node: ast.AST):
    """CuTe DSL `Arch.sm_100f` (or a tuple/list/set of them) as its number (major * 10 + minor: 100), else None.

    CuTe's `Arch` orders its members by (major, minor) alone (`Arch.sm_100 <= arch <= Arch.sm_100f` holds on
    sm_100, sm_100a, sm_100f), so an order reads as the numbers'; `==`/`in` read the same way as `"sm_100a"` does.
    """
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts:
        items = [_members(item) for item in node.elts]
        return None if any(item is None for item in items) else tuple(items)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Arch":
        match = _MEMBER_RE.fullmatch(node.attr)
        if match:
            return int(match.group(1))
    return None


def member_range(node: ast.AST, text: PythonText) -> tuple[str, int] | None:
    """(operand, number) of CuTe DSL's range of one arch, `arch >= Arch.sm_103 and arch <= Arch.sm_103f`; else None."""
    if not (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And) and len(node.values) == 2):
        return None
    bounds = []
    for value, op in zip(node.values, (ast.GtE, ast.LtE)):
        if not (isinstance(value, ast.Compare) and len(value.ops) == 1 and isinstance(value.ops[0], op)):
            return None
        right = value.comparators[0]
        if not (isinstance(right, ast.Attribute) and isinstance(right.value, ast.Name) and right.value.id == "Arch"):
            return None
        bounds.append((text.data[slice(*text.span(value.left))].decode("utf-8"), right.attr))
    (operand, low), (again, high) = bounds
    match = re.fullmatch(r"sm_(\d{2,3})", low)
    if operand != again or match is None or high != f"{low}f":
        return None
    return operand, int(match.group(1))


def _default_targets(node: ast.AST) -> bool:
    """Whether every CuTe DSL `Arch` member in `node` is the target the DSL compiles for on its GPU by default.

    `Arch` is an Enum of (major, minor, suffix): `==` and `in` compare the suffix too, unlike its order. Unless
    CUTE_DSL_ARCH says otherwise, the DSL's arch on a GPU of major 9 or later is its `a` target (`sm_100a` on
    SM100, env_manager's `suffix = "a"`), below 9 the plain one: `arch == Arch.sm_100a` holds on SM100, while
    `arch == Arch.sm_100f` or `arch == Arch.sm_100` holds on none by default (only with CUTE_DSL_ARCH set)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    for item in items:
        if not isinstance(item, ast.Attribute):
            return False
        match = _MEMBER_RE.fullmatch(item.attr)
        if match is None:
            return False
        major = int(match.group(1)) // 10
        if item.attr.endswith(("a", "f")) != (major >= 9) or item.attr.endswith("f"):
            return False
    return True


def _part(node: ast.AST, lookup: Callable[[str], Side]) -> Side:
    """0 or 1 for the major or minor, None for the (major, minor) pair, "sm", "cuda_arch", or "" for anything
    else; `lookup` says what a name holds (the same codes, "" for nothing known), a bound or declared one."""
    call = _capability_call(node)
    if call is not None:
        return None if call == "pair" else "sm"
    if isinstance(node, ast.Call) and callee(node) and lookup(f"{callee(node)}(...)") != "":
        return lookup(f"{callee(node)}(...)")  # the module's own wrapper of a helper (_found: `wrappers`)
    if isinstance(node, (ast.Attribute, ast.Call)) and _spelled(node) and lookup(_spelled(node)) != "":
        return lookup(_spelled(node))  # declared: `self.backend`, `cap.to_int()`
    if isinstance(node, ast.Attribute) and node.attr in ("major", "minor"):  # a capability object's fields
        return ("major", "minor").index(node.attr) if _part(node.value, lookup) is None else ""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to_int" and not node.args:
        return "sm" if _part(node.func.value, lookup) is None else ""  # SGLang's DeviceCapability.to_int()
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in (0, 1):
        index: Side = 0 if node.slice.value == 0 else 1
        return index if _part(node.value, lookup) is None else ""
    if isinstance(node, ast.Name):
        return lookup(node.id)
    if isinstance(node, ast.Tuple) and len(node.elts) == 2 and [_part(e, lookup) for e in node.elts] == [0, 1]:
        return None  # `(major, minor)`: the pair rebuilt from its two halves
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _sm_of(node, lookup):
        return "sm"  # `major * 10 + minor`: SGLang's get_device_sm() spelled out
    return ""


def _sm_of(node: ast.BinOp, lookup: Callable[[str], Side]) -> bool:
    """Whether `node` is `major * 10 + minor` (either order of each operation)."""
    for tens, minor in ((node.left, node.right), (node.right, node.left)):
        if isinstance(tens, ast.BinOp) and isinstance(tens.op, ast.Mult) and _part(minor, lookup) == 1:
            for major, ten in ((tens.left, tens.right), (tens.right, tens.left)):
                if isinstance(ten, ast.Constant) and type(ten.value) is int and ten.value == 10 and _part(major, lookup) == 0:
                    return True
    return False


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
        inner = dotted(node.func)
        return f"{inner}()" if inner else ""
    return dotted(node)


def _have(arch: Arch, side) -> object:
    if side == "sm":
        return arch.major * 10 + arch.minor
    if side == "cuda_arch":
        return arch.cuda_arch
    return (arch.major, arch.minor) if side is None else (arch.major, arch.minor)[side]


def _unreadable(leaf: _Leaf) -> str:
    if leaf.rebound:
        return f"`{leaf.rebound}` is also assigned something other than the capability in its function: what it holds here is unknown"
    if leaf.members and _members(leaf.literal) is None:
        return (f"the arch is compared with `{ast.unparse(leaf.literal)}`, not with a CuTe DSL `Arch.sm_100f` member: "
                "what it holds is unknown")
    if leaf.members:
        return ("a CuTe DSL `Arch` member other than a GPU's default target compared by `==`/`in` (the Enum compares "
                "the suffix): it holds only where CUTE_DSL_ARCH names that target")
    if leaf.strings and leaf.op not in _EQUALITY:
        return "a string compared by order (`<`, `>=`), not by value"
    if leaf.strings:
        return "the string compared is not an arch name (`\"sm_120\"`, `\"120\"`, `\"12.0a\"`) or holds no capability"
    return "the value compared is computed, not a literal" if leaf.computed else "a major compared with a pair"


# ---------------------------------------------------------------- conditions: the comparisons an `and`/`or` joins


LeafOf = Callable[[ast.AST], "_Leaf | None"]


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
    """A recipe reads a lone negated comparison (`!= 9`, `not in (9, 10)`) as a check *for* its values, and an
    `and` of nothing else as a check for what any of them names (`major != 10 and (major, minor) != (12, 0)`:
    a check for major 10 or (12, 0), as cpp_runtime_check reads `!=` joined by `&&`)."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return all(isinstance(value, ast.Compare) and _checked(value, leaf_of) for value in node.values)
    leaf = leaf_of(node) if isinstance(node, ast.Compare) else None
    return leaf is not None and leaf.op in _CHECKED


def _truth(node: ast.AST, arch: Arch, leaf_of: LeafOf, checked: bool = False) -> bool | None:
    """Whether the condition holds on `arch`: True, False, or None (unknown). In an `and`/`or` that
    also has other operands, only its pure operands count: it admits what they do not rule out.
    `checked` (a check, `_checked`): whether `arch` is one the check is for."""
    if isinstance(node, ast.Compare):
        leaf = leaf_of(node)
        if leaf is None or leaf.computed:
            return None
        op: type[ast.cmpop] = _CHECKED.get(leaf.op, leaf.op) if checked else leaf.op  # type: ignore[call-overload]
        try:
            return all(_COMPARE[o](_have(arch, leaf.side), v) for o, v in ((op, leaf.value), *leaf.chain))
        except TypeError:
            return None  # a major compared with a pair
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        value = _truth(node.operand, arch, leaf_of)
        return None if value is None else not value
    if isinstance(node, ast.BoolOp):
        values = [_truth(v, arch, leaf_of, checked) for v in node.values if _pure(v, leaf_of)]
        decisive = isinstance(node.op, ast.Or) or checked  # True decides an `or` (and a check), False an `and`
        if decisive in values:
            return decisive
        return None if None in values or not values else not decisive
    return None


def _reading(node: ast.AST, leaf_of: LeafOf, universe: tuple[Arch, ...], exits: bool = False) -> ArchSet:
    """Where the code the condition guards runs: where it holds; a check (`_checked`) for what it names; with
    `exits` (it decides an `if` whose body leaves, `if sm < 90: return False`, or a `skipif`), where it does not
    hold, the code after it (`polarity.need`)."""
    checked = _checked(node, leaf_of)
    admitted, unknown = set(), set()
    for arch in universe:
        value = _truth(node, arch, leaf_of, checked)
        if value is None:
            unknown.add(arch)
        elif value != (exits and not checked):
            admitted.add(arch)
    return ArchSet(universe, frozenset(admitted), frozenset(unknown))


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
    return _reading(node, leaf_of, universe, (detail or {}).get("runs_where") == "false")
