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

vLLM's platform predicates are such calls too (`current_platform.has_device_capability(100)`,
`is_device_capability(90)`, `is_device_capability_family(100)`), but each means what its definition
in vLLM's Platform class says, read by `python.predicates.reading` (`meanings`, keyed
`.has_device_capability(100)`), never what the name suggests: `has_device_capability(100)` admits
every capability from 10.0 on, `is_device_capability_family(100)` every 10.x. An `or` of them may
mix the three. Widening such a gate adds the one call, spelled like an operand of the `or` (its
function, its object), that admits the most targets and nothing beyond them and what the gate
admits already (`is_device_capability_family(100) or is_device_capability(90)` gains
`or current_platform.is_device_capability_family(120)` for SM12x); where no call does, it refuses.

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

from collections.abc import Mapping

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.gates import CannotWiden, Edit, Gate
from codemods.gates.python.ast_text import ASSIGNMENTS, PythonText, ast_of, called
from codemods.gates.python.layout.wrap import wrapped
from codemods.gates.python.predicates.evaluation import Meaning

KIND = "python_arch_call"

# The functions `scan` reads as given an arch number (a recipe names any other with `call`).
KNOWN_CALLS = ("has_arch",)
PREFILTER = re.compile(rb"\b(?:%s)\s*\(\s*\d" % b"|".join(name.encode() for name in KNOWN_CALLS))
# vLLM's numbered platform predicates (their names come from the project's meanings; this only finds the files)
NUMBERED_PREFILTER = re.compile(rb"\b\w*_capability\w*\s*\(\s*\d")


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


def numbered(meanings: Mapping[str, Meaning] | None) -> tuple[str, ...]:
    """The functions `meanings` reads as given a capability number (`.has_device_capability(100)`: vLLM's)."""
    return tuple(dict.fromkeys(key[1 : key.index("(")] for key in meanings or () if key.startswith(".") and key.endswith(")")))


def _callee(node: ast.expr) -> str:
    """The name a call of the gate calls (`is_device_capability` of `current_platform.is_device_capability(90)`)."""
    return called(node) if isinstance(node, ast.Call) else ""


def _meaning(name: str, number: int, meanings: Mapping[str, Meaning] | None) -> Meaning | None:
    return (meanings or {}).get(f".{name}({number})")


def find(
    source: bytes, universe: tuple[Arch, ...] = DEFAULT_ARCHS, tree: ast.Module | None = None,
    meanings: Mapping[str, Meaning] | None = None, *,
    call: str | None = None, function: str | None = None, assigns: str | None = None,
) -> list[Gate]:
    """Every call of `call` (KNOWN_CALLS and the numbered predicates of `meanings` without it) given an arch
    number, or `or` of them, in source order; with `function`, only those in that function; with `assigns`, only
    those in the value assigned to that target (`operations += generate_sm120_operations(has_arch(120) or
    has_arch(121))`: `assigns = "operations"`)."""
    calls = (call,) if call else KNOWN_CALLS + numbered(meanings)
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
                    gates.append(_gate(text, run, around, own, holder, numbers, universe, target, meanings))
                run = []
                if value is not None:
                    stack.append((value, around, node, target))
            continue
        number = _number(node, calls)
        if number is not None and isinstance(node, ast.Call):
            gates += [_gate(text, [node], around, node, parent, [number], universe, target, meanings)] if wanted else []
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
    numbers: list[int], universe: tuple[Arch, ...], target: str = "", meanings: Mapping[str, Meaning] | None = None,
) -> Gate:
    """The gate of the calls `nodes` (one, or a run of an `or`'s operands); `own` the expression they make up when
    it is a node of its own (a call, or the whole `or`), and `parent` what holds it."""
    start, end = text.span(nodes[0])[0], text.span(nodes[-1])[1]
    operand = isinstance(parent, ast.UnaryOp) or (isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And))
    detail: dict = {"numbers": numbers, "operand": operand, "calls": [_callee(n) for n in nodes]}
    if target:
        detail["assigns"] = target
    if any(_meaning(name, number, meanings) for name, number in zip(detail["calls"], numbers)):
        detail["numbered"] = True  # a platform predicate (vLLM's), read from its definition: a run-time test
    if own is not None and isinstance(parent, ast.Call) and any(arg is own for arg in parent.args):
        # `generate_sm100_operations(has_arch(100) or ...)`: the test is the argument
        detail["passed_to"] = called(parent)
    return Gate(
        kind=KIND, start=start, end=end, line=nodes[0].lineno, text=text.data[start:end].decode("utf-8"),
        admits=_admits_calls(detail["calls"], numbers, universe, meanings), context=around, detail=detail,
    )  # fmt: skip


def _admits_calls(names: list[str], numbers: list[int], universe: tuple[Arch, ...], meanings: Mapping[str, Meaning] | None) -> ArchSet:
    """What calls admit: each one's meaning where `meanings` reads its function (vLLM's predicates), the numbers
    as archs where it reads none of them; unknown for a mix."""
    read = [_meaning(name, number, meanings) for name, number in zip(names, numbers)]
    if all(m is None for m in read):
        return _admits(numbers, universe)
    if any(m is None or not m.known for m in read):
        return ArchSet(universe, frozenset(), frozenset(universe))
    return ArchSet(universe, frozenset(a for m in read if m is not None for a in m.admitted(universe)))


def _read(text: str, several: bool = False) -> tuple[list[ast.expr], list[int]] | None:
    """The calls of a gate's text and their numbers (any function name: the gate was found with its own; several
    names only when `several`, for numbered predicates)."""
    try:  # operands of an `or` on several lines parse only in parentheses, which `widen` spans count with
        node = ast.parse(f"({text.strip()})", mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    values = node.values if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) else [node]
    names = {called(v) for v in values if isinstance(v, ast.Call)}
    numbers = [_number(v, tuple(names)) for v in values]
    if (len(names) != 1 and not several) or any(n is None for n in numbers):
        return None
    return values, [n for n in numbers if n is not None]


def admits(text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS, meanings: Mapping[str, Meaning] | None = None) -> ArchSet:
    """The archs a gate's text (`has_arch(100) or has_arch(103)`) admits."""
    read = _read(text, several=bool(numbered(meanings)))
    if read is None:
        return _admits(None, universe)
    return _admits_calls([_callee(v) for v in read[0]], read[1], universe, meanings)


def widen(
    source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    meanings: Mapping[str, Meaning] | None = None,
) -> list[Edit]:
    """One call per target number the gate lacks, where its number sorts; `[]` if it admits them all."""
    if source[gate.start : gate.end].decode("utf-8", "replace") != gate.text:
        raise CannotWiden(f"line {gate.line}: the source no longer has this test; find the gates again")
    names = gate.detail.get("calls") or []
    if any(_meaning(name, number, meanings) is not None for name, number in zip(names, gate.detail.get("numbers", []))):
        return _widen_numbered(source, gate, targets, universe, meanings or {})
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
    text = PythonText(f"({gate.text.strip()})".encode())
    offset = gate.start + (len(gate.text) - len(gate.text.lstrip())) - 1  # the `(` _read parsed it in
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


def _widen_numbered(
    source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...], meanings: Mapping[str, Meaning]
) -> list[Edit]:
    """Numbered predicates: one call, spelled like an operand, for the targets the gate lacks (see the module)."""
    read = _read(gate.text, several=True)
    if read is None:
        raise CannotWiden(f"line {gate.line}: `{gate.text}` is no longer an `or` of calls given a number; find the gates again")
    values, numbers = read
    names = [_callee(v) for v in values]
    have = _admits_calls(names, numbers, universe, meanings)
    if have.unknown:
        raise CannotWiden(f"line {gate.line}: `{gate.text}` calls a function whose meaning was not read; widen it by hand")
    wanted = frozenset(targets) - have.admitted
    if not wanted:
        return []
    allowed = wanted | have.admitted
    best: tuple[int, int, str, int] | None = None  # (targets covered, -archs admitted, name, number)
    for name in dict.fromkeys(names):
        for arch in sorted(wanted, key=lambda a: a.code):
            meaning = _meaning(name, arch.code, meanings)
            if meaning is None or not meaning.known:
                continue
            admitted = meaning.admitted(universe)
            if admitted - allowed:
                continue  # it would admit an arch nobody asked for
            candidate = (len(admitted & wanted), -len(admitted), name, arch.code)
            if best is None or candidate[:2] > best[:2]:
                best = candidate
    if best is None or best[0] < len(wanted):
        missing = ", ".join(a.name for a in sorted(wanted, key=lambda a: a.code))
        raise CannotWiden(
            f"line {gate.line}: no call of {', '.join(dict.fromkeys(names))} with one number admits {missing} and no "
            "arch beyond them; widen it by hand"
        )
    _, _, name, number = best
    text = PythonText(f"({gate.text.strip()})".encode())
    offset = gate.start + (len(gate.text) - len(gate.text.lstrip())) - 1  # the `(` _read parsed it in
    model = values[names.index(name)]
    call_start, call_end = text.span(model)
    arg_start, arg_end = text.span(model.args[0])  # type: ignore[attr-defined]
    spelled = text.data[call_start:arg_start] + str(number).encode() + text.data[arg_end:call_end]
    last_end = offset + text.span(values[-1])[1]
    # the separator the `or` is written with (`\n            or ` in a chain one operand a line), else ` or `
    joint = text.data[text.span(values[-2])[1] : text.span(values[-1])[0]] if len(values) > 1 else b" or "
    before, after = source[: gate.start].rstrip()[-1:], source[gate.end :].lstrip()[:1]
    operand = bool(gate.detail.get("operand")) and (before, after) != (b"(", b")")  # parentheses already written
    edits = [Edit(gate.start, gate.start, b"(")] if operand else []
    edits.append(Edit(last_end, last_end, joint + spelled + (b")" if operand else b"")))
    return wrapped(source, edits)
