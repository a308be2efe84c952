"""Gates in C, C++ and CUDA files: cuda_guard lines found with byte searches, cpp_runtime_check comparisons, widenability.

Every `#if`/`#elif`/`#ifdef`-style line naming an arch macro, continued lines
included, outside comments, is a `cuda_guard` gate; its condition is
evaluated as `cuda_guard.admits` does, so a file is never handed whole to
tree-sitter. Where a guard excludes the arch, the #if structure
(cpp.structure) says what the arch gets instead and what blocks widening.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING

from codemods.audit import classify
from codemods.audit.records import Context, FileScan, gate_record, widen_checked
from codemods.core.arch import Arch
from codemods.core.lazy import LazyModule
from codemods.cpp import functions, instructions
from codemods.cpp.lexer import (
    Comments,
    check_balanced,
    find_directives,
    language as c_language,
)
from codemods.cpp.structure import Structure, build_structure, has_family_token
from codemods.gates import Gate, decode
from codemods.gates.base import Where
from codemods.gates.cpp import cuda_guard
from codemods.plan import dispatch

if TYPE_CHECKING:
    from codemods.gates.cpp import cpp_runtime_check
else:  # imported on first use: a scan of C sources, or one answered from the cache, needs none of them
    cpp_runtime_check = LazyModule("codemods.gates.cpp.cpp_runtime_check")


@lru_cache(maxsize=8)
def _with_older(universe: tuple[Arch, ...]) -> tuple[Arch, ...]:
    """The universe and the GPUs before it (sm_70, sm_75): whether a guard is a fallback for older GPUs is read
    from whether it admits them (`< 800` admits no arch of the default universe)."""
    older = tuple(Arch.parse(name) for name in ("sm_70", "sm_75"))
    return tuple(a for a in older if a not in universe) + universe


def analyse_c(rel: str, data: bytes, context: Context, runtime: bool) -> FileScan:
    """The gates of one C file; `runtime`: the finder found a capability comparison in it (cpp_runtime_check)."""
    decode(data)
    comments = Comments(data)
    directives = find_directives(data, comments)
    check_balanced(directives)
    language = c_language(rel)
    gates = cuda_guard.guards(data, comments, context.universe, language)
    out = FileScan(rel, parsed=True)
    checks = cpp_runtime_check.find(data, context.universe, language) if runtime else []
    checked = {gate.start: _check_record(rel, gate, context.arch, data, checks, language) for gate in checks}
    if not gates:
        out.gates = list(checked.values())
        return out
    if not context.hazards:
        out.gates = [
            checked[gate.start] if gate.kind != cuda_guard.KIND else gate_record(rel, gate, context.arch)
            for gate in sorted(gates + checks, key=lambda g: (g.line, g.start))
        ]
        return out
    families = instructions.lacking(context.arch)
    arch = context.arch
    shape = None
    # The #if structure decides what an excluded arch gets (classify.guard_path): built where a guard excludes it.
    excluding = any(gate.admits.admits(arch) is False for gate in gates)
    if excluding or context.layout or has_family_token(data):
        shape = build_structure(data, comments, directives, families)
    if shape is not None and (context.layout or any(branch.hits for branch in shape.branches)):
        out.structure = shape
    placed: list[tuple[dict, Gate]] = []  # the guards the audit lists, for their function
    for gate in sorted(gates + checks, key=lambda g: (g.line, g.start)):
        if gate.kind != cuda_guard.KIND:
            out.gates.append(checked[gate.start])
            continue
        if gate.admits.admits(arch) is not False or shape is None:
            out.gates.append(gate_record(rel, gate, arch))
            continue
        branch = shape.at(gate.start) or shape.at_line(gate.line)
        blockers = _blockers(shape, gate, arch)
        path = None
        if branch is not None:
            probes = _with_older(context.universe)
            found = cuda_guard.directive_admits(gate.detail["directive"], gate.text, probes)
            admitted = tuple(a for a in probes if found.admits(a) is not False)
            path = classify.guard_path(shape, branch, arch, data, admitted, probes)
        record = gate_record(rel, gate, arch, path, blockers)
        record["widenable"] = not blockers
        record["blockers"] = blockers
        out.gates.append(record)
        if record["classification"] in classify.GROUPS:  # the ones the audit lists, with where they are
            placed.append((record, gate))
    names = functions.enclosing_functions(data, [gate.start for _, gate in placed]) if placed else []
    where, finds = Where(rel), dict[tuple, list]()  # run's finds of the file, kept between its guards (records.widen_checked)
    for (record, gate), name in zip(placed, names):
        if name and not record["symbol"]:  # the function it sits in, as the audit prints it (cpp.functions)
            record["symbol"] = name
        # scan asks run's own widen, for the change a user writes: the file and the function (plan.widen.refusal)
        widen_checked(record, replace(gate, context=name or ""), data, arch, where, finds)
    return out


def _check_record(rel: str, gate: Gate, arch: Arch, data: bytes, checks: list[Gate], language: str) -> dict:
    """The record of a host check; one deciding an `if` whose later `else if` takes `arch` today is needs-human,
    by the rule `codemod run` refuses it with (plan.dispatch)."""
    arm = dispatch.later_statement(data, gate, (arch,), checks, language)
    path = None if arm is None else classify.Path(classify.FALLBACK, arm.reason(rel), arm.line)
    return gate_record(rel, gate, arch, path)


def _blockers(shape: Structure, gate: Gate, arch: Arch) -> list[str]:
    """hazards.blockers_for over a structure already built."""
    branch = shape.at(gate.start) or shape.at_line(gate.line)
    if branch is None:
        return []
    return instructions.describe(shape.region_hits(branch, arch, instructions.lacking(arch)), arch)
