"""Gates in C, C++ and CUDA files: cuda_guard lines found with byte searches, cpp_runtime_check comparisons, widenability.

Every `#if`/`#elif`/`#ifdef`-style line naming an arch macro, continued lines
included, outside comments, is a `cuda_guard` gate; its condition is
evaluated as `cuda_guard.admits` does, so a file is never handed whole to
tree-sitter. Where a guard excludes the arch, the #if structure
(cpp.structure) says what the arch gets instead and what blocks widening.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from codemods.audit import classify
from codemods.audit.prefilter import ARCH_TOKEN
from codemods.audit.records import Context, FileScan, gate_record
from codemods.core.arch import Arch, ArchSet, is_arch_macro
from codemods.core.lazy import LazyModule
from codemods.cpp import functions, instructions
from codemods.cpp.lexer import (
    BOM,
    Comments,
    Lines,
    check_balanced,
    find_directives,
    language as c_language,
    scan_line,
    spliced_end,
    spliced_start,
)
from codemods.cpp.structure import Structure, build_structure, has_family_token
from codemods.gates import Gate, decode
from codemods.gates.cpp import cuda_guard

if TYPE_CHECKING:
    from codemods.gates.cpp import cpp_runtime_check
else:  # imported on first use: a scan of C sources, or one answered from the cache, needs none of them
    cpp_runtime_check = LazyModule("codemods.gates.cpp.cpp_runtime_check")


_GUARD_LINE_RE = re.compile(rb"[ \t\f\v]*#[ \t]*(ifdef|ifndef|if|elifdef|elifndef|elif)\b")


def _guard_lines(data: bytes, comments: Comments) -> list[tuple[int, str, int, int]]:
    """(offset of `#`, directive, condition start and end) of each `#if`-style line that names an arch macro."""
    found = []
    seen = -1
    pos = data.find(ARCH_TOKEN)
    while pos >= 0:
        start = spliced_start(data, pos)
        if start != seen:
            seen = start
            at = start + 3 if start == 0 and data.startswith(BOM) else start
            match = _GUARD_LINE_RE.match(data, at)
            if match is not None:
                sharp = data.index(b"#", at)
                if comments.block_end(sharp) < 0:
                    span = _condition_span(data, match.end())
                    if span is not None:
                        found.append((sharp, "#" + match.group(1).decode(), *span))
        pos = data.find(ARCH_TOKEN, pos + len(ARCH_TOKEN))
    return found


def _condition_span(data: bytes, pos: int) -> tuple[int, int] | None:
    """Where the condition from `pos` starts and ends (cuda_guard's tokens), or None when it names no arch macro.

    Guard lines repeat (a macro test copied over a library), so they are
    tokenized once per distinct line.
    """
    end = spliced_end(data, pos)
    if data.find(b"/*", pos, end) >= 0:
        tokens, _ = scan_line(data, pos)  # a comment may run past the line
        if any(t.kind == "ident" and is_arch_macro(t.text) for t in tokens):
            return tokens[0].start, tokens[-1].end
        return None
    relative = _line_span(data[pos:end])
    return None if relative is None else (relative[0] + pos, relative[1] + pos)


@lru_cache(maxsize=8192)
def _line_span(line: bytes) -> tuple[int, int] | None:
    tokens, _ = scan_line(line, 0)
    if any(t.kind == "ident" and is_arch_macro(t.text) for t in tokens):
        return tokens[0].start, tokens[-1].end
    return None


@lru_cache(maxsize=8192)
def _guard_admits(directive: str, text: str, universe: tuple[Arch, ...]) -> ArchSet:
    """What one guard condition admits, as `cuda_guard` evaluates it (conditions repeat: cached)."""
    if directive in ("#if", "#elif"):
        return cuda_guard.admits(text, universe)
    if not re.fullmatch(r"[A-Za-z_]\w*", text):
        return ArchSet(universe, frozenset(), frozenset(universe))
    test = f"defined({text})" if directive in ("#ifdef", "#elifdef") else f"!defined({text})"
    return cuda_guard.admits(test, universe)


@lru_cache(maxsize=8)
def _with_older(universe: tuple[Arch, ...]) -> tuple[Arch, ...]:
    """The universe and the GPUs before it (sm_70, sm_75): whether a guard is a fallback for older GPUs is read
    from whether it admits them (`< 800` admits no arch of the default universe)."""
    older = tuple(Arch.parse(name) for name in ("sm_70", "sm_75"))
    return tuple(a for a in older if a not in universe) + universe


def cuda_gates(data: bytes, comments: Comments, universe: tuple[Arch, ...], language: str) -> list[Gate]:
    lines = Lines(data)
    gates = []
    for sharp, directive, start, end in _guard_lines(data, comments):
        text = data[start:end].decode("utf-8")
        gates.append(
            Gate(
                kind=cuda_guard.KIND,
                start=start,
                end=end,
                line=lines.at(sharp),
                text=text,
                admits=_guard_admits(directive, text, universe),
                detail={"directive": directive, "language": language},
            )
        )
    return gates


def analyse_c(rel: str, data: bytes, context: Context, runtime: bool) -> FileScan:
    """The gates of one C file; `runtime`: the finder found a capability comparison in it (cpp_runtime_check)."""
    decode(data)
    comments = Comments(data)
    directives = find_directives(data, comments)
    check_balanced(directives)
    language = c_language(rel)
    gates = cuda_gates(data, comments, context.universe, language)
    out = FileScan(rel, parsed=True)
    checks = cpp_runtime_check.find(data, context.universe, language) if runtime else []
    if not gates:
        out.gates = [gate_record(rel, gate, context.arch) for gate in checks]
        return out
    if not context.hazards:
        out.gates = [gate_record(rel, gate, context.arch) for gate in sorted(gates + checks, key=lambda g: (g.line, g.start))]
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
    placed: list[tuple[dict, int]] = []  # the guards the audit lists and their offsets, for their function
    for gate in sorted(gates + checks, key=lambda g: (g.line, g.start)):
        if gate.kind != cuda_guard.KIND or gate.admits.admits(arch) is not False or shape is None:
            out.gates.append(gate_record(rel, gate, arch))
            continue
        branch = shape.at(gate.start) or shape.at_line(gate.line)
        blockers = _blockers(shape, gate, arch)
        path = None
        if branch is not None:
            probes = _with_older(context.universe)
            found = _guard_admits(gate.detail["directive"], gate.text, probes)
            admitted = tuple(a for a in probes if found.admits(a) is not False)
            path = classify.guard_path(shape, branch, arch, data, admitted, probes)
        record = gate_record(rel, gate, arch, path, blockers)
        record["widenable"] = not blockers
        record["blockers"] = blockers
        out.gates.append(record)
        if record["classification"] in classify.GROUPS:  # the ones the audit lists, with where they are
            placed.append((record, gate.start))
    _name_functions(placed, data, language)
    return out


def _name_functions(placed: list[tuple[dict, int]], data: bytes, language: str) -> None:
    """`symbol` of each listed guard (record, offset): the function it sits in, as the audit prints it (cpp.functions)."""
    if not placed:
        return
    for (record, _), name in zip(placed, functions.enclosing_functions(data, [start for _, start in placed])):
        if name and not record["symbol"]:
            record["symbol"] = name


def _blockers(shape: Structure, gate: Gate, arch: Arch) -> list[str]:
    """hazards.blockers_for over a structure already built."""
    branch = shape.at(gate.start) or shape.at_line(gate.line)
    if branch is None:
        return []
    return instructions.describe(shape.region_hits(branch, arch, instructions.lacking(arch)), arch)
