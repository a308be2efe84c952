"""Prove a guard rewrite: preprocess every changed CUDA file before and after, per arch.

`verify` runs nvcc's device-side preprocessor (`nvcc -E -x cu -gencode
arch=compute_XX,code=sm_XX`) on each changed file twice per arch: once on the
patched work tree and once on the base, and compares the outputs. The base is
an overlay folder in a temp dir that mirrors the work tree with symlinks and
holds only the base versions of the changed files, so unchanged siblings and
relative `#include "../x.h"` still resolve. Before comparing it drops line
markers, blank lines and trailing blanks, and replaces the work tree's and the
overlay's absolute paths with one token (`__FILE__` expands to them).

Per arch the outputs are identical, or changed with the regions that became
active (gained) or inactive (lost), or the arch failed (nvcc's first error
line). A region is mapped back to the guard that admits it where the changed
file's `#if` structure allows. A non-target arch is ok when identical; a
target arch is ok when it lost nothing and gained the expected number of
regions, if one is given.

Without nvcc it falls back to evaluating each `cuda_guard` gate of the changed
files before and after (`method="evaluator"`); that judges guard conditions
only and refuses files with any other change. Base outputs can be cached by
the contents of the changed files, the arch, the flags and the nvcc version;
a cache entry also records the hashes of the unchanged files it read and is
not used when one of them changed.

Third-party headers (CUTLASS, spdlog) are missing from a plain clone whose
submodules are not initialised. Folders given in `extra_includes` are
searched after the tree's own include roots; when `stand_ins` is set, a
header nvcc still cannot find gets an empty stand-in, the same one for the
base and the work tree, provided its name is a path of two or more parts
whose first part names nothing in the tree's include roots (nor next to the
including file): `spdlog/spdlog.h` may be stood in, `flashinfer/x.h`,
`../x.h` or `x.h` may not. A guard that decides whether changed lines
compile on an arch and reads a macro that neither the compiler (reserved
names, the arch macros, `-D` flags) nor any header the preprocessor read
defines could take another branch with the real headers: that arch is
`unknown`, never ok.

`empty_kernels` is `codemod scan`'s `empty-kernel` analysis over the JIT
specs of a FlashInfer tree, restricted to some modules: a module whose gate
admits a target while a guard in its sources compiles code out there. A
tree in that state (a JIT gate widened without its guards) fails.

This module runs subprocesses and writes temp files; it never runs git and
never prints.
"""

from __future__ import annotations

import bisect
import difflib
import gzip
import hashlib
import json
import os
import posixpath
import re
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from codemods.core.arch import Arch, is_arch_macro
from codemods.cpp.evaluate import evaluate
from codemods.gates import Gate, SourceError, cuda_guard

PREPROCESSED_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".inl")  # CUDA sources and the headers they include
# FlashInfer's JIT compiles with -std=c++17 (flashinfer/jit/core.py); nvcc 13.0 defaults to it too.
DEFAULT_FLAGS: tuple[str, ...] = ("-std=c++17",)

ROOT_TOKEN = "<root>"
TEMP_TOKEN = "<tmp>"
_CACHE_VERSION = 1
_TIMEOUT_SECONDS = 600
_TEXT_LINES = 2


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


@dataclass(frozen=True)
class EmptyKernel:
    """`codemod scan`'s empty-kernel hazard on one target: a JIT module built for it whose guard drops code."""

    arch: str
    module: str
    spec: str  # where the module's JIT gate admits the arch, `flashinfer/jit/comm.py:61`
    file: str  # the guard's file, repo-relative
    line: int
    guard: str  # the guard's directive and condition
    message: str  # scan's message


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

    @property
    def status(self) -> str:
        """verified, unknown (nothing failed, some arch depends on stood-in headers) or failed."""
        if self.ok:
            return "verified"
        return "unknown" if all(r.verdict in ("ok", "unknown") for r in self.results) else "failed"


def is_cuda_source(path: str) -> bool:
    return path.endswith(PREPROCESSED_SUFFIXES)


def verify(
    root: Path,
    changed: dict[str, tuple[bytes, bytes]],
    archs: tuple[Arch, ...],
    targets: tuple[Arch, ...],
    include_dirs: list[str],
    expected: dict[str, int] | None = None,
    jobs: int = 0,
    cache_dir: Path | None = None,
    nvcc: str | None = "nvcc",
    flags: tuple[str, ...] = DEFAULT_FLAGS,
    extra_includes: tuple[str, ...] = (),
    stand_ins: bool = False,
    half_patched: tuple[EmptyKernel, ...] = (),
) -> VerifyReport:
    """Compare the preprocessed base and work versions of `changed` on every arch of `archs`.

    `root` is the work tree on disk (it holds the work contents); `changed`
    maps repo-relative paths to (base bytes, work bytes), and files without a
    CUDA/C++ suffix are ignored. `include_dirs` are repo-relative include
    roots, searched in order, then the absolute folders `extra_includes`.
    `stand_ins` lets a missing third-party header be an empty file (see the
    module docstring). `expected` gives, per target arch name, how many
    regions it must gain. `half_patched` (from `empty_kernels()`) fail
    their arch. `jobs` is the number of parallel nvcc runs (0: one per CPU).
    Falls back to the evaluator when `nvcc` is None or not found.
    """
    started = time.perf_counter()
    files = sorted(path for path in changed if is_cuda_source(path))
    sources = {path: changed[path] for path in files}
    archs = tuple(dict.fromkeys(archs))
    universe = tuple(dict.fromkeys((*archs, *targets)))
    structures = {path: _FilePair.read(path, *sources[path], universe) for path in files}
    found = shutil.which(nvcc) if nvcc else None
    version = _nvcc_version(found) if found else None
    if version is None:
        verdicts = {arch: _evaluate(structures, arch) for arch in archs}
        method, preprocessed, cached = "evaluator", 0, 0
    else:
        preprocessor = _Preprocessor(
            root=Path(root).absolute(),
            sources=sources,
            include_dirs=[_include_dir(d) for d in include_dirs],
            nvcc=found,
            version=version,
            flags=tuple(flags),
            cache_dir=cache_dir,
            extra_includes=tuple(str(Path(d).absolute()) for d in extra_includes),
            stand_ins=stand_ins,
        )
        verdicts = preprocessor.run(archs, structures, jobs or os.cpu_count() or 1)
        method, preprocessed, cached = "nvcc", preprocessor.preprocessed, preprocessor.cached
    used = preprocessor.stand_ins if method == "nvcc" else []
    results = [_judge(arch, verdicts[arch], arch in targets, expected, half_patched) for arch in archs]
    return VerifyReport(
        results=results,
        method=method,
        seconds=time.perf_counter() - started,
        ok=all(result.ok for result in results),
        files=files,
        flags=list(flags) if method == "nvcc" else [],
        preprocessed=preprocessed,
        cached=cached,
        stand_ins=sorted(used),
    )


def shadow_tree(source: Path, dest: Path, files: dict[str, bytes]) -> None:
    """Make `dest` read like `source` with `files` (repo-relative path -> bytes) in place of its own.

    Every entry of `source` is a symlink in `dest`, except the folders on the
    way to a file of `files`, which are real folders of symlinks, and those
    files, which are written. `source` is not touched.
    """
    source = Path(source).absolute()
    dest = Path(dest)
    folders: set[str] = {""}
    for rel in files:
        parts = rel.split("/")[:-1]
        folders.update("/".join(parts[: n + 1]) for n in range(len(parts)))
    for folder in sorted(folders):
        (dest / folder).mkdir(parents=True, exist_ok=True)
        real = source / folder
        for entry in sorted(real.iterdir()) if real.is_dir() else []:
            rel = f"{folder}/{entry.name}" if folder else entry.name
            if rel not in folders and rel not in files:
                (dest / rel).symlink_to(entry)
    for rel, data in files.items():
        (dest / rel).write_bytes(data)


# ------------------------------------------------------------------ half-patched trees


def empty_kernels(
    root: Path,
    targets: tuple[Arch, ...],
    universe: tuple[Arch, ...],
    modules: tuple[str, ...] = (),
    changed: tuple[str, ...] = (),
) -> list[EmptyKernel]:
    """`codemod scan`'s empty-kernel hazards on `targets`, for some JIT modules of the FlashInfer tree at `root`.

    The modules judged are those named in `modules` and those whose spec
    file or include closure holds a file of `changed` (paths relative to
    `root`). This is scan's own analysis (jit_modules.read_modules,
    jit_hazards.empty_kernels over what analysis.analyse reads from the JIT spec
    files and the closure files), run on the tree as it is on disk, without
    listing the whole tree; [] where there is no FlashInfer JIT layout.
    """
    from codemods.audit import analysis, jit_hazards, jit_modules, records

    root = Path(root)
    layout = jit_modules.detect(root)
    if layout is None or not targets:
        return []
    universe = tuple(dict.fromkeys((*universe, *targets)))
    context = records.Context(
        root=str(root), arch=targets[0], universe=universe, jit=layout.jit, layout=True,
        include_all=False, hazards=True, cache=None, key="",
    )  # fmt: skip

    def analyse(rel: str, in_jit: bool):
        try:
            data = (root / rel).read_bytes()
        except OSError:
            return records.FileScan(rel)
        return analysis.analyse(rel, data, context, in_jit)

    specs = []
    for file in sorted((root / layout.jit).rglob("*.py")):
        rel = file.relative_to(root).as_posix()
        specs += [(rel, spec) for spec in analyse(rel, True).specs]
    wanted, changed_files = set(modules), set(changed)
    chosen = [
        module
        for module in jit_modules.read_modules(specs, jit_modules.tree_closures(root, layout), targets[0])
        if module.name in wanted or module.file in changed_files or module.files & changed_files
    ]
    structures = {}
    for rel in sorted(set().union(*(module.files for module in chosen))):
        shape = analyse(rel, False).structure
        if shape is not None:
            structures[rel] = shape
    all_specific = jit_modules.builds_all_specific(root, layout)
    found = []
    for arch in targets:
        for hazard in jit_hazards.empty_kernels(chosen, structures, arch, universe, all_specific):
            module = next(m for m in chosen if m.name == hazard["module"] and m.admits(arch))
            branch = structures[hazard["file"]].at_line(hazard["line"])
            guard = f"{branch.directive} {branch.condition}" if branch is not None else ""
            spec = f"{module.file}:{module.spec.gate.line}"
            found.append(EmptyKernel(arch.name, module.name, spec, hazard["file"], hazard["line"], guard, hazard["message"]))
    return found


# ------------------------------------------------------------------ #if structure


_DIRECTIVE_RE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b")


@dataclass(frozen=True)
class _Branch:
    """One branch of an `#if` chain: its directive's line, and its body's lines `[body, end)`."""

    line: int
    body: int
    end: int
    directive: str
    parent: int  # index of the enclosing branch, -1 at file scope
    previous: int  # index of the branch before it in its chain, -1 for the `#if`
    condition: str = ""  # the text after the directive, comments dropped ("" for #else)


def _branches(text: str) -> list[_Branch] | None:
    """The conditional branches of a source, in order; None when `#if`/`#endif` do not balance.

    Directives are found line by line (continuations joined, block comments
    skipped); this is what the evaluator and the region mapping need, not a
    full preprocessor.
    """
    lines = text.split("\n")
    opened: list[dict] = []
    chains: list[list[int]] = []
    in_comment = False
    number = 0
    while number < len(lines):
        first = number
        logical = lines[number]
        while logical.endswith("\\") and number + 1 < len(lines):
            number += 1
            logical = logical[:-1] + lines[number]
        number += 1
        code = logical
        if in_comment:
            close = code.find("*/")
            if close < 0:
                continue
            code = " " * (close + 2) + code[close + 2 :]
            in_comment = False
        match = _DIRECTIVE_RE.match(code)
        in_comment = _opens_comment(code)
        if match is None:
            continue
        directive = match.group(1)
        line = first + 1
        condition = " ".join(_COMMENT_RE.sub(" ", code[match.end() :]).split())
        if directive.startswith("if"):
            parent = chains[-1][-1] if chains else -1
            chains.append([len(opened)])
            opened.append(
                dict(line=line, body=number + 1, directive=directive, parent=parent, previous=-1, condition=condition)
            )
            continue
        if not chains:
            return None
        chain = chains[-1]
        opened[chain[-1]]["end"] = line
        if directive == "endif":
            chains.pop()
            continue
        parent = opened[chain[0]]["parent"]
        opened.append(
            dict(line=line, body=number + 1, directive=directive, parent=parent, previous=chain[-1], condition=condition)
        )
        chain.append(len(opened) - 1)
    if chains:
        return None
    return [_Branch(**branch) for branch in opened]


_COMMENT_RE = re.compile(r"/\*.*?(?:\*/|$)|//.*$")


def _opens_comment(code: str) -> bool:
    """Whether a `/*` on this line is left open at its end (string literals are not considered)."""
    position, open_ = 0, False
    while True:
        if open_:
            close = code.find("*/", position)
            if close < 0:
                return True
            position, open_ = close + 2, False
            continue
        start = code.find("/*", position)
        line_comment = code.find("//", position)
        if start < 0 or (0 <= line_comment < start):
            return False
        position, open_ = start + 2, True


@dataclass
class _FileSide:
    source: bytes
    lines: list[str]
    branches: list[_Branch] | None
    gates: dict[int, Gate]  # by directive line
    error: str = ""

    @classmethod
    def read(cls, source: bytes, universe: tuple[Arch, ...]) -> "_FileSide":
        try:
            gates = cuda_guard.find(source, universe)
        except SourceError as exc:
            return cls(source, [], None, {}, str(exc))
        text = source.decode("utf-8")
        branches = _branches(text)
        error = "" if branches is not None else "#if and #endif do not balance"
        return cls(source, text.split("\n"), branches, {gate.line: gate for gate in gates}, error)

    def gate(self, branch: _Branch) -> Gate | None:
        return self.gates.get(branch.line) if branch.directive != "else" else None

    def possible(self, arch: Arch) -> set[int]:
        """Branches that may be active on `arch`; a condition naming other macros may go either way."""
        truths = []
        for branch in self.branches:
            gate = self.gate(branch)
            truths.append(True if branch.directive == "else" else gate.admits.admits(arch) if gate else None)
        possible: set[int] = set()
        for index, branch in enumerate(self.branches):
            reached = branch.parent == -1 or branch.parent in possible
            earlier = branch.previous
            while reached and earlier != -1:
                reached = truths[earlier] is not True
                earlier = self.branches[earlier].previous
            if reached and truths[index] is not False:
                possible.add(index)
        return possible

    def region(self, path: str, index: int) -> Region:
        branch = self.branches[index]
        gate = self.gate(branch)
        body = [line.strip() for line in self.lines[branch.body - 1 : branch.end - 1]]
        body = [line for line in body if line and not _DIRECTIVE_RE.match(line)]
        return Region(path, branch.line, "\n".join(body[:_TEXT_LINES]), gate.text if gate else "", "\n".join(body))

    def innermost(self, line: int, among: set[int]) -> int | None:
        inside = [i for i in among if self.branches[i].body <= line < self.branches[i].end]
        return max(inside, key=lambda i: self.branches[i].body, default=None)

    def deciding(self, lines: set[int]) -> list[int]:
        """The branches whose conditions decide whether any of `lines` is compiled.

        Those holding a line (from their directive to the next directive of
        their chain) and, for each, the branches before it in its chain.
        """
        found: set[int] = set()
        for index, branch in enumerate(self.branches or []):
            if any(branch.line <= line < branch.end for line in lines):
                while index != -1 and index not in found:
                    found.add(index)
                    index = self.branches[index].previous
        return sorted(found)


@dataclass
class _FilePair:
    path: str
    base: _FileSide
    work: _FileSide
    _flips: dict = field(default_factory=dict)
    _lines: tuple[set[int], set[int]] | None = None

    @classmethod
    def read(cls, path: str, base: bytes, work: bytes, universe: tuple[Arch, ...]) -> "_FilePair":
        return cls(path, _FileSide.read(base, universe), _FileSide.read(work, universe))

    def problem(self) -> str:
        """Why the evaluator cannot judge this pair, or ""."""
        for side in (self.base, self.work):
            if side.error:
                return f"{self.path}: {side.error}"
        if [(b.directive) for b in self.base.branches] != [(b.directive) for b in self.work.branches]:
            return f"{self.path}: the #if structure changed; the evaluator judges guard conditions only"
        if _skeleton(self.base) != _skeleton(self.work):
            return f"{self.path}: changes outside arch guards; the evaluator judges guard conditions only"
        return ""

    def changed_lines(self) -> tuple[set[int], set[int]]:
        """1-based lines only the base has, and lines only the work version has."""
        if self._lines is None:
            matcher = difflib.SequenceMatcher(None, self.base.lines, self.work.lines, autojunk=False)
            base, work = set(), set()
            for op, i1, i2, j1, j2 in matcher.get_opcodes():
                if op != "equal":
                    base.update(range(i1 + 1, i2 + 1))
                    work.update(range(j1 + 1, j2 + 1))
            self._lines = (base, work)
        return self._lines

    def flips(self, arch: Arch) -> tuple[set[int], set[int], str]:
        """Branch indices gained and lost on `arch`, and why they cannot be told ("" when they can)."""
        if arch not in self._flips:
            self._flips[arch] = self._find_flips(arch)
        return self._flips[arch]

    def _find_flips(self, arch: Arch) -> tuple[set[int], set[int], str]:
        problem = self.problem()
        if problem:
            return set(), set(), problem
        for before, after in zip(self.base.branches, self.work.branches):
            old, new = self.base.gate(before), self.work.gate(after)
            if (old.text if old else None) == (new.text if new else None):
                continue
            for side, gate in (("base", old), ("work", new)):
                if gate is not None and gate.admits.admits(arch) is None:
                    return set(), set(), (
                        f"{self.path}:{gate.line}: cannot evaluate `{gate.text}` on {arch.name} ({side})"
                    )
        before, after = self.base.possible(arch), self.work.possible(arch)
        return after - before, before - after, ""


def _skeleton(side: _FileSide) -> bytes:
    """The source with every gate's condition cut out."""
    out, position = [], 0
    for gate in sorted(side.gates.values(), key=lambda g: g.start):
        out += [side.source[position : gate.start], b"\0"]
        position = gate.end
    return b"".join(out + [side.source[position:]])


@dataclass
class _Verdict:
    gained: list[Region] = field(default_factory=list)
    lost: list[Region] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    doubts: list[Doubt] = field(default_factory=list)


def _evaluate(structures: dict[str, _FilePair], arch: Arch) -> _Verdict:
    verdict = _Verdict()
    for path, pair in structures.items():
        gained, lost, problem = pair.flips(arch)
        if problem:
            verdict.errors.append(problem)
            continue
        verdict.gained += [pair.work.region(path, i) for i in sorted(gained)]
        verdict.lost += [pair.base.region(path, i) for i in sorted(lost)]
    return verdict


def _judge(
    arch: Arch, verdict: _Verdict, target: bool, expected: dict[str, int] | None, half_patched=()
) -> ArchResult:
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


def _compared(arch: Arch, verdict: _Verdict, target: bool, expected: dict[str, int] | None) -> ArchResult:
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


# ------------------------------------------------------------------ guards a stand-in may decide


_DEFINE_RE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.M)
_IDENT_RE = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
_HAS_INCLUDE_RE = re.compile(r"__has_include(?:_next)?\s*\(\s*(?:<[^>]*>|\"[^\"]*\")\s*\)")


def _reserved(name: str) -> bool:
    """A name reserved to the compiler and its library (`__CUDACC__`, `_MSC_VER`): no third-party header defines it."""
    return name.startswith("__") or (name[:1] == "_" and name[1:2].isupper())


def _expression(branch: _Branch) -> str:
    if branch.directive in ("ifdef", "elifdef"):
        return f"defined({branch.condition})"
    if branch.directive in ("ifndef", "elifndef"):
        return f"!defined({branch.condition})"
    return branch.condition


class _Doubts:
    """The guards deciding a file's changed lines on an arch that read macros a stood-in header may define.

    A macro is explained when it is reserved, an arch macro, given with -D,
    or #defined in a file the preprocessor read other than a stand-in; a
    guard whose value on the arch the arch macros settle is no doubt either.
    When only guard conditions changed and none flips on the arch, no macro
    can make the two sides differ there.
    """

    def __init__(self, preprocessor: "_Preprocessor", structures: dict[str, _FilePair]) -> None:
        self.preprocessor = preprocessor
        self.structures = structures
        self.given = {flag[2:].split("=")[0] for flag in preprocessor.flags if flag.startswith("-D")}
        self._defined: set[str] | None = None

    def of(self, path: str, arch: Arch) -> list[Doubt]:
        pair = self.structures[path]
        gained, lost, problem = pair.flips(arch)
        if not (problem or gained or lost):
            return []
        found: dict[tuple[int, str], Doubt] = {}
        base_lines, work_lines = pair.changed_lines()
        for side, lines in ((pair.work, work_lines), (pair.base, base_lines)):
            for index in side.deciding(lines) if side.branches is not None else []:
                branch = side.branches[index]
                names = self._unexplained(branch.condition) if branch.directive != "else" else ()
                if not names or evaluate(_expression(branch), arch.macros()) is not None:
                    continue
                guard = f"#{branch.directive} {branch.condition}"
                if not any(doubt.guard == guard for doubt in found.values()):
                    found[(branch.line, guard)] = Doubt(path, branch.line, guard, names)
        return [found[key] for key in sorted(found)]

    def _unexplained(self, condition: str) -> tuple[str, ...]:
        names = {
            name
            for name in _IDENT_RE.findall(_HAS_INCLUDE_RE.sub("1", condition))
            if name != "defined" and not _reserved(name) and not is_arch_macro(name) and name not in self.given
        }
        return tuple(sorted(names - self.defined())) if names else ()

    def defined(self) -> set[str]:
        """Every macro #defined in the files the preprocessor read, stand-ins aside, and in the changed files."""
        if self._defined is None:
            pre, names = self.preprocessor, set()
            contents = [data for pair in pre.sources.values() for data in pair]
            for path in sorted(pre.read):
                if path.startswith(ROOT_TOKEN + "/"):
                    file = pre.root / _relative(path)
                elif os.path.isabs(path):
                    file = Path(path)
                else:
                    continue  # <tmp>: the stand-ins and units; <built-in>, <command-line>
                try:
                    contents.append(file.read_bytes())
                except OSError:
                    continue
            for data in contents:
                names.update(match.decode("ascii") for match in _DEFINE_RE.findall(data))
            self._defined = names
        return self._defined

# ------------------------------------------------------------------ nvcc


_MARKER_RE = re.compile(r'#(?:line)?[ \t]+(\d+)(?:[ \t]+"((?:[^"\\]|\\.)*)")?')
_MARKER_LINES_RE = re.compile(r"^#(?:line)?[ \t]+\d+.*\n?", re.MULTILINE)
_ERROR_RE = re.compile(r"\berror\b|\bfatal\b", re.IGNORECASE)


@dataclass
class _Output:
    """Normalised preprocessor output: its lines and, for each, the (file, line) it came from."""

    lines: list[str]
    origins: list[tuple[str, int]]


def _compact(text: str) -> list[str]:
    """The lines `_normalise` keeps, without their origins (the fast path for identical outputs)."""
    return list(filter(None, map(str.rstrip, _MARKER_LINES_RE.sub("", text).split("\n"))))


def _normalise(text: str) -> _Output:
    """Drop line markers, blank lines and trailing blanks; remember where each kept line came from."""
    lines: list[str] = []
    origins: list[tuple[str, int]] = []
    file, number = "", 0
    for raw in text.split("\n"):
        if raw.startswith("#"):
            marker = _MARKER_RE.match(raw)
            if marker:
                number = int(marker.group(1))
                if marker.group(2) is not None:
                    file = marker.group(2).replace('\\"', '"').replace("\\\\", "\\")
                continue
        stripped = raw.rstrip()
        if stripped:
            lines.append(stripped)
            origins.append((file, number))
        number += 1
    return _Output(lines, origins)


def _include_dir(path: str) -> str:
    path = posixpath.normpath(path.replace("\\", "/")).strip("/")
    return "" if path == "." else path


def _relative(path: str) -> str:
    if path.startswith(ROOT_TOKEN + "/"):
        return posixpath.normpath(path[len(ROOT_TOKEN) + 1 :])
    return path


def _blocks(before: _Output, after: _Output) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Line spans only in `after` (gained) and only in `before` (lost)."""
    spans: list[tuple[int, int, int, int]] = []
    _differences(before.lines, 0, len(before.lines), after.lines, 0, len(after.lines), spans)
    gained = [(b1, b2) for _, _, b1, b2 in spans if b2 > b1]
    lost = [(a1, a2) for a1, a2, _, _ in spans if a2 > a1]
    return gained, lost


# difflib's matcher is quadratic in the worst case; past this many line pairs
# the outputs are first cut at lines that occur once on each side (patience diff).
_SMALL_DIFF = 1_000_000


def _differences(a: list[str], alo: int, ahi: int, b: list[str], blo: int, bhi: int, spans: list) -> None:
    """Append the differing spans `(a1, a2, b1, b2)` of `a[alo:ahi]` and `b[blo:bhi]`, in order."""
    while alo < ahi and blo < bhi and a[alo] == b[blo]:
        alo, blo = alo + 1, blo + 1
    while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
        ahi, bhi = ahi - 1, bhi - 1
    if alo == ahi or blo == bhi:
        if alo < ahi or blo < bhi:
            spans.append((alo, ahi, blo, bhi))
        return
    anchors = _unique_anchors(a, alo, ahi, b, blo, bhi) if (ahi - alo) * (bhi - blo) > _SMALL_DIFF else []
    if not anchors:
        matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
        spans += [
            (alo + i1, alo + i2, blo + j1, blo + j2) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"
        ]
        return
    for i, j in anchors:
        _differences(a, alo, i, b, blo, j, spans)
        alo, blo = i + 1, j + 1
    _differences(a, alo, ahi, b, blo, bhi, spans)


def _unique_anchors(a: list[str], alo: int, ahi: int, b: list[str], blo: int, bhi: int) -> list[tuple[int, int]]:
    """The longest run, in order on both sides, of lines that occur exactly once in each range."""
    counts: dict[str, int] = {}
    for line in a[alo:ahi]:
        counts[line] = counts.get(line, 0) + 1
    in_b: dict[str, int] = {}
    for j in range(blo, bhi):
        line = b[j]
        if counts.get(line) == 1:
            in_b[line] = -1 if line in in_b else j
    pairs = [(i, in_b[a[i]]) for i in range(alo, ahi) if in_b.get(a[i], -1) >= 0]
    # Longest increasing subsequence of the b positions (patience sorting).
    tails: list[int] = []  # per length, the pair that ends the run of that length with the smallest b position
    ends: list[int] = []  # those b positions
    previous = [-1] * len(pairs)
    for index, (_, j) in enumerate(pairs):
        length = bisect.bisect_left(ends, j)
        if length > 0:
            previous[index] = tails[length - 1]
        if length == len(tails):
            tails.append(index)
            ends.append(j)
        else:
            tails[length], ends[length] = index, j
    chain, index = [], tails[-1] if tails else -1
    while index != -1:
        chain.append(pairs[index])
        index = previous[index]
    return chain[::-1]


def _nvcc_version(nvcc: str) -> str | None:
    try:
        proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _first_error(stderr: str, returncode: int) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    found = [line for line in lines if _ERROR_RE.search(line)] or lines
    return " ".join(found[0].split())[:300] if found else f"nvcc exited with status {returncode}"


def _gencode(arch: Arch) -> str:
    return f"arch=compute_{arch.code}{arch.variant},code=sm_{arch.code}{arch.variant}"


_MISSING_RE = re.compile(
    r"^(?P<includer>[^\n]*?):\d+(?::\d+)?: fatal error: (?P<header>[^\n:]+): No such file or directory", re.M
)
_FILE_MARKER_RE = re.compile(r'^#(?:line)? \d+ "((?:[^"\\]|\\.)*)"', re.M)
_ENTER_MARKER_RE = re.compile(r'\n# 1 "((?:[^"\\]|\\.)*)" 1')  # gcc's marker for entering an included file
_MAX_STAND_INS = 200
_SAME_STAND_INS_ROUNDS = 4


class _Failed(Exception):
    """nvcc could not preprocess one side; the message is its first error line."""


class _Preprocessor:
    """Runs nvcc -E for every (changed file, arch, side) and turns the outputs into verdicts."""

    def __init__(self, root, sources, include_dirs, nvcc, version, flags, cache_dir, extra_includes=(), stand_ins=False):
        self.root = root
        self.sources = sources
        self.include_dirs = include_dirs
        self.nvcc = nvcc
        self.version = version
        self.flags = flags
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.extra_includes = tuple(extra_includes)
        self.allow_stand_ins = stand_ins
        self.stand_ins: list[str] = []  # in the order they were made; only ever appended to
        self.read: set[str] = set()  # tokenized paths of the headers the preprocessor read (when stand-ins may be made)
        self.preprocessed = 0
        self.cached = 0
        self._hashes: dict[str, str | None] = {}
        self._lock = threading.Lock()
        self._base_key = hashlib.sha256(
            json.dumps(
                {
                    "version": _CACHE_VERSION,
                    "base": {path: hashlib.sha256(base).hexdigest() for path, (base, _) in sorted(sources.items())},
                    "flags": list(flags),
                    "include_dirs": include_dirs,
                    "extra_includes": list(self.extra_includes),
                    "nvcc": version,
                }
            ).encode()
        ).hexdigest()

    def run(self, archs, structures, jobs) -> dict[Arch, _Verdict]:
        with tempfile.TemporaryDirectory(prefix="codemod-verify-") as temp:
            temp = Path(temp)
            self.overlay = temp / "base"
            shadow_tree(self.root, self.overlay, {path: base for path, (base, _) in self.sources.items()})
            pairs = {(str(self.overlay), ROOT_TOKEN), (str(self.root), ROOT_TOKEN), (str(temp), TEMP_TOKEN)}
            pairs |= {(str(Path(prefix).resolve()), token) for prefix, token in pairs}
            self.tokens = sorted(pairs, key=lambda pair: -len(pair[0]))
            self.units = {path: self._unit(temp, index, path) for index, path in enumerate(self.sources)}
            self.stand_in_dir = temp / "stand-ins"
            # One task per (file, arch) runs both sides, so only two outputs per worker are alive at once.
            tasks = [(path, arch) for arch in archs for path in self.sources]
            compared = []
            if self.allow_stand_ins and tasks:
                # The first task finds the missing headers alone, so the workers do not all find them at once.
                compared.append(self._compare(*tasks[0], structures))
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                compared += pool.map(lambda task: self._compare(*task, structures), tasks[len(compared) :])
        verdicts = {arch: _Verdict() for arch in archs}
        seen: dict[Arch, set[tuple]] = {arch: set() for arch in archs}
        for (_, arch), (gained, lost, errors) in zip(tasks, compared):
            verdict = verdicts[arch]
            verdict.errors += errors
            for regions, found in ((verdict.gained, gained), (verdict.lost, lost)):
                for region in found:
                    key = (region.file, region.line, region.guard or region.text, regions is verdict.gained)
                    if key not in seen[arch]:
                        seen[arch].add(key)
                        regions.append(region)
        if self.stand_ins:
            doubts = _Doubts(self, structures)
            for arch, verdict in verdicts.items():
                verdict.doubts = [doubt for path in structures for doubt in doubts.of(path, arch)]
        return verdicts

    def _compare(self, path: str, arch: Arch, structures) -> tuple[list[Region], list[Region], list[str]]:
        texts, errors, made_with = {}, {}, {}
        sides = ["base", "work"]
        for _ in range(_SAME_STAND_INS_ROUNDS):
            for side in sides:
                try:
                    texts[side], made_with[side] = self._preprocess(path, arch, side)
                    errors.pop(side, None)
                except _Failed as exc:
                    errors[side] = str(exc)
            # Both sides must see the same stand-ins: redo the one made before the other's were added.
            if errors or made_with["base"] == made_with["work"]:
                break
            sides = [min(made_with, key=made_with.get)]
        if len(set(errors.values())) == 1 and len(errors) == 2:
            return [], [], [f"{path}: {errors['base']}"]
        if errors:
            return [], [], [f"{path} ({side}): {error}" for side, error in errors.items()]
        if _compact(texts["base"]) == _compact(texts["work"]):
            return [], [], []
        before, after = _normalise(texts.pop("base")), _normalise(texts.pop("work"))
        gained, lost = _blocks(before, after)
        regions = {
            side: [region for start, end in spans for region in self._regions(out, start, end, structures, arch, side)]
            for side, spans, out in (("work", gained, after), ("base", lost, before))
        }
        return regions["work"], regions["base"], []

    def _unit(self, temp: Path, index: int, path: str) -> dict[str, Path]:
        """The input nvcc preprocesses for `path`: a one-line TU including it, or the file itself."""
        under = [d for d in self.include_dirs if d == "" or path.startswith(d + "/")]
        if not under:
            return {"base": self.overlay / path, "work": self.root / path}
        include_dir = max(under, key=len)
        relative = path[len(include_dir) + 1 :] if include_dir else path
        unit = temp / "units" / f"{index}.cu"
        unit.parent.mkdir(parents=True, exist_ok=True)
        unit.write_text(f'#include "{relative}"\n')
        return {"base": unit, "work": unit}

    def _command(self, unit: Path, arch: Arch, side: str) -> list[str]:
        roots = [self.overlay, self.root] if side == "base" else [self.root]
        includes = [f"-I{(base / d) if d else base}" for base in roots for d in self.include_dirs]
        includes += [f"-I{folder}" for folder in self.extra_includes]
        if self.allow_stand_ins:
            includes.append(f"-I{self.stand_in_dir}")
        return [self.nvcc, "-E", "-x", "cu", *self.flags, "-gencode", _gencode(arch), *includes, str(unit)]

    def _preprocess(self, path: str, arch: Arch, side: str) -> tuple[str, int]:
        """nvcc's output for one side with absolute prefixes replaced, and how many stand-ins it was made with.

        A missing header that may be stood in gets its empty stand-in and the
        run is made again; raises _Failed on any other error.
        """
        while True:
            with self._lock:
                made_with = len(self.stand_ins)
                known = sorted(self.stand_ins)
            key = hashlib.sha256(f"{self._base_key}\0{path}\0{arch.name}\0{known}".encode()).hexdigest()
            if side == "base":
                text = self._load(key)
                if text is not None:
                    with self._lock:
                        self.cached += 1
                    self._note_read(text)
                    return text, made_with
            command = self._command(self.units[path][side], arch, side)
            with self._lock:
                self.preprocessed += 1
            try:
                proc = subprocess.run(command, capture_output=True, timeout=_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                raise _Failed(f"nvcc -E took longer than {_TIMEOUT_SECONDS} s") from None
            except OSError as exc:
                raise _Failed(f"cannot run nvcc: {exc}") from None
            if proc.returncode == 0:
                break
            stderr = self._tokenize(proc.stderr.decode("utf-8", "replace"))
            if not self._stand_in(stderr):
                raise _Failed(_first_error(stderr, proc.returncode))
        text = self._tokenize(proc.stdout.decode("utf-8", "replace"))
        if side == "base":
            self._store(key, text)
        self._note_read(text)
        return text, made_with

    # ------------------------------------------------------------ stand-ins

    def _stand_in(self, stderr: str) -> bool:
        """Make the empty stand-in for the header nvcc could not find; False when it may not be stood in."""
        missing = _MISSING_RE.search(stderr)
        if not self.allow_stand_ins or missing is None:
            return False
        header, includer = missing.group("header"), missing.group("includer")
        if not self._may_stand_in(header, includer):
            return False
        with self._lock:
            if header not in self.stand_ins:
                if len(self.stand_ins) >= _MAX_STAND_INS:
                    return False
                stand_in = self.stand_in_dir / header
                stand_in.parent.mkdir(parents=True, exist_ok=True)
                stand_in.write_bytes(b"")
                self.stand_ins.append(header)
        return True  # made now, or by another run after this one started: run again

    def _may_stand_in(self, header: str, includer: str) -> bool:
        """Whether `header` may be a missing third-party header: `lib/x.h` where `lib` names nothing found.

        Nothing of the tree's include roots, of the folders given, or next to
        the including file: a header missing from those is a real failure.
        """
        parts = header.split("/")
        if len(parts) < 2 or header.startswith("/") or any(part in ("", ".", "..") for part in parts):
            return False
        folders = [self.root / d if d else self.root for d in self.include_dirs]
        folders += [Path(folder) for folder in self.extra_includes]
        if includer.startswith(ROOT_TOKEN + "/"):
            folders.append(self.root / posixpath.dirname(_relative(includer)))
        return not any((folder / parts[0]).exists() for folder in folders)

    def _note_read(self, text: str) -> None:
        """Remember the headers an output was read from (for the macros they define)."""
        if not self.allow_stand_ins:
            return
        found = set(_ENTER_MARKER_RE.findall(text))
        with self._lock:
            self.read |= found

    def _tokenize(self, text: str) -> str:
        for prefix, token in self.tokens:
            text = text.replace(prefix, token)
        return text

    def _regions(self, out: _Output, start: int, end: int, structures, arch: Arch, side: str) -> list[Region]:
        """The regions in one block of lines only one side has.

        A block is split where its lines start coming from another flipped
        guard of a changed file (adjacent guards make one block); a line from
        anywhere else belongs to the region before it.
        """
        groups: list[tuple[str, int | None, int, list[str]]] = []  # file, branch index, first line, lines
        for position in range(start, end):
            file, number = out.origins[position]
            path = _relative(file)
            index = self._flipped_branch(structures, path, number, arch, side)
            if not groups or (index is not None and (path, index) != groups[-1][:2]):
                groups.append((path, index, number, []))
            groups[-1][3].append(out.lines[position].strip())
        regions = []
        for path, index, number, lines in groups:
            text, body = "\n".join(lines[:_TEXT_LINES]), "\n".join(lines)
            if index is None:
                regions.append(Region(path, number, text, body=body))
                continue
            file_side = structures[path].work if side == "work" else structures[path].base
            branch = file_side.branches[index]
            gate = file_side.gate(branch)
            regions.append(Region(path, branch.line, text, gate.text if gate else "", body))
        return regions

    @staticmethod
    def _flipped_branch(structures, path: str, line: int, arch: Arch, side: str) -> int | None:
        """The innermost guard of `path` that flipped on `arch` and holds `line`, if any.

        When the evaluator cannot pair the two sides, any arch guard holding
        the line will do.
        """
        pair = structures.get(path)
        file_side = None if pair is None else pair.work if side == "work" else pair.base
        if file_side is None or file_side.branches is None:
            return None
        gained, lost, problem = pair.flips(arch)
        if problem:
            guarded = {i for i, branch in enumerate(file_side.branches) if file_side.gate(branch) is not None}
            return file_side.innermost(line, guarded)
        return file_side.innermost(line, gained if side == "work" else lost)

    # ------------------------------------------------------------ cache

    def _load(self, key: str) -> str | None:
        if self.cache_dir is None:
            return None
        entry = self.cache_dir / f"{key}.json"
        output = self.cache_dir / f"{key}.ii.gz"
        try:
            depends = json.loads(entry.read_text())
            if any(self._hash(rel) != digest for rel, digest in depends.items()):
                return None
            return gzip.decompress(output.read_bytes()).decode("utf-8")
        except (OSError, ValueError, EOFError):
            return None

    def _store(self, key: str, text: str) -> None:
        if self.cache_dir is None:
            return
        files: set[str] = set()
        for match in _FILE_MARKER_RE.finditer(text):
            if match.group(1).startswith(ROOT_TOKEN + "/"):
                files.add(_relative(match.group(1)))
        depends = {rel: self._hash(rel) for rel in sorted(files - set(self.sources))}
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            for name, data in ((f"{key}.ii.gz", gzip.compress(text.encode("utf-8"), 1)),
                               (f"{key}.json", json.dumps(depends).encode())):
                partial = self.cache_dir / f".{name}.{os.getpid()}.{id(data)}"
                partial.write_bytes(data)
                os.replace(partial, self.cache_dir / name)
        except OSError:
            pass  # a cache that cannot be written only costs time

    def _hash(self, rel: str) -> str | None:
        if rel not in self._hashes:
            try:
                self._hashes[rel] = hashlib.sha256((self.root / rel).read_bytes()).hexdigest()
            except OSError:
                self._hashes[rel] = None
        return self._hashes[rel]
