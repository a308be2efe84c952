"""Widening a python_capability condition: the rewrites `widen` tries, in the order python_capability's docstring gives.

Each rewrite (`_extend`, `_drop`, `_move_bound`, `_add_disjunct`) looks at
one `_Place` (the condition, its comparisons, the archs it must gain) and
proposes edits or nothing; `widen` keeps the first whose condition, read
again, admits exactly the old archs plus the targets.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from codemods.core.arch import DEFAULT_ARCHS, Arch, moved_upper_bound
from codemods.gates import CannotWiden, Edit, Gate, apply_edits, drop_operands
from codemods.gates.python.capability.finding import _conditions, _parents, _parse
from codemods.gates.python.capability.reading import (
    _CHECKED, _SIDES, LeafOf, Side, _Leaf, _checked, member_range, _have, _leaves, _pure, _reading, _truth, admits,
)  # fmt: skip
from codemods.gates.python import python_predicate
from codemods.gates.python.capability.unused import unused_halves
from codemods.gates.python.capability.values import spell
from codemods.gates.python.layout.wrap import wrapped
from codemods.gates.python.ast_text import PythonText
from codemods.gates.python.capability.membership import membership_brackets

_EQUAL = (ast.Eq, ast.In)
_BOUNDS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
# operators that bind tighter than `or`: an `or` added inside one needs parentheses
_TIGHTER = (ast.BoolOp, ast.UnaryOp, ast.Compare, ast.BinOp, ast.Attribute, ast.Starred, ast.Await)


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
    number_membership: str = ""  # the project's brackets for numbers in a file with no example ("list"; "" = tuple)

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

    def brackets(self, numbers: bool) -> tuple[str, str]:
        """The brackets for a new collection of numbers (or of strings or `(major, minor)` pairs: `numbers`
        False, so the project's number style does not apply: FlashInfer writes its lists of numbers in
        brackets, its pairs as tuples of tuples, six files of 0.7.2 among them)."""
        return membership_brackets(self.tree, self.number_membership if numbers else "")


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
    if leaf is None or leaf.flipped or leaf.op not in allowed or leaf.value is None or leaf.members:
        return None  # CuTe DSL's `Arch.sm_100f`: no spelling of a new member is written here
    archs = place.missing if leaf.node is root else place.failing(leaf.node)
    have = [leaf.value] if leaf.op in (ast.Eq, ast.NotEq) else list(leaf.value)  # type: ignore[call-overload]
    values = [v for v in _values(leaf.side, archs) if v not in have]
    if not values or any(type(v) is not type(values[0]) for v in have):
        return None  # `(major, minor) in ((10, 0), (13))`: a number among pairs has no place to add to
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
        written = (leaf.value, source[start:end].decode("utf-8"))
        opening, closing = place.brackets(numbers=not leaf.strings and isinstance(leaf.value, int))
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
    return drop_operands([place.span(v) for v in root.values], [id(v) in failing for v in root.values])


def _move_bound(place: _Place) -> list[Edit] | None:
    """Move a bound to the targets' value: `[0] >= 10` -> `[0] >= 9` (kept only when that admits no arch between)."""
    root, leaf_of = place.root, place.leaf_of
    failing = [root] if isinstance(root, ast.Compare) else place.failing_operands()
    leaf = leaf_of(failing[0]) if len(failing) == 1 and isinstance(failing[0], ast.Compare) else None
    if leaf is None or leaf.op not in _BOUNDS or leaf.value is None or leaf.chain:
        return None
    values = _values(leaf.side, place.failing(leaf.node))
    if not values or type(values[0]) is not type(leaf.value):
        return None
    # the condition holds above a lower bound (`>`, `>=`): the targets must satisfy it, a strict one past the value
    return _bound_moved(place, leaf.literal, values, leaf.op in (ast.Gt, ast.GtE), leaf.op in (ast.Gt, ast.Lt))


def _bound_moved(place: _Place, literal: ast.expr, values: list, above: bool, past: bool) -> list[Edit] | None:
    """A bound's literal rewritten to the lowest of `values` (the targets sit `above` it) or the highest, one
    further out when the bound must lie `past` that value (a strict `<` holding on it, a `<=` an exit must fail):
    the one rule of _move_bound, _exit_move_bound and _move_chained."""
    new = values[0] if above else values[-1]
    if past:
        if not isinstance(new, int):
            return None
        new = new - 1 if above else new + 1
    if isinstance(literal, ast.Constant):
        return [Edit(*place.text.span(literal), str(new).encode())]
    if isinstance(literal, ast.Tuple) and all(isinstance(e, ast.Constant) for e in literal.elts):
        return [Edit(*place.text.span(e), str(n).encode()) for e, n in zip(literal.elts, new) if e.value != n]  # type: ignore[attr-defined,arg-type]
    return None


def _move_range_bound(place: _Place) -> list[Edit] | None:
    """Move the excluded upper bound of a range past the targets that adjoin it: `sm == 90 or (sm >= 100 and sm <
    110)` -> `... and sm < 120)` for sm_110, the range the condition or one operand of its `or` is (two bounds of
    one operand joined by `and`, or a chain). A bound on a major's first capability moves to the next major's
    (`< 110` -> `< 120`, not `< 111`); `widen` keeps it only where no other arch lies between."""
    root = place.root
    ranges = root.values if isinstance(root, ast.BoolOp) and isinstance(root.op, ast.Or) else [root]
    bounds: list[tuple[_Leaf, type[ast.cmpop], object, ast.expr]] = []  # (leaf, `<`/`<=`, value, literal)
    for node in ranges:
        if isinstance(node, ast.Compare):
            leaf = place.leaf_of(node)
            if leaf is not None and leaf.chain and leaf.chain[0][0] in (ast.Lt, ast.LtE):
                bounds.append((leaf, leaf.chain[0][0], leaf.chain[0][1], node.comparators[1]))
        elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And) and len(node.values) == 2:
            pair = [place.leaf_of(v) for v in node.values]
            two = [leaf for leaf in pair if leaf is not None and not leaf.chain and leaf.op in _BOUNDS]
            uppers = [leaf for leaf in two if leaf.op in (ast.Lt, ast.LtE)]
            if len(two) == 2 and len(uppers) == 1 and len({ast.dump(leaf.operand) for leaf in two}) == 1:
                bounds.append((uppers[0], uppers[0].op, uppers[0].value, uppers[0].literal))
    for leaf, op, value, literal in bounds:
        if not isinstance(value, int):
            continue
        new = moved_upper_bound(leaf.side, value, op is ast.LtE, _values(leaf.side, place.missing))
        if new is not None and isinstance(literal, ast.Constant):
            return [Edit(*place.text.span(literal), str(new).encode())]
    return None


def _add_disjunct(place: _Place) -> list[Edit] | None:
    """Keep a bound and add an equality for the targets: `major < 10` -> `major < 10 or major == 12`. An `and`
    of comparisons is `_add_conjunct`'s."""
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
        opening, closing = place.brackets(numbers=all(isinstance(v, int) for v in values))
        term = f"{operand} in {opening}{', '.join(map(repr, values))}{closing}"
    start, end = place.text.span(root)
    parent = place.parents.get(id(root))
    binds_tighter = isinstance(parent, _TIGHTER) and not (isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.Or))
    if isinstance(root, ast.BoolOp) or not binds_tighter:
        return [Edit(end, end, f" or {term}".encode())]
    return [Edit(start, start, b"("), Edit(end, end, f" or {term})".encode())]


_SYMBOLS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def _chain_bound(place: _Place, index: int) -> tuple[_Leaf, type[ast.cmpop], ast.expr] | None:
    """A chained comparison's leaf and its first (0) or second (1) bound: the operator read capability first, and
    the literal (`90 <= sm < 120`: `>=` and `90`, `<` and `120`); None for any other condition."""
    root = place.root
    leaf = place.leaf_of(root)
    if leaf is None or not leaf.chain or not isinstance(root, ast.Compare):
        return None
    return (leaf, leaf.op, root.left) if index == 0 else (leaf, leaf.chain[0][0], root.comparators[1])


def _one_bound(place: _Place, keep: int) -> list[Edit] | None:
    """A chained comparison keeps one of its bounds, written capability first: `90 <= _device_sm < 120` becomes
    `_device_sm >= 90` (keep 0, the upper bound dropped: SGLang 0.5.15's deepseek_v2.py) or `_device_sm < 120`."""
    bound = _chain_bound(place, keep)
    if bound is None:
        return None
    leaf, op, literal = bound
    operand = place.source[slice(*place.text.span(leaf.operand))].decode("utf-8")
    value = place.source[slice(*place.text.span(literal))].decode("utf-8")
    return [Edit(*place.text.span(place.root), f"{operand} {_SYMBOLS[op]} {value}".encode())]


def _move_chained(place: _Place, index: int) -> list[Edit] | None:
    """A chained comparison's bound moved to the targets' value, in place: `100 <= get_device_sm() < 120` becomes
    `90 <= get_device_sm() < 120` for sm_90 (kept only where that admits no arch in between)."""
    bound = _chain_bound(place, index)
    if bound is None:
        return None
    leaf, op, literal = bound
    values = _values(leaf.side, place.missing)
    if not isinstance(literal, ast.Constant) or not values or not all(isinstance(v, int) for v in values):
        return None
    return _bound_moved(place, literal, values, op in (ast.Gt, ast.GtE), op in (ast.Gt, ast.Lt))


def _extend_chain(place: _Place) -> list[Edit] | None:
    """A check written as a chain of `!=` over one operand gains one more: `major != 9 and major != 10` ->
    `major != 9 and major != 10 and major != 12` (the chain's own style, not a `not in`)."""
    root, leaf_of = place.root, place.leaf_of
    if not (isinstance(root, ast.BoolOp) and _checked(root, leaf_of)):
        return None
    leaves = _leaves(root, leaf_of)
    operands = {place.source[slice(*place.text.span(leaf.operand))] for leaf in leaves}
    if len(operands) != 1 or any(leaf.op is not ast.NotEq or leaf.flipped for leaf in leaves):
        return None
    operand, side = operands.pop().decode("utf-8"), leaves[0].side
    values = [v for v in _values(side, place.missing) if v not in {leaf.value for leaf in leaves}]
    end = place.text.span(root)[1]
    return [Edit(end, end, "".join(f" and {operand} != {v!r}" for v in values).encode())] if values else None


def _add_member_ranges(place: _Place) -> list[Edit] | None:
    """CuTe DSL's arch ranges gain one per target, in ascending order, joined by `or`: `arch >= Arch.sm_103 and
    arch <= Arch.sm_103f` for sm_101 becomes `(arch >= Arch.sm_101 and arch <= Arch.sm_101f) or (arch >=
    Arch.sm_103 and arch <= Arch.sm_103f)` (FlashInfer 2cf8f4cc7), each range written as the one there."""
    root, source, text = place.root, place.source, place.text
    ranges = [root] if member_range(root, text) else []
    if isinstance(root, ast.BoolOp) and isinstance(root.op, ast.Or):
        ranges = list(root.values)
    read = [member_range(node, text) for node in ranges]
    if not ranges or None in read or len({operand for operand, _ in read}) != 1:  # type: ignore[misc]
        return None
    operand = read[0][0]  # type: ignore[index]
    items = {number: source[slice(*text.span(node))].decode("utf-8") for node, (_, number) in zip(ranges, read)}  # type: ignore[misc]
    new = {}
    for arch in place.missing:
        number = arch.major * 10 + arch.minor
        if number not in items:
            new[number] = items[number] = f"{operand} >= Arch.sm_{number} and {operand} <= Arch.sm_{number}f"
    lines = _operand_lines(place, ranges)
    if lines is not None:  # an `or` laid out one operand a line (black's): each new range a line of its own
        numbers = [number for _, number in read]  # type: ignore[misc]
        inserted: dict[int, str] = {}
        for number, item in sorted(new.items()):
            after = [node for node, held in zip(ranges, numbers) if held < number]
            if after:
                at = place.span(after[-1])[1]
                inserted[at] = inserted.get(at, "") + f"{lines[1]}{lines[0]}or ({item})"
            else:  # before the first: it starts the line the first starts, which gains its `or`
                at = place.span(ranges[0])[0]
                inserted[at] = inserted.get(at, "") + f"({item}){lines[1]}{lines[0]}or "
        return [Edit(at, at, text.encode()) for at, text in sorted(inserted.items())]
    written = " or ".join(f"({item})" for _, item in sorted(items.items()))
    start, end = text.span(root)
    parent = place.parents.get(id(root))
    if isinstance(parent, _TIGHTER) and not (isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.Or)):
        written = f"({written})"
    return [Edit(start, end, written.encode())]


def _operand_lines(place: _Place, operands: list[ast.expr]) -> tuple[str, str] | None:
    """(the indentation, the line ending) of an `or` whose operands each start a line of their own, all at one
    column, the second and later after their `or` (black's layout: `(a)` / `or (b)`); None for any other."""
    if len(operands) < 2:
        return None
    data = place.source
    column = None
    for index, node in enumerate(operands):
        start = place.span(node)[0]
        begin = data.rfind(b"\n", 0, start) + 1
        head = data[begin:start]
        lead = head.removesuffix(b"or ") if index else head
        if lead.strip() or (index and not head.endswith(b"or ")) or column not in (None, lead):
            return None
        column = lead
    eol = "\r\n" if data[: place.span(operands[0])[0]].endswith(b"\r\n" + (column or b"")) else "\n"
    return (column or b"").decode("utf-8"), eol


def _add_pair(place: _Place, pair: str) -> list[Edit] | None:
    """Admit one (major, minor) of a major the condition reads alone, where admitting the whole major would admit
    more than asked: `target.major != 10` -> `target.major != 10 and (target.major, target.minor) != (12, 0)` (a
    check gains a refusal to refuse), `major == 10` -> `major == 10 or (major, minor) == (12, 0)`."""
    root, leaf_of = place.root, place.leaf_of
    checked = _checked(root, leaf_of)
    if isinstance(root, ast.Compare):
        leaf = leaf_of(root)
        if leaf is None or leaf.op not in (*_EQUAL, *_CHECKED):
            return None
    elif not (checked or isinstance(root, ast.BoolOp) and isinstance(root.op, ast.Or) and _pure(root, leaf_of)):
        return None
    values = _values(None, place.missing)
    if len(values) == 1:
        term = f"{pair} {'!=' if checked else '=='} {values[0]!r}"
    else:
        opening, closing = place.brackets(numbers=False)
        term = f"{pair} {'not in' if checked else 'in'} {opening}{', '.join(map(repr, values))}{closing}"
    start, end = place.text.span(root)
    parent = place.parents.get(id(root))
    joiner = " and " if checked else " or "
    # an `and` binds tighter than any `and`/`or` around it, an `or` only than an `or`
    loose = isinstance(parent, ast.BoolOp) and (checked or isinstance(parent.op, ast.Or))
    if loose or not isinstance(parent, _TIGHTER):
        return [Edit(end, end, f"{joiner}{term}".encode())]
    return [Edit(start, start, b"("), Edit(end, end, f"{joiner}{term})".encode())]


def _check_to_bound(place: _Place) -> list[Edit] | None:
    """A check for one capability (`major * 10 + minor`) that must let through every arch above it, across majors,
    becomes the lower bound upstream writes, not a list of every capability: `if sm_version != 90: return False` ->
    `if sm_version < 90:` for SM10x, SM11x and SM12x (SGLang 0.5.1.post1). Kept only where that reads as exactly
    what is asked (the code after an exit); a widening within one major keeps the values (`!= 120` -> `not in
    (120, 121)`), and so does a check of the major (`[0] != 10` -> `not in [10, 11, 12]`, FlashInfer beebc6074)."""
    root, leaf_of = place.root, place.leaf_of
    leaf = leaf_of(root) if isinstance(root, ast.Compare) else None
    if leaf is None or leaf.op is not ast.NotEq or leaf.flipped or not isinstance(leaf.value, int) or leaf.strings:
        return None
    assert isinstance(root, ast.Compare)  # a leaf is one
    if leaf.side != "sm":  # majors stay listed: FlashInfer beebc6074 wrote `[0] not in [10, 11, 12]`, not `< 10`
        return None
    if len({arch.major for arch in place.missing} - {leaf.value // 10}) < 2:
        return None
    op_start, value_start = place.text.span(root.left)[1], place.text.span(root.comparators[0])[0]
    between = place.source[op_start:value_start]
    return [Edit(op_start, value_start, between.replace(b"!=", b"<", 1))]


def _exit_move_bound(place: _Place) -> list[Edit] | None:
    """The bound of a condition the code after an exit runs outside of moves past the targets: `if sm < 90:
    return False` lets sm_80 through as `if sm < 80:` (kept only where no arch in between comes through)."""
    root, leaf_of = place.root, place.leaf_of
    leaf = leaf_of(root) if isinstance(root, ast.Compare) else None
    if leaf is None or leaf.op not in _BOUNDS or leaf.value is None or leaf.chain or leaf.members:
        return None
    values = _values(leaf.side, place.missing)
    if not values or type(values[0]) is not type(leaf.value):
        return None
    # the condition holds below an upper bound (`<`, `<=`): the targets must fail it, at or above it
    return _bound_moved(place, leaf.literal, values, leaf.op in (ast.Lt, ast.LtE), leaf.op in (ast.LtE, ast.GtE))


def _exit_drop(place: _Place) -> list[Edit] | None:
    """The comparisons of an `or` before an exit that hold on a target are dropped: `if major < 9 or major == 11:
    raise` lets sm_110 through as `if major < 9: raise`."""
    root = place.root
    if not (isinstance(root, ast.BoolOp) and isinstance(root.op, ast.Or)):
        return None
    refusing = [
        _pure(v, place.leaf_of) and any(_truth(v, arch, place.leaf_of) is True for arch in place.missing)
        for v in root.values
    ]
    if not any(refusing) or all(refusing):
        return None
    return drop_operands([place.span(v) for v in root.values], refusing)


def _negated(root: ast.expr) -> ast.expr | None:
    """What a condition negates with `not`, when it is one (`not (major == 10 and minor == 0)`)."""
    return root.operand if isinstance(root, ast.UnaryOp) and isinstance(root.op, ast.Not) else None


def _add_conjunct(place: _Place) -> list[Edit] | None:
    """An `and` of comparisons one target fails in several gains the target's own, with `or`, each written as its
    comparisons are (`major == 10 and minor == 0` for sm_121: `(... ) or (major == 12 and minor == 1)`)."""
    root = place.root
    if not (isinstance(root, ast.BoolOp) and isinstance(root.op, ast.And) and _pure(root, place.leaf_of)):
        return None
    operands: dict[str, Side] = {}
    for leaf in _leaves(root, place.leaf_of):
        operands.setdefault(place.source[slice(*place.text.span(leaf.operand))].decode("utf-8"), leaf.side)
    if len(set(map(repr, operands.values()))) != len(operands):
        return None
    *heads, last = operands.items()  # the targets that differ only in the last one share a term: `minor in (0, 1)`
    groups: dict[tuple, list] = {}
    for arch in place.missing:
        groups.setdefault(tuple(_have(arch, side) for _, side in heads), []).append(_have(arch, last[1]))
    opening, closing = place.brackets(numbers=True)
    terms = []
    for values, lasts in groups.items():
        tail = f"== {lasts[0]!r}" if len(lasts) == 1 else f"in {opening}{', '.join(map(repr, sorted(lasts)))}{closing}"
        terms.append(" and ".join([*(f"{o} == {v!r}" for (o, _), v in zip(heads, values)), f"{last[0]} {tail}"]))
    start, end = place.span(root)
    written = place.source[start:end].decode("utf-8")
    return [Edit(start, end, " or ".join(f"({t})" for t in [written, *terms]).encode())]


def _add_point(place: _Place) -> list[Edit] | None:
    """`_add_conjunct` for an `and` of equalities alone (`major == 10 and minor == 0`: a point, not a range, whose
    bounds move instead)."""
    if not all(leaf.op in _EQUAL for leaf in _leaves(place.root, place.leaf_of)):
        return None
    return _add_conjunct(place)


def _for_a_family(function: str, targets: tuple[Arch, ...]) -> bool:
    """Whether the condition decides a predicate named for a family target that covers every target
    (`is_sm120f_supported` and sm_121): upstream writes such a predicate over the major alone, so a comparison
    of the minor is dropped rather than extended (ec0178acd: `major == 12 and minor == 0` -> `major == 12`).
    An arch-specific or plain name (`is_sm120a_supported`, `is_sm120_supported`) keeps extending its minors."""
    built = python_predicate.target(function)
    return built.endswith("f") and all(python_predicate.covers(built, arch) for arch in targets)


def widen(
    source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    number_membership: str = "",
) -> list[Edit]:
    """Edits that make the condition admit `targets` too, and no arch it can tell from them; `[]` if it does already.

    Tried in order, each kept only when the rewritten condition, read again,
    admits exactly its archs plus the targets (and what its comparisons
    cannot tell from them: `== 12` admits sm_121 with sm_120): add values to
    an equality or membership, drop the comparisons of an `and` that rule a
    target out, move a bound, add an equality after a bound or in an `or`. In a
    predicate named for a family target (`is_sm120f_supported`), dropping
    comes first: a family is written over the major alone.
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
    if lone is not None and lone.flipped and lone.op not in _BOUNDS and not lone.chain:
        raise CannotWiden(f"line {gate.line}: `{gate.text}` has its value on the left; edit it by hand")
    if any(leaf.members for leaf in _leaves(root, leaf_of)) and not member_range(
        root.values[0] if isinstance(root, ast.BoolOp) and isinstance(root.op, ast.Or) else root, text
    ):
        raise CannotWiden(f"line {gate.line}: `{gate.text}` compares CuTe DSL `Arch` members other than as whole ranges (`arch >= Arch.sm_103 and arch <= Arch.sm_103f`, joined by `or`), the one shape codemod writes them in; edit it by hand")
    scope = tuple(dict.fromkeys((*universe, *targets)))
    exits = gate.detail.get("runs_where") == "false"  # the code after an exit (or a skipif) runs where it fails
    before = _reading(root, leaf_of, scope, exits)
    sides = sorted({repr(leaf.side) for leaf in _leaves(root, leaf_of)})
    leaf_sides = {repr(leaf.side): leaf.side for leaf in _leaves(root, leaf_of)}

    def told(arch: Arch) -> tuple:
        return tuple(_have(arch, leaf_sides[side]) for side in sides)

    wanted = {told(arch) for arch in targets}
    expected = before.admitted | {arch for arch in scope if told(arch) in wanted}
    missing = tuple(a for a in targets if not before.admits(a))
    place = _Place(source, text, tree, parents, root, leaf_of, missing, number_membership)
    rewrites: list[tuple[Callable[[_Place], list[Edit] | None], frozenset[Arch]]] = [
        (rewrite, expected) for rewrite in (_extend, _extend_chain, _drop, _move_bound, _add_disjunct, _add_point)
    ]
    if _for_a_family(gate.context, targets):
        rewrites.insert(0, rewrites.pop(2))  # _drop first
    # a range the targets adjoin moves its bound: in an `or`, before an equality gains them; alone, after a drop
    adjoin = 0 if isinstance(root, ast.BoolOp) and isinstance(root.op, ast.Or) else 3
    if any(leaf.members for leaf in _leaves(root, leaf_of)):  # CuTe DSL `Arch` ranges: only ranges are written
        rewrites = [(_add_member_ranges, before.admitted | set(targets))]
    elif exits and _negated(root) is not None:  # `if not (major == 10 and minor == 0): skip`: what it negates widens
        inner = _negated(root)
        rewrites = [
            (lambda place, rewrite=rewrite: rewrite(replace(place, root=inner)), expected)  # type: ignore[misc]
            for rewrite in (_extend, _drop, _move_bound, _move_range_bound, _add_disjunct, _add_conjunct)
        ]
    elif exits and not _checked(root, leaf_of):  # the code after it must come through: the condition narrows
        rewrites = [(_exit_move_bound, expected), (_exit_drop, expected)]
    elif lone is not None and lone.chain:  # `90 <= sm < 120`: one of its bounds dropped, or refused
        rewrites = [
            (lambda place: _one_bound(place, 0), expected), (lambda place: _one_bound(place, 1), expected),
            (lambda place: _move_chained(place, 0), expected), (lambda place: _move_chained(place, 1), expected),
        ]  # fmt: skip
        rewrites.insert(2, (_move_range_bound, expected))
    else:
        rewrites.insert(adjoin, (_move_range_bound, expected))
    if _checked(root, leaf_of):
        rewrites.insert(0, (_check_to_bound, expected))
    exact = before.admitted | set(targets)
    if expected != exact and gate.detail.get("pair"):  # the major alone would admit more: the pair says which
        rewrites.insert(0, (lambda place: _add_pair(place, gate.detail["pair"]), exact))
    for rewrite, wanted_after in rewrites:
        edits = rewrite(place)
        if not edits:
            continue
        end = gate.end + sum(len(e.text) - (e.end - e.start) for e in edits)
        after = admits(apply_edits(source, edits)[gate.start : end].decode("utf-8"), scope, gate.detail)
        if not after.unknown and after.admitted == wanted_after:
            return wrapped(source, [*edits, *unused_halves(place.source, place.text, place.tree, place.parents, place.root, edits)])  # too long a line split as black does
    plus = ", ".join(a.name for a in targets if not before.admits(a))
    bound = any(leaf.op in _BOUNDS for leaf in _leaves(root, leaf_of))
    raise CannotWiden(
        f"line {gate.line}: no rewrite of `{gate.text}` admits exactly what it admits plus {plus}"
        + (" (moving its bound would admit the archs in between)" if bound else "")
        + "; edit it by hand"
    )
