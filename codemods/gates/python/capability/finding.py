"""Finding python_capability's comparisons in a file: every one of a body (`_found`), the largest
`and`/`or`/`not` around each (`_conditions`), and what the code path each one guards admits (`gates`, for
`scan`). Each comparison is read by `reading`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from dataclasses import replace

from codemods.core.arch import Arch, ArchSet
from codemods.gates import Gate, SourceError
from codemods.gates.python import polarity
from codemods.gates.python.capability.blocks import _BODIES, _holds, nodes_in, wrappers
from codemods.gates.python.capability.locals import REBOUND, capability_locals
from codemods.gates.python.capability.reading import (
    _COMPARE, _FLIPPED, _SIDES, KIND, LeafOf, Side, _Leaf, _leaf, _pure, _truth, _unreadable, member_range,
)  # fmt: skip
from codemods.gates.python.python_arch_or import aliases
from codemods.gates.python.ast_text import PythonText, assigned_target, ast_of, nested_too_deeply, too_deep


def _parse(source: bytes) -> tuple[PythonText, ast.Module]:
    try:
        return PythonText(source), ast_of(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        if too_deep(exc):
            raise nested_too_deeply(getattr(exc, "lineno", None)) from None
        raise SourceError(f"not valid Python: line {getattr(exc, 'lineno', None)}: {getattr(exc, 'msg', exc)}") from None


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return polarity.parents([tree])


def _found(
    text: PythonText, body: list[ast.stmt], universe, computed: bool,
    readable: dict[int, frozenset[Arch] | None] | None = None, names: Mapping[str, Side] | None = None,
    ranges: dict[int, ast.BoolOp] | None = None,
) -> list[tuple[Gate, _Leaf, int]]:
    """Each capability comparison of `body`, its gate (where it is true) and its scope; `readable` collects
    id -> where each comparison read is true (None: computed), unknown ones included, and `ranges` id -> the
    `and` of each comparison that is one bound of a range (`_ranges`). Read: the comparisons
    of the capability calls, of names bound from them, of arch strings and of the `names` a recipe declares
    (`{"_device_sm": "sm"}`, read as sides)."""
    declared = dict(names or {})
    wrapped = wrappers(text, body)
    declared.update({f"{name}(...)": (None if returns == "pair" else "sm") for name, returns in wrapped.items()})
    compares: dict[int, tuple[ast.Compare, int]] = {}
    ranged: set[int] = set()  # the comparisons of CuTe DSL arch ranges (`member_range`), which widen writes
    conjunctions: list[ast.BoolOp] = []  # every `and`: its two bounds of one subject are one range (`ranges`)
    holds: Callable[[bytes], bool] = _holds
    if wrapped:  # `major, minor = _blackwell_softmax_capability(i)` names no helper: the wrapper's name counts too
        wrapper_re = re.compile(rb"\b(?:%s)\s*\(" % b"|".join(re.escape(name.encode()) for name in sorted(wrapped)))

        def holds(piece: bytes) -> bool:
            return _holds(piece) or bool(wrapper_re.search(piece))

    # (scope, name) -> 0 major, 1 minor, None the pair, "sm", or REBOUND: the locals bound to the capability
    bound = capability_locals(text, body, holds, declared)
    for node, scope in nodes_in(text, body, holds, 0):
        if isinstance(node, ast.Compare):
            compares[id(node)] = (node, scope)
        elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            conjunctions.append(node)
            if member_range(node, text):
                ranged.update(id(value) for value in node.values)  # type: ignore[attr-defined]
    words = {name for _, name in bound} | {re.findall(r"\w+", spelled)[-1] for spelled in declared if re.search(r"\w", spelled)}
    if words:
        pattern = re.compile(rb"\b(?:%s)\b" % b"|".join(re.escape(word.encode()) for word in sorted(words)))
        for node, scope in nodes_in(text, body, lambda piece: bool(pattern.search(piece)), 0):
            if isinstance(node, ast.Compare):
                compares.setdefault(id(node), (node, scope))
            elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
                conjunctions.append(node)  # `_ranges` reads each once: a second time adds the same ids

    def side_of(scope: int, name: str) -> Side:
        return bound.get((scope, name), bound.get((0, name), declared.get(name, "")))

    def bound_in(scope: int) -> Callable[[str], Side]:  # a rebound local reads as a capability (then unknown)
        return lambda name: "sm" if (side := side_of(scope, name)) == REBOUND else side

    read = {id(node): _leaf(node, bound_in(scope)) for node, scope in compares.values()}
    for key, leaf in read.items():
        rebound = leaf and next((name for name, _ in leaf.names if side_of(compares[key][1], name) == REBOUND), "")
        if leaf and rebound:
            read[key] = replace(leaf, value=None, rebound=rebound)
    # The subject a comparison with a CuTe DSL `Arch.sm_100f` reads as the arch: compared in the same function with
    # anything else (`arch >= _ARCH_SM107`, a name bound by `getattr(Arch, "sm_107", ...)`), it compares the arch
    # with a value codemod cannot read: unknown, never a test that does not depend on the GPU.
    subjects = {
        (compares[key][1], text.data[slice(*text.span(leaf.operand))]) for key, leaf in read.items()
        if leaf is not None and leaf.members and leaf.side == "sm"
    }  # fmt: skip
    for key, leaf in read.items():
        node, scope = compares[key]
        if leaf is None and subjects and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
            for flipped, held in ((False, node.left), (True, node.comparators[0])):
                if (scope, text.data[slice(*text.span(held))]) in subjects:
                    op = _FLIPPED.get(type(node.ops[0]), type(node.ops[0])) if flipped else type(node.ops[0])
                    read[key] = _Leaf(node, "sm", op, None, flipped, members=True)
                    break
    if ranges is not None:
        ranges.update(_ranges(conjunctions, read, text))
    found = []
    for node, scope in compares.values():
        leaf = read[id(node)]
        if leaf is None:
            continue
        side, op, flipped = leaf.side, leaf.op, leaf.flipped
        truth = {arch: _truth(node, arch, lambda _: leaf) for arch in universe}  # where the comparison is true
        admitted = None if None in truth.values() else frozenset(arch for arch, true in truth.items() if true)
        if readable is not None:
            readable[id(node)] = admitted
        detail = {"side": _SIDES[side], "op": op.__name__, "flipped": flipped}
        if leaf.members and id(node) not in ranged:
            detail["members"] = True  # CuTe DSL `Arch.sm_100f` other than in a range: widen writes none (no edit)
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


_LOWER, _UPPER = (ast.Gt, ast.GtE), (ast.Lt, ast.LtE)


def _ranges(conjunctions: list[ast.BoolOp], read: Mapping[int, _Leaf | None], text: PythonText) -> dict[int, ast.BoolOp]:
    """id of each bound -> its `and`, for each `and` of two comparisons that bound one subject from below and
    above (`arch >= Arch.sm_100 and arch <= Arch.sm_100f`, `sm >= 90 and sm < 120`): one range, one gate in `scan`."""
    out: dict[int, ast.BoolOp] = {}
    for conjunction in conjunctions:
        if len(conjunction.values) != 2:
            continue  # `x and sm >= 90 and sm < 120`: a row would show `x` as part of the range
        bounds: dict[bytes, list[_Leaf]] = {}
        for value in conjunction.values:
            leaf = read.get(id(value))
            if leaf is not None and not leaf.chain and issubclass(leaf.op, (*_LOWER, *_UPPER)):
                bounds.setdefault(text.data[slice(*text.span(leaf.operand))], []).append(leaf)
        for pair in bounds.values():
            if len(pair) == 2 and sorted(issubclass(leaf.op, _LOWER) for leaf in pair) == [False, True]:
                out.update((id(leaf.node), conjunction) for leaf in pair)
    return out


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


# ---------------------------------------------------------------- scan: what the code path each comparison guards admits


def gates(text: PythonText, body: list[ast.stmt], universe: tuple[Arch, ...], computed: bool = False) -> list[Gate]:
    """Every capability comparison in `body`; with `computed`, also those with a value it cannot read (unknown).

    Only statements that name a capability call (or a name bound from one, or an arch string) are walked.
    Each gate admits what the code path it guards admits (`_on_paths`: polarity), not where its comparison
    is true (`if sm_version != "sm_120": raise` admits sm_120).
    """
    readable: dict[int, frozenset[Arch] | None] = {}
    ranges: dict[int, ast.BoolOp] = {}
    each = _found(text, body, universe, True, readable, ranges=ranges)
    leaves = {id(leaf.node): leaf for _, leaf, _ in each}
    found: list[tuple[Gate, ast.expr, int]] = []
    for gate, leaf, scope in each:
        node: ast.expr = leaf.node
        conjunction = ranges.get(id(node))
        if conjunction is not None and id(conjunction) in readable:
            continue  # its other bound: a range is one gate
        if conjunction is not None:  # where both its bounds hold
            bounds = [leaves[id(value)] for value in conjunction.values if id(value) in ranges]
            held = [archs for bound in bounds if (archs := readable[id(bound.node)]) is not None]
            both = frozenset.intersection(*held) if len(held) == len(bounds) else None
            readable[id(conjunction)] = both
            start, end = text.span(conjunction)
            detail = {**gate.detail, "op": "range"}
            detail.pop("unknown", None)
            if both is None:
                detail["unknown"] = next(_unreadable(bound) for bound in bounds if readable[id(bound.node)] is None)
            gate = replace(
                gate, start=start, end=end, line=conjunction.lineno, text=text.data[start:end].decode("utf-8"),
                admits=ArchSet(universe, both) if both is not None else ArchSet(universe, frozenset(), frozenset(universe)),
                detail=detail,
            )  # fmt: skip
            node = conjunction
        if "unknown" in gate.detail and not computed:
            continue
        found.append((gate, node, scope))
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


def _checks_for(test: ast.expr) -> bool:
    """Whether a test is a negated check for the values it names (`major != 12`, `cap not in [10, 12]`, `not
    (major == 12)`, `major != 12 or minor != 0`): read as `not P` is for a predicate (gates/python/polarity.early_value)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return True
    if isinstance(test, ast.BoolOp):
        return all(_checks_for(value) for value in test.values)
    return isinstance(test, ast.Compare) and all(isinstance(op, (ast.NotEq, ast.NotIn)) for op in test.ops)


def _on_paths(
    found: list[tuple[Gate, ast.expr, int]], body: list[ast.stmt], readable: dict[int, frozenset[Arch] | None],
    universe: tuple[Arch, ...],
) -> list[tuple[Gate, ast.expr, int]]:
    """Each readable comparison's gate admits what the code path it guards admits (`polarity`): `if cap != 9:
    raise` admits 9, `skipif(cap[0] not in [10, 12])` 10 and 12, the comparisons of one test the same archs."""
    lines = {node.lineno for _, node, _ in found}
    def first(stmt: ast.stmt) -> int:
        return min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])

    tops = [stmt for stmt in body if any(first(stmt) <= line <= (stmt.end_lineno or stmt.lineno) for line in lines)]
    up = polarity.parents(tops)
    out = []
    for gate, node, scope in found:
        if readable.get(id(node)) is None:
            out.append((gate, node, scope))
            continue
        test, runs = polarity.need(node, up)
        statement = up.get(id(test))
        # only a body that does nothing but return (a bypass): `if major != 0: run(); return True` runs its body
        early = None
        if isinstance(statement, ast.If) and len(statement.body) == 1 and _checks_for(test):
            early = polarity.early_value(statement)
        if early is not None:  # `if major != 12: return True`: the code after is 12's path, the others get True
            runs = False
        unread = any(isinstance(n, ast.Compare) and id(n) in readable and readable[id(n)] is None for n in ast.walk(test))
        admitted, unknown = set(), set()
        for arch in universe:

            def leaf(operand: ast.expr, arch: Arch = arch) -> bool | None:
                archs = readable.get(id(operand))
                return None if archs is None else arch in archs

            result = polarity.value(test, leaf)
            if result is runs or (result is None and not unread):
                admitted.add(arch)  # an operand that does not depend on the GPU may let it through
            elif result is None:
                unknown.add(arch)
        detail = {**gate.detail, "runs_where": "true" if runs else "false"}
        if early is not None:
            detail["returns_early"] = early
        if test is not node:
            detail["test"] = ast.unparse(test)
        used = polarity.use(test, up)  # a test that guards no code path: a choice between values, or a value
        if used is not None:
            detail[used[0]] = used[1]
            target = assigned_target(test, up)
            if target and not aliases(target, scope != 0):  # what a change names to select it (not a predicate's definition)
                detail["assigns"] = target
        out.append((replace(gate, admits=ArchSet(universe, frozenset(admitted), frozenset(unknown)), detail=detail), node, scope))
    return out
