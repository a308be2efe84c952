"""The records of a scan: the tree's result, one file's result, what files are analysed with, and each gate's record."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from codemods.audit import classify
from codemods.core.arch import Arch, ArchSet, family
from codemods.cpp.structure import Structure
from codemods.gates import Gate
from codemods.gates.base import Where
from codemods.gates.cpp import cuda_guard
from codemods.gates.python.predicates.reading import Meaning

if TYPE_CHECKING:
    from codemods.jit import specs as jit_specs


@dataclass
class ScanResult:
    """Everything one scan of one tree found: gate records, skipped files, hazards, JIT modules, stats."""

    root: Path
    arch: Arch
    universe: tuple[Arch, ...]
    gates: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    hazards: list[dict] = field(default_factory=list)
    modules: list[dict] = field(default_factory=list)  # the JIT specs found, for the text report
    layout: str = ""
    stats: dict = field(default_factory=dict)


@dataclass
class FileScan:
    """One file's part of a scan (what the cache stores per file content)."""

    file: str
    gates: list[dict] = field(default_factory=list)
    skipped: str = ""
    structure: Structure | None = None
    specs: list[jit_specs.JitSpec] = field(default_factory=list)
    parsed: bool = False  # whether the file passed a prefilter and was parsed


@dataclass(frozen=True)
class Context:
    """What every file of one scan is analysed with (sent once to each worker)."""

    root: str
    arch: Arch
    universe: tuple[Arch, ...]
    jit: str | None  # the layout's JIT folder, when the tree is a FlashInfer tree
    layout: bool
    include_all: bool
    hazards: bool  # whether to build #if structures and read JIT specs (widenability and hazards)
    cache: str | None  # the object folder of the cache, None without a cache
    key: str  # what the cached results depend on besides a file's bytes
    # what each arch predicate of the project admits, read from its predicate files (None: no project known,
    # predicates are read by their names)
    meanings: Mapping[str, Meaning] | None = None
    # the predicates whose definition says the arch is left out on purpose, with what it says
    # (audit.python_advice.deliberate_exclusion: `# Unlike is_sm120_supported(), this excludes SM121/GB10.`)
    deliberate: tuple[tuple[str, str], ...] = ()


def gate_record(
    rel: str, gate: Gate, arch: Arch, path: classify.Path | None = None, lacking: list[str] | tuple[str, ...] = ()
) -> dict:
    """A gate's record: what it admits, whether it excludes `arch`, and its classification (classify).

    `path` is what `arch` gets where the gate excludes it (by kind when
    None); `lacking` the instructions `arch` lacks in the code it guards.
    """
    admits, unknown, excludes = _verdict(gate.admits, arch)
    if path is None:
        path = _default_path(gate, arch)
    state = False if arch.name in admits else (None if arch.name in unknown else True)
    classification, reason = classify.classify(state, path, list(lacking), classify.editable(gate, arch))
    features = feature_targets(gate.text) if gate.kind == cuda_guard.KIND else []
    if features and reason and not admits:
        reason = f"the guard needs {', '.join(features)} features; {reason}"
    record = {
        "file": rel,
        "line": gate.line,
        "kind": gate.kind,
        "text": gate.text,
        "symbol": gate.context,
        "admits": list(admits),
        "unknown": list(unknown),
        "excludes_arch": excludes,
        "classification": classification,
        "reason": reason,
    }
    if features:
        record["features"] = features
    return record


def widen_checked(record: dict, gate: Gate, source: bytes, arch: Arch, where: Where, found: dict | None = None) -> dict:
    """`record`, a blocker instead of widenable when `codemod run`'s widen refuses the gate for a recipe for
    `arch` (its family, the recipes' default `admit`; plan.widen.refusal: scan asks run's own implementation),
    with run's reason. `found`: the kinds' finds of
    the file, kept between its gates."""
    if record["classification"] != classify.WIDENABLE:
        return record
    from codemods.gates.registry import KINDS
    from codemods.plan.widen import refusal

    kind = KINDS.get(gate.kind)
    universe = gate.admits.universe
    targets = family(arch, tuple(dict.fromkeys((*universe, arch))))  # what a recipe for `arch` asks (admit = "family")
    why = refusal(kind, source, gate, targets, universe, where, found) if kind is not None else ""
    if why:
        record["classification"] = classify.BLOCKER
        record["reason"] = f"{record['reason']}; `codemod run` cannot widen it: {why}"
    return record


_FEATURE_MACRO = re.compile(r"__CUDA_ARCH_FEAT_SM(\d+)_ALL")


def feature_targets(condition: str) -> list[str]:
    """The arch-specific targets whose features a condition tests (`__CUDA_ARCH_FEAT_SM90_ALL`: `sm_90a`, the
    macro nvcc defines only when compiling for that target), in order."""
    return list(dict.fromkeys(f"sm_{number}a" for number in _FEATURE_MACRO.findall(condition)))


def _default_path(gate: Gate, arch: Arch) -> classify.Path:
    """What `arch` gets where a gate excludes it, read from the gate alone (no #if structure at hand)."""
    if gate.kind == cuda_guard.KIND:
        return classify.Path(classify.UNDECIDED, "the #if group around it was not read (--gates-only, or CUDA text in a string)")
    if gate.kind == "cpp_runtime_check":
        builds = gate.detail.get("builds_for") or []
        if builds and arch.name not in builds and arch.plain.name not in {b.removesuffix("a") for b in builds}:
            return classify.Path(classify.PORT, f"the function builds for {', '.join(builds)}, which {arch.name} cannot "
                                                "run: widening the check alone gives it no kernel")
        return classify.runtime_path(str(gate.detail.get("in", "")), arch, str(gate.detail.get("exit", "")))
    if gate.kind == "cmake_arch_list":
        return classify.Path(classify.NOTHING, f"the kernels built from {gate.context} are not compiled for {arch.name}")
    if gate.kind == "python_arch_call":
        numbered = any(name != "has_arch" and "capabilit" in name for name in gate.detail.get("calls", ()))
        return classify.call_arch_path(numbered, str(gate.detail.get("passed_to", "")), arch)
    if "returns_early" in gate.detail:
        return classify.early_return_path(str(gate.detail["returns_early"]), arch)
    if "choice" in gate.detail or "value" in gate.detail:  # a python_capability value, or a predicate's stored
        return classify.value_path(
            gate.detail.get("choice"), str(gate.detail.get("value", "")), arch, str(gate.detail.get("assigns", ""))
        )
    return classify.python_path(gate.kind, f"`{gate.context}`" if gate.context else "", arch)


@lru_cache(maxsize=4096)
def _verdict(admits: ArchSet, arch: Arch) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    return tuple(admits.names()), tuple(admits.unknown_names()), admits.admits(arch) is False


def one_line(text: str) -> str:
    return " ".join(text.split())
