"""What breaks when a guarded CUDA region is compiled for an arch: the instructions its code uses that the arch lacks.

`blockers_for(source, gate, arch)` is what a planner asks before widening a
CUDA guard to `arch`; `compiled(shape, target, families)` is what an audit
asks of a whole file a JIT target compiles. Both read the one `#if`
structure (`structure.structure`) and the token families
(`instructions.TOKEN_FAMILIES`). Nothing here reads files.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Protocol

from codemods.core.arch import Arch
from codemods.cpp.instructions import Hit, TokenFamily, describe, lacking
from codemods.cpp.structure import Branch, Structure, structure


class Located(Protocol):
    """Where a guard stands: a cuda_guard Gate is one."""

    start: int  # byte offset of its condition
    line: int  # 1-based line of its directive


def blockers_for(source: bytes, gate: Located, arch: Arch) -> list[str]:
    """Why widening the cuda_guard `gate` to `arch` would break the build: one line per distinct token.

    Scans the body the gate guards (up to its `#elif`/`#else`/`#endif`),
    minus nested branches that `arch` would still not take, for tokens of the
    families `arch` lacks. `[]` when nothing blocks (or the gate is no
    directive of this source).
    """
    shape = structure(source)
    branch = shape.at(gate.start)
    if branch is None:
        branch = shape.at_line(gate.line)
    if branch is None:
        return []
    return describe(shape.region_hits(branch, arch, lacking(arch)), arch)


# ---------------------------------------------------------------- what a target compiles

# CUTLASS/CuTe feature switches (cute/arch/config.hpp, cutlass/arch/config.h) are defined only for the
# targets that have the instructions they guard; elsewhere the #else is CUTE_INVALID_CONTROL_PATH, whose
# message names the instruction (ARCH_FACTS §3C). A group such a switch opens is the library choosing
# per arch itself: none of its branches counts.
FEATURE_SWITCH_RE = re.compile(r"\b(?:CUTE|CUTLASS)_ARCH_\w*ENABLED\b")


def _switched(shape: Structure, branch: Branch) -> bool:
    """Whether the branch's group is opened by a CUTLASS/CuTe feature switch (or its negation)."""
    opening = shape.group(branch)[0]
    return bool(FEATURE_SWITCH_RE.search(opening.condition))


def compiled(
    shape: Structure, target: Arch, families: tuple[TokenFamily, ...], *, definitions: bool = False
) -> tuple[list[tuple[Hit, Branch | None]], list[tuple[Hit, Branch]]]:
    """Family tokens of a whole file that `target` compiles: (surely, and under a guard that may or may not admit it).

    Each sure token comes with the innermost guard that tells archs apart and
    admits `target` around it (None: no arch guard, e.g. at file level); each
    undecided one with the guard that cannot be decided. A branch `target`
    does not take is skipped with everything in it, and so is every branch of
    a group a CUTLASS/CuTe feature switch opens. A branch whose condition
    names no arch macro (an include guard, `#ifndef ONLY_SOFTMAX`) is taken as
    compiled; one that tells archs apart but cannot be decided for `target`
    (other macros too) makes its tokens undecided. With `definitions` (a
    library such as CUTLASS, whose headers define the wrappers rather than use
    them) wrapper names do not count, only instructions.
    """
    names = {family.name for family in families}

    def wanted(hits: tuple[Hit, ...]) -> list[Hit]:
        return [hit for hit in hits if hit.family in names and not (definitions and hit.wrapper)]

    sure: list[tuple[Hit, Branch | None]] = [(hit, None) for hit in wanted(shape.top)]
    unsure: list[tuple[Hit, Branch]] = []

    for branch in shape.branches:
        if branch.parent is None:
            _walk(shape, target, wanted, branch, None, False, sure, unsure)
    sure.sort(key=lambda pair: pair[0].line)
    unsure.sort(key=lambda pair: pair[0].line)
    return sure, unsure


def _walk(
    shape: Structure, target: Arch, wanted: Callable[[tuple[Hit, ...]], list[Hit]], branch: Branch,
    guard: Branch | None, undecided: bool, sure: list[tuple[Hit, Branch | None]], unsure: list[tuple[Hit, Branch]],
) -> None:
    """`compiled`'s walk of a branch and the branches in it."""
    taken = shape.taken(branch, target)
    if taken is False or _switched(shape, branch):
        return
    if shape.arch_selected(branch) and not undecided:
        guard, undecided = branch, taken is None
    if undecided and guard is not None:  # undecided is set with its guard
        unsure.extend((hit, guard) for hit in wanted(branch.hits))
    else:
        sure.extend((hit, guard) for hit in wanted(branch.hits))
    for child in branch.children:
        for member in shape.group(shape.branches[child]):
            _walk(shape, target, wanted, member, guard, undecided, sure, unsure)
