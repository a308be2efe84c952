"""What the preprocessor proof finds per arch, and how an arch is judged from it.

Per arch the outputs are identical, or changed with the regions that became
active (gained) or inactive (lost), or the arch failed (nvcc's first error
line). A non-target arch is ok when identical; a target arch is ok when it
lost nothing and gained the expected number of regions, if one is given. A
half-patched JIT module fails its arch; a guard a stood-in header may decide
makes it unknown, never ok.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from codemods.core.arch import Arch

if TYPE_CHECKING:
    from codemods.audit.empty_kernels import EmptyKernel

TEXT_LINES = 2  # lines of a region's body shown as its text


@dataclass(frozen=True)
class Region:
    """Source that became active (gained) or inactive (lost) on one arch."""

    file: str  # repo-relative path
    line: int  # line of the guard that admits it; the body's own line when no guard is known
    text: str  # the body's first line(s)
    guard: str = ""  # the guard's condition, when known
    body: str = field(default="", repr=False, compare=False)  # the whole body


@dataclass(frozen=True)
class Doubt:
    """A guard deciding changed lines that reads macros no header read defines (a stand-in may hide them)."""

    file: str
    line: int
    guard: str  # the directive and its condition, e.g. `#ifdef CUTLASS_ARCH_MMA_SM90_SUPPORTED`
    macros: tuple[str, ...]


@dataclass
class ArchResult:
    arch: str
    status: str  # "identical" | "changed" | "failed"
    target: bool = False
    gained: list[Region] = field(default_factory=list)
    lost: list[Region] = field(default_factory=list)
    detail: str = ""
    expected: int | None = None  # regions a target must gain; None: no count is known
    ok: bool = False
    unknown: list[Doubt] = field(default_factory=list)
    empty_kernels: list[EmptyKernel] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """ok, FAIL, or unknown: the comparison may differ with the real third-party headers."""
        if self.ok:
            return "ok"
        if self.status == "failed" or self.empty_kernels or not self.unknown:
            return "FAIL"
        return "unknown"


@dataclass
class VerifyReport:
    results: list[ArchResult]
    method: str  # "nvcc" | "evaluator"
    seconds: float
    ok: bool
    files: list[str]  # the changed CUDA/C++ files verified
    flags: list[str] = field(default_factory=list)  # nvcc flags besides -E, -x cu, -gencode and -I
    preprocessed: int = 0  # nvcc runs made
    cached: int = 0  # base outputs taken from the cache
    stand_ins: list[str] = field(default_factory=list)  # headers preprocessed as empty files, e.g. spdlog/spdlog.h
    nothing_to_prove: bool = False  # no CUDA file changed since the base (nor made as a recipe's intended change)

    @property
    def status(self) -> str:
        """verified, nothing-to-prove (no CUDA file to compare, nothing failed), unknown (nothing failed, some arch
        depends on stood-in headers) or failed."""
        if self.ok:
            return "nothing-to-prove" if self.nothing_to_prove else "verified"
        return "unknown" if all(r.verdict in ("ok", "unknown") for r in self.results) else "failed"


@dataclass
class Verdict:
    """What one arch showed: the regions gained and lost, the errors, and the guards a stand-in may decide."""

    gained: list[Region] = field(default_factory=list)
    lost: list[Region] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    doubts: list[Doubt] = field(default_factory=list)


def judge(
    arch: Arch, verdict: Verdict, target: bool, expected: dict[str, int] | None, half_patched=()
) -> ArchResult:
    """The arch's result: the comparison, then its half-patched modules (fail) and doubts (unknown)."""
    result = _compared(arch, verdict, target, expected)
    result.empty_kernels = [kernel for kernel in half_patched if kernel.arch == arch.name]
    if result.empty_kernels:
        modules = ", ".join(dict.fromkeys(f"{k.module} ({k.spec})" for k in result.empty_kernels))
        half = (
            f"half-patched: {modules} built for {arch.name} while {len(result.empty_kernels)} guard(s) of its "
            "sources compile code out there (empty kernels)"
        )
        result.detail = f"{result.detail}; {half}" if not result.ok else half
        result.ok = False
    result.unknown = list(verdict.doubts)
    if result.unknown:
        result.ok = False
    return result


def _compared(arch: Arch, verdict: Verdict, target: bool, expected: dict[str, int] | None) -> ArchResult:
    """The arch's result from the preprocessor comparison alone."""
    want = (expected or {}).get(arch.name) if target else None
    result = ArchResult(arch.name, "identical", target, verdict.gained, verdict.lost, expected=want)
    if verdict.errors:
        result.status, result.detail = "failed", "; ".join(verdict.errors)
        return result
    if verdict.gained or verdict.lost:
        result.status = "changed"
    if not target:
        result.ok = result.status == "identical"
        if not result.ok:
            moved = [
                f"{word} {_where(regions)}" for word, regions in (("gained", result.gained), ("lost", result.lost)) if regions
            ]
            result.detail = f"{arch.name} is not a target but changed: {'; '.join(moved)}"
        return result
    problems = []
    if result.lost:
        problems.append(f"lost {len(result.lost)} region(s): {_where(result.lost)}")
    if want is not None and len(result.gained) != want:
        problems.append(f"gained {len(result.gained)} region(s), expected {want}")
    result.ok = not problems
    result.detail = "; ".join(problems) or f"gained {len(result.gained)} region(s)"
    return result


def _where(regions: list[Region]) -> str:
    return ", ".join(f"{region.file}:{region.line}" for region in regions)
