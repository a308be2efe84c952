"""Gates in Python files: each kind's own `find` on a copy of the file cut down to the statements that can hold a gate.

`python_arch_list` and `python_arch_or` gates where the bytes pass the kind's
prefilter, found on a copy of the file in which every statement that cannot
hold one is blanked out (same offsets, same lines); `python_capability`
comparisons, read by that kind's module on only the functions that name the
call; JIT specs in a FlashInfer JIT folder (jit_specs); and `cuda_guard`
lines inside string literals (FlashInfer's generators write CUDA from Python).
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from codemods.audit import classify, python_advice
from codemods.audit.prefilter import (
    ARCH_TOKEN,
    JIT_RE,
    PYTHON_PREFILTERS,
    calls_arch,
    declares_min_capability,
    defines_predicates,
    may_hold_arch_map,
    named_or_re,
    python_arch_list,
    python_arch_map,
    python_arch_or,
    python_arch_test,
    python_arch_call,
    python_kinds,
    python_min_capability,
    python_predicate,
)
from codemods.audit.records import Context, FileScan, gate_record, widen_checked
from codemods.plan import dispatch
from codemods.core.arch import Arch, ArchSet
from codemods.core.lazy import LazyModule
from codemods.cpp.lexer import NoComments
from codemods.gates import Gate, SourceError, decode
from codemods.gates.base import Where
from codemods.gates.cpp import cuda_guard
from codemods.gates.python import polarity, tree_index
from codemods.gates.python.predicates import reading
from codemods.gates.python import ast_text
from codemods.gates.python import python_capability
from codemods.gates.python.predicates.reading import Meaning
from codemods.gates.python.python_capability import PythonText, nodes_in

if TYPE_CHECKING:
    from codemods.gates.python import cst_source
    from codemods.jit import specs as jit_specs
else:  # imported on first use: a scan of C sources, or one answered from the cache, needs none of them
    jit_specs = LazyModule("codemods.jit.specs")
    cst_source = LazyModule("codemods.gates.python.cst_source")


def _placed_spec(pruned: cst_source.Pruned, spec: jit_specs.JitSpec) -> jit_specs.JitSpec:
    """A spec found in the pruned text, with the original's lines."""
    gate = spec.gate
    if gate is not None:
        gate = replace(gate, line=pruned.line(gate.line))
    return replace(spec, line=pruned.line(spec.line), gate=gate)


def _jit_names(text: PythonText, tree: ast.Module) -> set[str]:
    """Functions around a `gen_jit_spec` call: their callers give a spec's gate (jit_specs)."""
    functions: list[tuple[int, int, str]] = []
    _functions_in(tree.body, text, functions)
    names = set()
    for match in re.finditer(rb"\bgen_jit_spec\b", text.data):
        around = [f for f in functions if f[0] <= match.start() < f[1]]
        if around:
            names.add(max(around)[2])  # the innermost: the latest start
    return names


def _functions_in(body: list, text: PythonText, functions: list[tuple[int, int, str]]) -> None:
    """The functions defined in the statements, nested ones too: (start, end, name)."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append((*text.span(stmt), stmt.name))
        for name in ("body", "orelse", "finalbody"):
            _functions_in(getattr(stmt, name, None) or [], text, functions)
        for inner in (getattr(stmt, "handlers", None) or []) + (getattr(stmt, "cases", None) or []):
            _functions_in(inner.body, text, functions)


def _find_every(kind, data: bytes, universe: tuple[Arch, ...], meanings: Mapping[str, Meaning] | None = None) -> list[Gate]:
    """Every gate of the kind that scan lists: a kind with a table of known shapes says so with `find_known`;
    the kinds of arch predicates read what each admits from `meanings` (their definitions), not from names."""
    known = getattr(kind, "find_known", None)
    if known is not None:
        return known(data, universe)
    if kind is python_arch_test:  # a predicate stored in a value too (`flag = is_sm120a_supported(dev)`)
        return kind.find(data, universe, meanings, True)
    if kind is python_arch_or:
        return kind.find(data, universe, meanings)
    return kind.find(data, universe)


def _meanings(rel: str, data: bytes, tree: ast.Module | None, context: Context) -> Mapping[str, Meaning] | None:
    """What each predicate this file can use admits: the project's, then the file's own definitions."""
    if context.meanings is None:
        return None
    own = reading.read_tree(tree, rel, context.meanings) if tree is not None else reading.read(data, rel, context.meanings)
    return {**context.meanings, **own} if own else context.meanings


def analyse_python(rel: str, data: bytes, context: Context, in_jit: bool) -> FileScan:
    decode(data)
    out = FileScan(rel)
    kinds = python_kinds(data)
    want_specs = in_jit and b"gen_jit_spec" in data
    want_capability = python_capability.may_hold(data)
    in_strings = cuda_guard.guards(data, NoComments(), context.universe, "cuda") if ARCH_TOKEN in data else []
    want_definitions = defines_predicates(data) or may_hold_arch_map(data) or declares_min_capability(data) or calls_arch(data)
    if not (kinds or want_specs or want_capability or in_strings or want_definitions):
        return out
    out.parsed = True
    if want_capability and not (kinds or want_specs or in_strings or want_definitions):
        blocks = python_capability.blocks(data)
        if blocks is not None:  # the functions around each call, parsed alone
            found = python_capability.gates(*blocks, context.universe)
            out.gates = _records(rel, data, None, found, context.arch)
            return out
    try:
        tree = ast_text.ast_of(data)  # UTF-8, as every position is read (a `# coding:` line does not change it)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        if ast_text.too_deep(exc):  # never handed to libcst, whose parser crashes on it
            raise ast_text.nested_too_deeply(getattr(exc, "lineno", None)) from None
        if not kinds and not want_specs:
            line = getattr(exc, "lineno", None)
            raise SourceError(f"not valid Python: line {line}: {getattr(exc, 'msg', exc)}") from None
        # ast may not know newer syntax libcst does; libcst decides (and says what is wrong).
        meanings = _meanings(rel, data, None, context) if _reads_predicates(kinds) else None
        found = [gate for kind in kinds for gate in _find_every(kind, data, context.universe, meanings)]
        out.gates = [gate_record(rel, gate, context.arch) for gate in found]
        if want_specs:
            out.specs = jit_specs.find(data, context.universe)
        return out
    text = PythonText(data)
    gates: list[Gate] = []
    meanings = None
    if python_arch_list in kinds:
        gates += python_arch_list.find_known(data, context.universe, tree)
        kinds = [kind for kind in kinds if kind is not python_arch_list]
    if kinds or want_specs:
        patterns = [prefilter for kind, prefilter in PYTHON_PREFILTERS if kind in kinds]
        if python_arch_or in kinds:
            patterns.append(named_or_re())
        names = _jit_names(text, tree) if want_specs else set()
        names_re = re.compile(rb"\b(?:%s)\b" % b"|".join(re.escape(n.encode()) for n in sorted(names))) if names else None

        def wanted(piece: bytes, stmt: ast.stmt, in_function: bool) -> bool:
            if any(pattern.search(piece) for pattern in patterns):
                return True
            if not want_specs:
                return False
            if b"gen_jit_spec" in piece:
                return True
            # jit_specs reads a spec's paths, lists and flags in the function that makes or gates it, and
            # callers by name from functions: statements outside functions give it nothing else.
            if not in_function and not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                return False
            return bool(JIT_RE.search(piece)) or (names_re is not None and bool(names_re.search(piece)))

        pruned = cst_source.Pruned(text, tree, wanted)
        meanings = _meanings(rel, data, tree, context) if _reads_predicates(kinds) else None
        for kind in kinds:
            gates += [pruned.gate(gate) for gate in _find_every(kind, pruned.source, context.universe, meanings)]
        if want_specs:
            out.specs = [_placed_spec(pruned, spec) for spec in jit_specs.find(pruned.source, context.universe)]
    if python_arch_test in kinds:
        gates = _arch_test_paths(text, tree, gates)
    if want_capability:
        gates += python_capability.gates(text, tree.body, context.universe)
    if in_strings:
        gates += _string_guards(text, tree, in_strings)
    # an `a() or b()` of predicates is read by python_arch_or and again by python_arch_test: one gate, listed once
    # ... and `not (a() or b())` by python_arch_test around python_arch_or's `(a() or b())`: listed once, as the or
    spans = {(gate.start, gate.end) for gate in gates if gate.kind == python_arch_or.KIND}
    gates = [gate for gate in gates if not (gate.kind == python_arch_test.KIND and _holds_or(text, gate, spans))]
    gates.sort(key=lambda gate: (gate.line, gate.start))
    out.gates = _records(rel, data, (text, tree), gates, context.arch, context.deliberate, meanings)
    if want_definitions:
        definitions = _definitions(rel, data, tree, context)
        # a predicate's deciding `return major == 12 and minor == 0` is read once, as the predicate it defines
        # (python_predicate knows the target it is named for), not again as the capability comparisons in it
        deciding = {record["line"] for record in definitions if record["kind"] == "python_predicate"}
        out.gates = [g for g in out.gates if not (g["kind"] == "python_capability" and g["line"] in deciding)]
        out.gates += definitions
        out.gates.sort(key=lambda record: record["line"])
    return out


def _records(
    rel: str, data: bytes, parsed: tuple[PythonText, ast.Module] | None, gates: list[Gate], arch: Arch,
    deliberate: tuple[tuple[str, str], ...] = (), meanings: Mapping[str, Meaning] | None = None,
) -> list[dict]:
    """The gates' records, each with what `arch` gets there read from the statement holding it
    (audit.python_advice) when it excludes the arch; the file is parsed whole only then. A gate deciding an
    `if`/`elif` arm that a later arm of the chain takes `arch` in is needs-human, by the rule `codemod run`
    refuses it with (plan.dispatch)."""
    if parsed is None and any(gate.admits.admits(arch) is False for gate in gates):
        try:
            parsed = PythonText(data), ast_text.ast_of(data)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            parsed = None
    paths = python_advice.advise(*parsed, gates, arch, deliberate) if parsed is not None else {}
    records: list[dict] = []
    found: dict = {}  # the kinds' finds of this file, for run's widen (widen_checked)
    where = Where(rel, meanings)
    for i, gate in enumerate(gates):
        path = paths.get(i)
        if parsed is not None and gate.admits.admits(arch) is False and b"elif" in data[gate.end :]:
            arm = dispatch.later_arm(data, gate, (arch,), gates, parsed[1], parsed[0])
            if arm is not None:
                path = classify.Path(classify.FALLBACK, arm.reason(rel), arm.line)
                paths.pop(i, None)
        records.append(widen_checked(gate_record(rel, gate, arch, path), gate, data, arch, where, found))
    for i in paths:
        records[i][python_advice.ADVISED] = True
    return records


def _definitions(rel: str, data: bytes, tree: ast.Module, context: Context) -> list[dict]:
    """The gates a definition makes for every user: an arch predicate's deciding `return` (python_predicate), an
    arch-keyed map whose lookup fails for a missing arch (python_arch_map), each with what the arch gets there;
    a quantization method's minimum capability (python_min_capability); and the calls of a function given an
    arch number (python_arch_call), read in the same pass."""
    arch, universe = context.arch, context.universe
    records = []
    for gate in python_predicate.find(data, universe, context.meanings, tree, rel):
        target = gate.detail.get("target")
        covers = python_predicate.covers(target, arch) if target else None
        path = classify.predicate_path(gate.context, covers, gate.admits.names(), arch)
        path = python_advice.definition_path(data, tree, gate, path, arch)  # "excludes SM121" over the def
        records.append(gate_record(rel, gate, arch, path))
    for gate in python_arch_map.find(data, universe, tree):
        if gate.detail.get("table"):
            records.append(gate_record(rel, gate, arch, classify.capability_table_path(gate.context, arch)))
            continue
        reader = classify.lookup_path if gate.detail["map"] is not None else classify.table_path
        records.append(gate_record(rel, gate, arch, reader(gate.context, gate.detail["lookup"], arch)))
    for gate in python_min_capability.find(data, universe, tree):
        records.append(gate_record(rel, gate, arch))
    # `has_arch(100) or has_arch(103)`; vLLM's `current_platform.has_device_capability(100)`, read from its Platform,
    # is a run-time test: what the arch gets there is read from its statement, as for the other Python gates
    calls = python_arch_call.find(data, universe, tree, context.meanings)
    records += [widen_checked(gate_record(rel, gate, arch), gate, data, arch, Where(rel, context.meanings))
                for gate in calls if not gate.detail.get("numbered")]
    numbered = [gate for gate in calls if gate.detail.get("numbered")]
    if numbered:
        records += _records(rel, data, (PythonText(data), tree), numbered, arch, context.deliberate, context.meanings)
    return records


_NEGATED_SHAPES = ("not", "not_or", "and_not")  # python_arch_test's shapes whose test holds where no predicate does


def _arch_test_paths(text: PythonText, tree: ast.Module, gates: list[Gate]) -> list[Gate]:
    """A predicate test (python_arch_test, which reads `not P` as a check for P) reports what the code it guards
    admits (gates/python/polarity): `if P: raise` admits the archs P does not, `if not P: fallback()` the fallback's;
    an operand of an `and` under an exit excludes nothing by itself (the other operands may let an arch through)."""
    statements = [
        (text.span(node.test), node) for node in tree_index.index(tree).of_type(ast.If, ast.While, ast.Assert, ast.IfExp)
    ]
    out = []
    up: dict[int, ast.AST] | None = None  # the parents, walked for a body that may set an exit flag only
    for gate in gates:
        if gate.kind != "python_arch_test":
            out.append(gate)
            continue
        around = [(span, node) for span, node in statements if span[0] <= gate.start and gate.end <= span[1]]
        if not around:
            out.append(gate)
            continue
        (start, end), statement = max(around, key=lambda item: item[0][0])
        if up is None and isinstance(statement, ast.If) and statement.body and isinstance(statement.body[-1], ast.Assign):
            up = polarity.parents([tree])
        runs = polarity.statement_path(statement, up)
        whole = text.data[start:end].strip(b"() \t\r\n") == text.data[gate.start : gate.end].strip(b"() \t\r\n")
        holds = gate.detail.get("shape") not in _NEGATED_SHAPES  # the test holds where the predicates do
        detail = {**gate.detail}
        early = None if holds or not whole else polarity.early_value(statement)
        if early is not None:  # `if not P(): return True`: the code after is P's path, the others get True
            runs, detail["returns_early"] = False, early
        admits, universe = gate.admits, gate.admits.universe
        if not runs and not whole:
            admits = ArchSet(universe, frozenset(universe) - admits.unknown, admits.unknown)
        elif runs != holds:
            admits = ArchSet(universe, frozenset(universe) - admits.admitted - admits.unknown, admits.unknown)
        out.append(replace(gate, admits=admits, detail={**detail, "runs_where": "true" if runs else "false"}))
    return out


def _holds_or(text: PythonText, gate: Gate, spans: set[tuple[int, int]]) -> bool:
    """Whether a python_arch_test gate is an or-chain's span, or `not` (...) of one."""
    if (gate.start, gate.end) in spans:
        return True
    inner = text.data[gate.start : gate.end]
    if not inner.startswith(b"not"):
        return False
    rest = gate.start + 3
    while rest < gate.end and text.data[rest : rest + 1] in b" \t\r\n":
        rest += 1
    return (rest, gate.end) in spans


def _reads_predicates(kinds: list) -> bool:
    return python_arch_or in kinds or python_arch_test in kinds


def _string_guards(text: PythonText, tree: ast.Module, candidates: list[Gate]) -> list[Gate]:
    """The cuda_guard lines that lie inside Python string literals (CUDA source written by a generator)."""
    inside: list[tuple[int, int]] = []
    for node, _ in nodes_in(text, tree.body, lambda piece: ARCH_TOKEN in piece, 0):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and (node.end_lineno or 0) > node.lineno:
            inside.append(text.span(node))
    if not inside:
        return []
    inside.sort()
    starts = [span[0] for span in inside]
    data = text.data
    gates = []
    for gate in candidates:
        i = bisect.bisect_right(starts, gate.start) - 1
        line_start = data.rfind(b"\n", 0, gate.start) + 1
        if i >= 0 and inside[i][0] < line_start and gate.end <= inside[i][1]:
            gates.append(gate)
    return gates
