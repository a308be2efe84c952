"""`or`s of one function called with an arch number: `has_arch(100) or has_arch(103)`.

FlashInfer's CUTLASS kernel generator asks, for each arch family, whether the
build targets one of its archs, with a helper given the arch as major * 10 +
minor (`has_arch(100)`: "100", "100-real", "100f" or "100f-real" is in the
build's list), and generates that family's kernels where it does:

    operations += generate_sm120_operations(has_arch(120) or has_arch(121))
    operations += generate_sm100_operations(has_arch(100) or has_arch(103))

A gate of this kind is a call of the function (`call`, default KNOWN_CALLS)
with one integer literal, or a run of such calls in an `or` (the whole `or`,
or its consecutive operands that are such calls); it admits the archs
its numbers name, whatever variant: capabilities (`has_arch(90)`), or, when
every number is below 20, majors (`has_major(9)`: every arch of major 9), as
python_arch_list reads a list; a mix of the two is unknown and refused. Where it stands does not matter: a call's
argument, an `if` test, an assignment. Selectors: `call`, `function`, and `assigns` (the gate is in the value
assigned to that target: `operations += generate_sm120_operations(has_arch(120))` is `assigns = "operations"`).

`widen` adds one call per target number the gate lacks, spelled like its
neighbour, where its number sorts (`has_arch(100) or has_arch(103)` gains
`or has_arch(107)` for sm_107, as upstream 290c09186 wrote it; 20435b409 wrote
`has_arch(100)` -> `has_arch(100) or has_arch(103)`), in parentheses when the
gate is an operand of an `and` or `not`; a line grown past the file's line
length is split as black splits it (`python.layout.wrap.wrapped`).
"""

from __future__ import annotations

import ast
import re

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.gates import CannotWiden, Edit, Gate
from codemods.gates.python.ast_text import ASSIGNMENTS, PythonText, ast_of, called
from codemods.gates.python.layout.wrap import wrapped

KIND = "python_arch_call"

# The functions `scan` reads as given an arch number (a recipe names any other with `call`).
KNOWN_CALLS = ("has_arch",)
PREFILTER = re.compile(rb"\b(?:%s)\s*\(\s*\d" % b"|".join(name.encode() for name in KNOWN_CALLS))


def check_selector(name: str, value) -> str:
    return "" if isinstance(value, str) and value else f"{name!r} must be a string"


def _code(arch: Arch) -> int:
    return arch.major * 10 + arch.minor


def _number(node: ast.AST, calls: tuple[str, ...]) -> int | None:
    """N for `call(N)` (or `obj.call(N)`), one positive integer literal, no keywords; else None."""
    if not (isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords):
        return None
    arg = node.args[0]
    if called(node) in calls and isinstance(arg, ast.Constant) and type(arg.value) is int and arg.value > 0:
        return arg.value
    return None


def _majors(numbers: list[int]) -> bool | None:
    """Whether the numbers are majors (all below 20, `has_major(9)`), capabilities (all from 20, `has_arch(90)`),
    or, mixed, neither (None), as python_arch_list reads a list's style."""
    small = {n < 20 for n in numbers}
    return None if len(small) > 1 else small.pop()


def _value(arch: Arch, majors: bool) -> int:
    return arch.major if majors else _code(arch)


def _admits(numbers: list[int] | None, universe: tuple[Arch, ...]) -> ArchSet:
    majors = _majors(numbers) if numbers else None
    if numbers is None or majors is None:
        return ArchSet(universe, frozenset(), frozenset(universe))
    return ArchSet(universe, frozenset(arch for arch in universe if _value(arch, majors) in numbers))


def find(
    source: bytes, universe: tuple[Arch, ...] = DEFAULT_ARCHS, tree: ast.Module | None = None, *,
    call: str | None = None, function: str | None = None, assigns: str | None = None,
) -> list[Gate]:
    """Every call of `call` (KNOWN_CALLS without it) given an arch number, or `or` of them, in source order; with
    `function`, only those in that function; with `assigns`, only those in the value assigned to that target
    (`operations += generate_sm120_operations(has_arch(120) or has_arch(121))`: `assigns = "operations"`)."""
    calls = (call,) if call else KNOWN_CALLS
    if not any(name.encode() in source for name in calls):
        return []
    if tree is None:
        try:
            tree = ast_of(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return []
    text = PythonText(source)
    gates: list[Gate] = []
    stack: list[tuple[ast.AST, str, ast.AST | None, str]] = [(tree, "<module>", None, "")]
    while stack:
        node, around, parent, target = stack.pop()
        wanted = function in (None, around) and assigns in (None, target)
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            # each run of calls is one gate (`has_arch(100) or has_arch(103) or other`: what widen makes is found
            # again whole); the other operands are read on their own
            run: list[ast.expr] = []
            for value in [*node.values, None]:
                if value is not None and _number(value, calls) is not None:
                    run.append(value)
                    continue
                if run and wanted:
                    numbers = [_number(v, calls) or 0 for v in run]
                    whole = len(run) == len(node.values)  # the `or` itself, where it stands; else a part of it
                    own, holder = (node, parent) if whole else (None, node)
                    gates.append(_gate(text, run, around, own, holder, numbers, universe, target))
                run = []
                if value is not None:
                    stack.append((value, around, node, target))
            continue
        number = _number(node, calls)
        if number is not None and isinstance(node, ast.Call):
            gates += [_gate(text, [node], around, node, parent, [number], universe, target)] if wanted else []
            continue
        inner = node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else around
        for child in ast.iter_child_nodes(node):
            if isinstance(node, ASSIGNMENTS) and child is node.value:  # what `assigns` selects
                into = ast.unparse(node.targets[0] if isinstance(node, ast.Assign) else node.target)
            else:
                into = "" if isinstance(child, (ast.stmt, ast.Lambda)) else target
            stack.append((child, inner, node, into))
    return sorted(gates, key=lambda gate: gate.start)


def _gate(
    text: PythonText, nodes: list[ast.expr], around: str, own: ast.expr | None, parent: ast.AST | None,
    numbers: list[int], universe: tuple[Arch, ...], target: str = "",
) -> Gate:
    """The gate of the calls `nodes` (one, or a run of an `or`'s operands); `own` the expression they make up when
    it is a node of its own (a call, or the whole `or`), and `parent` what holds it."""
    start, end = text.span(nodes[0])[0], text.span(nodes[-1])[1]
    operand = isinstance(parent, ast.UnaryOp) or (isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And))
    detail: dict = {"numbers": numbers, "operand": operand}
    if target:
        detail["assigns"] = target
    if own is not None and isinstance(parent, ast.Call) and any(arg is own for arg in parent.args):
        # `generate_sm100_operations(has_arch(100) or ...)`: the test is the argument
        detail["passed_to"] = called(parent)
    return Gate(
        kind=KIND, start=start, end=end, line=nodes[0].lineno, text=text.data[start:end].decode("utf-8"),
        admits=_admits(numbers, universe), context=around, detail=detail,
    )  # fmt: skip


def _read(text: str) -> tuple[list[ast.expr], list[int]] | None:
    """The calls of a gate's text and their numbers (any function name: the gate was found with its own)."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    values = node.values if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) else [node]
    names = {called(v) for v in values if isinstance(v, ast.Call)}
    numbers = [_number(v, tuple(names)) for v in values]
    if len(names) != 1 or any(n is None for n in numbers):
        return None
    return values, [n for n in numbers if n is not None]


def admits(text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> ArchSet:
    """The archs a gate's text (`has_arch(100) or has_arch(103)`) admits."""
    read = _read(text)
    return _admits(read[1] if read else None, universe)


def widen(source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> list[Edit]:
    """One call per target number the gate lacks, where its number sorts; `[]` if it admits them all."""
    if source[gate.start : gate.end].decode("utf-8", "replace") != gate.text:
        raise CannotWiden(f"line {gate.line}: the source no longer has this test; find the gates again")
    read = _read(gate.text)
    if read is None:
        raise CannotWiden(f"line {gate.line}: `{gate.text}` is no longer an `or` of one function's calls; find the gates again")
    values, numbers = read
    majors = _majors(numbers)
    if majors is None:
        raise CannotWiden(f"line {gate.line}: `{gate.text}` mixes majors and capabilities; widen it by hand")
    wanted = sorted({_value(arch, majors) for arch in targets} - set(numbers))
    if not wanted:
        return []
    text = PythonText(gate.text.strip().encode())
    offset = gate.start + (len(gate.text) - len(gate.text.lstrip()))
    spans = [text.span(value) for value in values]
    operand = bool(gate.detail.get("operand"))  # `x and has_arch(100)`: `or` binds looser than `and`
    edits: list[Edit] = [Edit(gate.start, gate.start, b"(")] if operand else []
    for number in wanted:
        after = max((i for i, n in enumerate(numbers) if n < number), default=-1)
        model = values[max(after, 0)]
        arg_start, arg_end = text.span(model.args[0])  # type: ignore[attr-defined]
        call_start, call_end = spans[max(after, 0)]
        spelled = text.data[call_start:arg_start] + str(number).encode() + text.data[arg_end:call_end]
        if after >= 0:
            edits.append(Edit(offset + call_end, offset + call_end, b" or " + spelled))
        else:
            edits.append(Edit(offset + call_start, offset + call_start, spelled + b" or "))
    if operand:
        edits.append(Edit(gate.end, gate.end, b")"))
    merged: dict[int, bytes] = {}
    for edit in edits:  # several insertions at one place: one edit, in the order made
        merged[edit.start] = merged.get(edit.start, b"") + edit.text
    return wrapped(source, [Edit(at, at, text) for at, text in sorted(merged.items())])
