"""What the build proof finds per JIT module, arch and side, and how a module is judged from it.

A module fails when a target arch builds a kernel empty that has a body on
a compared arch, when a PDL instruction a widened guard promises is missing
on the target from a kernel that has it on a compared arch, when a compared
arch's PTX differs from the base's, or when the work tree no longer builds
the module for a compared arch the base built it for, or does not build it
for the target at all.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from codemods.core.arch import Arch
from codemods.cpp import structure
from codemods.cpp import lexer
from codemods.gates import SourceError
from codemods.gates.cpp import cuda_guard
from codemods.prove import ptx

if TYPE_CHECKING:
    from codemods.prove.headers import HeaderSource

# source tokens a widened guard may hold -> the PTX instruction they compile to
PROMISES = {
    "cudaGridDependencySynchronize": "griddepcontrol.wait",
    "cudaTriggerProgrammaticLaunchCompletion": "griddepcontrol.launch_dependents",
    "griddepcontrol.wait": "griddepcontrol.wait",
    "griddepcontrol.launch_dependents": "griddepcontrol.launch_dependents",
}
WATCHED = tuple(dict.fromkeys(PROMISES.values()))


@dataclass
class Kernel:
    source: str
    name: str
    instructions: int
    empty: bool
    opcodes: dict[str, int]
    digest: str


@dataclass
class SourceBuild:
    source: str  # tree-relative
    kernels: list[Kernel] = field(default_factory=list)
    digest: str = ""  # of the normalised PTX
    cached: bool = False
    key: str = ""


@dataclass
class SideBuild:
    """One module on one arch on one side: built (sources) or not built (FlashInfer's own reason)."""

    built: bool
    reason: str = ""
    gencode: str = ""
    sources: list[SourceBuild] = field(default_factory=list)

    def kernels(self) -> dict[tuple[str, str], Kernel]:
        return {(k.source, k.name): k for s in self.sources for k in s.kernels}


@dataclass
class ModuleProof:
    module: str
    spec: str  # file:function
    archs: dict[str, dict[str, SideBuild]] = field(default_factory=dict)  # arch -> side -> build
    failures: list[str] = field(default_factory=list)
    empty: dict[str, list[Kernel]] = field(default_factory=dict)  # target -> kernels empty there, with a body elsewhere
    missing: dict[str, list[tuple[Kernel, str]]] = field(default_factory=dict)  # target -> (kernel, opcode)
    promised: list[tuple[str, int, str]] = field(default_factory=list)  # (file, line, opcode) of widened guards
    differs: dict[str, list[str]] = field(default_factory=dict)  # compared arch -> differing kernels
    reference: dict[str, list[str]] = field(default_factory=dict)  # target -> the archs its kernels are compared with


@dataclass
class BuildReport:
    root: str
    base: str | None
    base_label: str
    targets: tuple[str, ...]
    compared: tuple[str, ...]
    modules: list[ModuleProof]
    compiled: int = 0
    cached: int = 0
    seconds: float = 0.0
    names: dict[str, str] = field(default_factory=dict)  # mangled -> demangled
    headers: HeaderSource | None = None  # where the third-party headers came from, when the tree lacks them

    @property
    def ok(self) -> bool:
        return all(not m.failures for m in self.modules)


def promised(base: bytes, work: bytes, targets: tuple[Arch, ...], universe: tuple[Arch, ...]) -> list[tuple[int, str]]:
    """(line, PTX opcode) of each promise token in the body of a guard the change widened to a target."""
    archs = tuple(dict.fromkeys((*universe, *targets)))
    try:
        before, after = cuda_guard.find(base, archs), cuda_guard.find(work, archs)
    except SourceError:
        return []
    lines = _line_map(base.splitlines(), work.splitlines())
    by_line = {gate.line: gate for gate in before}
    shape = structure.structure(work)
    found = []
    for new in after:
        old = by_line.get(lines.get(new.line, -1))
        if old is None or not any(old.admits.admits(a) is False and new.admits.admits(a) for a in targets):
            continue
        branch = shape.at(new.start)
        if branch is None:
            continue
        end = branch.body_end if branch.body_end >= 0 else len(work)
        body = lexer.mask_comments(work[branch.body_start:end]).decode("utf-8", "replace")
        for token, opcode in PROMISES.items():
            if token in body:
                found.append((new.line, opcode))
    return sorted(set(found))


def _line_map(before: list[bytes], after: list[bytes]) -> dict[int, int]:
    """1-based line of `after` -> the line of `before` it is (kept, or rewritten in place)."""
    out = {}
    for tag, a0, a1, b0, b1 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if tag == "equal" or (tag == "replace" and a1 - a0 == b1 - b0):
            out.update({b0 + i + 1: a0 + i + 1 for i in range(b1 - b0)})
    return out


def judge(proof: ModuleProof, targets: tuple[Arch, ...], compared: tuple[Arch, ...], base: bool, read_ptx: Callable[[str], str]) -> None:
    """Fill the proof's failures from its builds (the rules in the module docstring)."""
    reference = [a for a in compared if proof.archs.get(a.name, {}).get("work", SideBuild(False)).built]
    for arch in compared:
        sides = proof.archs.get(arch.name, {})
        work, before = sides.get("work"), sides.get("base")
        if before is None or work is None:
            continue
        if before.built and not work.built:
            proof.failures.append(f"{arch.name}: the work tree no longer builds {proof.module} ({work.reason})")
        elif before.built and work.built:
            differing = []
            for a, b in zip(before.sources, work.sources):
                if a.digest != b.digest:
                    names, rest = ptx.differing(read_ptx(a.key), read_ptx(b.key))
                    differing += [f"{b.source}: {n}" for n in names] + ([f"{b.source}: module-level declarations"] if rest else [])
            if differing:
                proof.differs[arch.name] = differing
                proof.failures.append(f"{arch.name}: PTX differs from the base in {len(differing)} kernel(s); a non-target arch must stay untouched")
    for arch in targets:
        work = proof.archs.get(arch.name, {}).get("work")
        if work is None:
            continue
        if not work.built:
            proof.failures.append(f"{arch.name}: FlashInfer's JIT does not build {proof.module} for {arch.name} ({work.reason})")
            continue
        proof.reference[arch.name] = [a.name for a in reference]
        refs = [proof.archs[a.name]["work"].kernels() for a in reference]
        empty, missing = [], []
        for key, kernel in work.kernels().items():
            others = [r[key] for r in refs if key in r]
            if kernel.empty and (any(not o.empty for o in others) or not refs):
                empty.append(kernel)
                continue
            if base:
                for opcode in sorted({op for _, _, op in proof.promised}):
                    if any(o.opcodes.get(opcode) for o in others) and not kernel.opcodes.get(opcode):
                        missing.append((kernel, opcode))
        if empty:
            proof.empty[arch.name] = empty
            against = (
                f" but have a body on {', '.join(a.name for a in reference)}" if reference
                else "; no compared arch builds the module to compare with"
            )
            proof.failures.append(f"{arch.name}: {len(empty)} kernel(s) compile empty (`ret;` only){against}")
        if missing:
            proof.missing[arch.name] = missing
            proof.failures.append(f"{arch.name}: {len(missing)} kernel(s) lack an instruction the widened guards promise")
