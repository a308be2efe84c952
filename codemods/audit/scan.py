"""`codemod scan`: every arch gate in a tree, and the hazards of one arch.

`scan(root, arch)` lists the files of the tree (`git ls-files -co
--exclude-standard` in a git work tree, so .gitignore is respected, and
submodules and nested repositories are listed the same way; a plain walk
elsewhere, skipping `.git` and `__pycache__`), skips binary files (a NUL byte
in the first 8 KiB; `include_all` scans them and ignored files too),
symlinks out of the tree, FIFOs and devices ("not a regular file") and
submodules not initialised (an empty folder, or files without a repository
of their own: skipped with the `git submodule update --init` to run), and
parses only the files whose bytes can hold a gate:

- C, C++ and CUDA files (and extension-less headers such as libcu++'s
  `nv/target`) that name `__CUDA_ARCH`: every `#if`/`#elif`/`#ifdef`-style
  line naming an arch macro (`__CUDA_ARCH__`, `__CUDA_ARCH_SPECIFIC__`,
  `__CUDA_ARCH_FAMILY_SPECIFIC__`, `__CUDA_ARCH_FEAT_SM<NN>_ALL`), continued
  lines included, outside comments, is a `cuda_guard` gate. The lines are
  found with byte searches and the condition is evaluated as
  `cuda_guard.admits` does, so a file is never handed whole to tree-sitter.
- Python files: `python_arch_list` and `python_arch_or` gates where the
  bytes pass the kind's prefilter, found by the kind's own `find` on a copy
  of the file in which every statement that cannot hold one is blanked out
  (same offsets, same lines); `python_capability` comparisons of
  `get_device_capability()` or `get_device_sm()` (`[0] >= 9`, `>= (9, 0)`,
  a `major, minor = ...` unpacked from it), read by that kind's module on
  only the functions that name the call; and `cuda_guard` lines inside
  string literals (FlashInfer's generators write CUDA from Python).

For each gate it reports what it admits and whether it excludes `arch`. A
cuda_guard gate that excludes `arch` also says whether it is *widenable*: no
token of an instruction `arch` lacks in the region it guards
(hazards.blockers_for). Files that cannot be decoded or parsed are skipped
with a reason. Results are cached per file content (`cache`), and files are
parsed in a process pool when there are many.

In a FlashInfer tree (checkout, wheel or package layout) it also reads the
JIT specs under `flashinfer/jit` (jit_specs) and follows each spec's
sources through their `#include "..."`/`<...>` closure inside the tree
(the including file's folder for quoted includes, then the include root,
the csrc folder and the spec's extra include dirs), and reports:

- `empty-kernel`: the spec's gate lists majors (or flag targets) and
  admits `arch`, while a guard in its closure compiles a body of code out
  on `arch`'s JIT target (instructions.jit_target), keeps it on an *older*
  target the spec is built for, and leaves `arch` no other branch of the
  group with code: a guard written before `arch` existed (`< 1200`,
  `== 1000`). The kernel runs without that code and returns wrong results
  with no error. A guard that keeps code only for newer targets (`>= 1000`
  seen from sm_90) marks a feature `arch` lacks and is not reported; nor is
  a guard nested in one `arch` already skips. Specs without such a gate are
  built for whatever the user asks and are not judged: such a guard was
  there before any widening.
- `unsupported-instruction`: an arch-selected branch (`#if __CUDA_ARCH__ >=
  1000`, or the `#else` after one) that `arch`'s JIT target takes, around
  tokens of an instruction `arch` lacks (`tcgen05.alloc`), so the module
  does not build. No hazard when every spec whose closure holds the file
  is gated away from `arch`; `potential` when the file is in no spec's
  closure or only in specs without a gate, when the branch also depends
  on other macros, or when only CuTe/CUTLASS wrapper names are found
  (they may compile to a trap instead). Also at a Python gate that admits
  `arch` and selects a JIT module (an or-chain or capability test through
  the `gen_*_module` it calls; a spec's arch list through the spec) whose
  closure, CUTLASS included, holds such tokens in code `arch`'s target
  compiles (kernel_paths); definite only for an instruction in one of the
  spec's sources or under an arch guard that admits the target.

`check(result)` is True when any hazard is not potential.
"""

from __future__ import annotations

import ast
import bisect
import hashlib
import json
import os
import posixpath
import re
import shlex
import stat
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from codemods.audit import classify
from codemods.cpp.closures import Closures
from codemods.cpp.instructions import (
    TOKEN_FAMILIES, TOKEN_PATTERNS, Hit, TokenFamily, describe, jit_target, lacking, literal_prefix, may_hold, tokens,
)  # fmt: skip
from codemods.cpp.structure import Branch, Structure, assemble
from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet, is_arch_macro
from codemods.gates import Gate, SourceError, cuda_guard, decode, python_capability
from codemods.cpp.lexer import C_SUFFIXES, language as c_language, scan_line
from codemods.core.lazy import LazyModule


jit_specs = LazyModule("codemods.jit.specs")
_python = LazyModule("codemods.gates._python")
kernel_paths = LazyModule("codemods.audit.kernel_paths")
python_arch_list = LazyModule("codemods.gates.python_arch_list")
python_arch_or = LazyModule("codemods.gates.python_arch_or")
cpp_runtime_check = LazyModule("codemods.gates.cpp_runtime_check")
python_arch_test = LazyModule("codemods.gates.python_arch_test")

PYTHON_SUFFIXES = (".py",)
SKIP_DIRS = frozenset({".git", "__pycache__"})
CAPABILITY_KIND = python_capability.KIND
_BINARY_PROBE = 8192
NOT_REGULAR = "not a regular file"  # the skip reason of a FIFO, socket or device in the tree
_ARCH_TOKEN = b"__CUDA_ARCH"
# Cheap byte tests before a Python file is parsed: only what each kind's `find` could match.
_PYTHON_PREFILTERS = (
    # keyword lists, and the capability-list calls python_arch_list.KNOWN_CALLS names
    (python_arch_list, re.compile(rb"supported_major_versions\s*=\s*[\[(]|\b(?:supported_compute_capability|_match_sm_version)\s*\(")),
    # a chain starts with a predicate (maybe called) and `or`: `is_sm100a_supported(device)\n or`
    (python_arch_or, re.compile(rb"is_sm\d{2,3}a?(?:_supported)?\b\s*(?:\((?:[^()]|\([^()]*\))*\))?\s*\)*\s*\bor\b")),
    # a predicate or flag right after `if`/`elif`/`while`/`assert`/`and`/`not`; python_arch_or.NAMED_PREDICATES too
    (python_arch_test, re.compile(
        rb"\b(?:if|elif|while|assert|and|not)\s+\(?\s*[\w.()]*?\b_?(?:(?:is|has)_sm\d{2,3}[af]?(?:_supported)?|is_blackwell(?:_supported)?)\b"
    )),
)


@lru_cache(maxsize=1)
def _named_or_re() -> re.Pattern:
    """An `or` next to a named predicate (`is_blackwell_supported() or ...`): python_arch_or's other chains."""
    names = b"|".join(re.escape(n.encode()) for n in python_arch_or.NAMED_PREDICATES)
    return re.compile(rb"\b_?(?:%s)\b\s*(?:\([^()]*\))?\s*\)*\s*\bor\b|\bor\b\s*\(*\s*[\w.]*\b_?(?:%s)\b" % (names, names))

_PREFILTER_LITERALS = ((b"supported_major_versions", b"supported_compute_capability", b"_match_sm_version"), (b"is_sm",), (b"_sm", b"is_blackwell"))
_CAPABILITY_TOKEN = b"get_device_capability"
# A comparison with the call, or a name bound from it: nothing else can be a python_capability gate.
_CAPABILITY_RE = re.compile(
    rb"get_device_capability\s*\((?:[^()]|\([^()]*\))*\)\s*(?:\[\s*[01]\s*\]\s*)?\)*\s*(?:[<>!=]=|[<>]|\bin\b|\bnot\b)"
    rb"|(?:[<>!=]=|[<>]|\bin)\s*[\w.]*get_device_capability|=\s*[\w.]*get_device_capability"
)
# SGLang's `get_device_sm()` (major * 10 + minor), compared or bound
_SM_COMPARE_RE = re.compile(rb"\bget_device_sm\s*\(\s*\)\s*(?:[<>!=]=|[<>]|\bin\b|\bnot\b)|=\s*[\w.]*\bget_device_sm\s*\(")
_CAPABILITY_CALL_RE = re.compile(_CAPABILITY_RE.pattern.split(b"|(?:")[0])
_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.")
_SPACE_BYTES = frozenset(b" \t\n\r\f\v")


def _may_compare_capability(data: bytes) -> bool:
    """True whenever `_CAPABILITY_RE.search(data)` matches (rarely also when it does not).

    The regex's last two branches start with no literal, so re tries them at
    every byte; this looks at each `get_device_capability` and what precedes it.
    """
    pos = data.find(_CAPABILITY_TOKEN)
    while pos >= 0:
        if _CAPABILITY_CALL_RE.match(data, pos):
            return True
        name = pos
        while name > 0 and data[name - 1] in _NAME_BYTES:
            name -= 1
        before = name
        while before > 0 and data[before - 1] in _SPACE_BYTES:
            before -= 1
        if data[before - 1 : before] in (b"<", b">", b"=") if before else False:
            return True
        if data[max(0, before - 2) : before] == b"in" or b"in" in data[name:pos]:
            return True
        pos = data.find(_CAPABILITY_TOKEN, pos + 1)
    return False


# What a FlashInfer JIT spec can be made of (jit_specs): statements with none of these are blanked.
_JIT_RE = re.compile(
    rb"gen_jit_spec|supported_major_versions|nvcc_flags|FLASHINFER_\w*DIR"
    rb"|\.(?:cu|cuh|cpp|cc|cxx|c|h|hpp|inl|jinja)[\"']"
)
# Below this many files to parse a process pool costs more than it saves.
_POOL_MINIMUM = 64
_CHUNK_BYTES = 4 << 20
_CHUNK_FILES = 256
CACHE_VERSION = 1

RULES = {
    "gate-excludes-arch": (
        "note",
        "An arch gate excludes the scanned arch",
        "A gate (a CUDA #if guard, a JIT arch list or an arch predicate chain) does not admit the scanned "
        "arch, so the code it guards does not run there. Widenable tells whether the guarded region holds "
        "instructions the arch lacks.",
    ),
    "empty-kernel": (
        "error",
        "A JIT module is built for the arch but a guard compiles its code out",
        "The module's JIT gate admits the arch, while a guard in a source it compiles excludes the arch and "
        "keeps the code for the module's other targets. The kernel runs without that code and returns wrong "
        "results with no error. Widen the guard together with the JIT gate (FlashInfer PR #3903).",
    ),
    "unsupported-instruction": (
        "error",
        "A guard admits the arch around instructions it lacks",
        "A guard the arch's compile target takes holds instructions or wrapper names ptxas rejects on that "
        "arch (wgmma, tcgen05/TMEM, 2-SM TMA, block-scaled mma.sync), or a Python gate admits the arch and "
        "selects a JIT module whose sources hold them. Narrow the guard, or keep the module's JIT gate from "
        "building it for this arch.",
    ),
}


@dataclass(frozen=True)
class Layout:
    """Where a FlashInfer tree keeps its JIT specs and the sources they compile."""

    name: str
    jit: str
    csrc: str
    include: str
    libraries: tuple[str, ...] = ()  # CUTLASS's include folders (empty on a clone without submodules)


# The layouts of targets/projects/flashinfer.toml: git checkout, installed wheel, the package folder.
LAYOUTS = (
    Layout("checkout", "flashinfer/jit", "csrc", "include", ("3rdparty/cutlass/include", "3rdparty/cutlass/tools/util/include")),
    Layout(
        "wheel", "flashinfer/jit", "flashinfer/data/csrc", "flashinfer/data/include",
        ("flashinfer/data/cutlass/include", "flashinfer/data/cutlass/tools/util/include"),
    ),
    Layout("package", "jit", "data/csrc", "data/include", ("data/cutlass/include", "data/cutlass/tools/util/include")),
)


@dataclass
class ScanResult:
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
class _FileScan:
    file: str
    gates: list[dict] = field(default_factory=list)
    skipped: str = ""
    structure: Structure | None = None
    specs: list[jit_specs.JitSpec] = field(default_factory=list)
    parsed: bool = False  # whether the file passed a prefilter and was parsed


@dataclass(frozen=True)
class _Context:
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


@dataclass
class _Job:
    """One tree of a scan: what the cache answered, and the files left to read."""

    root: Path
    layout: Layout | None
    context: _Context
    index: _Index | None
    rels: list[str]
    unlisted: list[dict] = field(default_factory=list)  # skipped before any file is read: folders, special files
    scans: dict[str, _FileScan] = field(default_factory=dict)
    todo: list[tuple[str, int]] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    snapshot: _Snapshot | None = None
    result: ScanResult | None = None  # answered whole from the snapshot
    touched: dict[str, list[int] | None] = field(default_factory=dict)  # paths the JIT closures looked at
    started: float = 0.0
    listed: float = 0.0


def scan(
    root: Path,
    arch: Arch,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    jobs: int = 0,
    *,
    include_all: bool = False,
    hazards: bool = True,
    cache: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ScanResult:
    """Gates and hazards for `arch` in the tree at `root`.

    `jobs` > 1 parses files in that many processes; 1 parses in this
    process; 0 picks the CPU count, or this process for small trees.
    `include_all` also scans binary files and files .gitignore excludes.
    `hazards=False` lists the gates only: no widenability (no #if
    structure is built) and no hazards (no JIT spec is read).
    `cache` is a folder for per-file results (`default_cache()`), None for
    none. `progress(done, total)` is called as files are done.
    """
    return scan_many(
        [root], arch, universe, jobs, include_all=include_all, hazards=hazards, cache=cache, progress=progress
    )[0]


def scan_many(
    roots: list[Path],
    arch: Arch,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    jobs: int = 0,
    *,
    include_all: bool = False,
    hazards: bool = True,
    cache: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[ScanResult]:
    """`scan` of several trees at once: one pool of workers reads the files of all of them.

    A tree whose every file is unchanged since the last scan with the same
    settings (same size, mtime and inode, none modified close to that scan)
    is answered whole from the cache's snapshot of that scan's result.
    """
    universe = tuple(dict.fromkeys((*universe, arch)))
    size = jobs if jobs > 0 else (os.cpu_count() or 1)
    prepared: list[_Job] = []
    outcomes: list[list[_Outcome]] = []
    results: dict[int, ScanResult] = {}
    remaining: dict[int, int] = {}  # per tree: chunks not back yet
    pending: set = set()
    pool: ProcessPoolExecutor | None = None
    counts = {"done": 0, "total": 0}

    def tick(files: int) -> None:
        counts["done"] += files
        if progress is not None:
            progress(counts["done"], counts["total"])

    def collect(block: bool) -> None:
        """Take the chunks that are back; a tree whose chunks are all back is finished at once (its
        hazards are worked out here while the workers read the next trees)."""
        nonlocal pending
        while pending:
            finished, pending = wait(pending, timeout=None if block else 0, return_when=FIRST_COMPLETED)
            if not finished:
                return
            for future in finished:
                number, part = future.result()
                outcomes[number] += part
                tick(len(part))
                remaining[number] -= 1
                if not remaining[number]:
                    results[number] = _finish(prepared[number], outcomes[number], size)

    try:
        # Each tree is listed and its files handed to the workers before the next tree is listed.
        for number, root in enumerate(roots):
            job = _prepare(Path(root), arch, universe, include_all, hazards, cache)
            prepared.append(job)
            outcomes.append([])
            counts["total"] += len(job.rels)
            tick(len(job.rels) - len(job.todo))
            wanted = size > 1 and (jobs > 0 or len(job.todo) >= _POOL_MINIMUM)
            chunks = _chunks(job.todo, size if pool is not None or wanted else 1)
            if pool is None and wanted and len(chunks) > 1:
                pool = ProcessPoolExecutor(max_workers=size)
            if pool is None:
                for rels in chunks:
                    _, part = _scan_chunk((number, job.context, rels))
                    outcomes[number] += part
                    tick(len(part))
                results[number] = _finish(job, outcomes[number], 1)
                continue
            remaining[number] = len(chunks)
            pending.update(pool.submit(_scan_chunk, (number, job.context, rels)) for rels in chunks)
            if not chunks:
                results[number] = _finish(job, outcomes[number], size)
            collect(block=False)
        collect(block=True)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    finished = [results[number] for number in range(len(roots))]
    if cache is not None and any(result.stats["analysed"] for result in finished):
        prune_cache(Path(cache), cache_limit())
    return finished


def _prepare(
    root: Path, arch: Arch, universe: tuple[Arch, ...], include_all: bool, hazards: bool, cache: Path | None
) -> _Job:
    """List the tree, and take from the cache what it already knows."""
    started = time.perf_counter()
    layout = _detect(root)
    rels, unlisted = _list_files(root, include_all)
    listed = time.perf_counter()
    context = _Context(
        root=str(root),
        arch=arch,
        universe=universe,
        jit=layout.jit if layout else None,
        layout=layout is not None,
        include_all=include_all,
        hazards=hazards,
        cache=str(Path(cache) / f"v{CACHE_VERSION}" / "objects") if cache is not None else None,
        key=_context_key(arch, universe, layout is not None, hazards),
    )
    mode = f"{int(include_all)}{int(hazards)}"
    index = _Index.load(Path(cache), root, mode) if cache is not None else None
    job = _Job(root, layout, context, index, rels, unlisted, started=started, listed=listed)
    # cache_hits: unchanged files (by stat) answered from the cache; analysed: files read, of which
    # reused were answered from the cache by their content hash (touched, renamed or copied files)
    # snapshot: every file unchanged, the whole result taken from the last scan's
    job.stats = {"files": len(rels), "binary": 0, "parsed": 0, "cache_hits": 0, "analysed": 0, "reused": 0, "snapshot": False}
    statuses = []
    for rel in rels:
        try:
            status = os.stat(os.path.join(root, rel))
        except OSError:
            continue  # listed by git but deleted, or a dangling link
        if stat.S_ISREG(status.st_mode):
            statuses.append((rel, status))
        else:  # a FIFO or a device: opening it may block
            unlisted.append({"file": rel, "reason": NOT_REGULAR})
    entries = [index.lookup(rel, status) for rel, status in statuses] if index is not None else []
    if index is not None:
        job.snapshot = _Snapshot(Path(cache), root, mode, context.key, unlisted)
        if all(entry is not None for entry in entries):
            job.result = job.snapshot.load(root, arch, universe, index)
            if job.result is not None:
                job.stats["parsed"] = job.result.stats["parsed"]
                job.stats["snapshot"] = True
                job.stats["cache_hits"] = len(statuses)
                job.stats["binary"] = sum(entry[3] == "binary" for entry in entries)
                return job
    for position, (rel, status) in enumerate(statuses):
        entry = entries[position] if index is not None else None
        if entry is not None:
            known = entry[3]
            if known in ("", "binary"):
                job.stats["cache_hits"] += 1
                job.stats["binary"] += known == "binary"
                continue
            item = _load_object(context, known, rel)
            if item is not None:
                job.stats["cache_hits"] += 1
                job.scans[rel] = item
                continue
        job.todo.append((rel, status.st_size))
    return job


def _finish(job: _Job, outcomes: list[_Outcome], workers: int) -> ScanResult:
    """The tree's result from its files' results: gates in file order, JIT modules, hazards."""
    stats, index, scans = job.stats, job.index, job.scans
    finished_at = time.perf_counter()
    if job.result is not None:
        result = job.result
    else:
        for outcome in outcomes:
            stats["analysed"] += 1
            stats["binary"] += outcome.digest == "binary"
            stats["reused"] += outcome.reused
            if index is not None and outcome.stamp is not None:
                index.record(outcome.rel, outcome.stamp, outcome.digest)
            if outcome.item is not None:
                scans[outcome.rel] = outcome.item
        if index is not None:
            index.save()
        result = _assemble(job)
        if job.snapshot is not None and index is not None:
            job.snapshot.save(index, result, stats["parsed"], job.touched)
    stats.update(
        jobs=workers,
        list_seconds=round(job.listed - job.started, 3),
        parse_seconds=round(finished_at - job.listed, 3),
        seconds=round(time.perf_counter() - job.started, 3),
    )
    result.stats = stats
    return result


def _assemble(job: _Job) -> ScanResult:
    root, layout, context, stats = job.root, job.layout, job.context, job.stats
    arch, universe, hazards = context.arch, context.universe, context.hazards
    result = ScanResult(root, arch, universe, layout=layout.name if layout else "")
    structures: dict[str, Structure] = {}
    specs: list[tuple[str, jit_specs.JitSpec]] = []
    for rel in sorted(job.scans):
        item = job.scans[rel]
        result.gates += item.gates
        stats["parsed"] += item.parsed
        if item.skipped:
            result.skipped.append({"file": rel, "reason": item.skipped})
        if item.structure is not None:
            structures[rel] = item.structure
        specs += [(rel, spec) for spec in item.specs]
    result.skipped += [dict(item) for item in job.unlisted]
    modules: list[_Module] = []
    all_specific = False
    if layout is not None and hazards:
        tree = _TreeFiles(root)
        python = posixpath.dirname(layout.jit) or "."
        all_specific = kernel_paths.all_specific(tree.read, python)
        closures = _closures(tree, layout)
        modules = _modules(specs, closures, arch)
        result.modules = [module.record for module in modules]
        result.hazards = _empty_kernels(modules, structures, arch, universe, all_specific)
        paths = kernel_paths.Tree(python, closures, tree.read, all_specific)
        for rel in dict.fromkeys(rel for rel, _ in specs):
            paths.know_specs(rel, [spec for file, spec in specs if file == rel])
        result.hazards += _python_gate_paths(result.gates, modules, paths, arch)
        _classify_jit_gates(result.gates, modules, paths, arch)
        _owners(result.gates, modules)
        job.touched = tree.touched
    if hazards:
        result.hazards += _unsupported(modules, structures, arch, all_specific)
    result.gates.sort(key=lambda g: (g["file"], g["line"]))
    result.skipped.sort(key=lambda s: s["file"])
    result.hazards.sort(key=lambda h: (h["file"], h["line"], h["kind"]))
    return result


class _Snapshot:
    """The whole result of a tree's last scan, valid while its index says no file changed since."""

    def __init__(self, cache: Path, root: Path, mode: str, key: str, unlisted: list[dict]) -> None:
        self.path = cache / f"v{CACHE_VERSION}" / "snapshot" / _tree_file(root, mode)
        self.context_key = key
        self.unlisted = json.dumps(unlisted, sort_keys=True, separators=(",", ":"))

    def _key(self, index: _Index) -> str:
        """The settings, every file's stamp, and what the listing left out (a submodule initialised since)."""
        files = json.dumps(sorted(index.fresh.items()), separators=(",", ":"))
        return hashlib.sha256(f"{self.context_key}|{files}|{self.unlisted}".encode()).hexdigest()

    def load(self, root: Path, arch: Arch, universe: tuple[Arch, ...], index: _Index) -> ScanResult | None:
        try:
            data = json.loads(self.path.read_bytes())
            if data.get("version") != CACHE_VERSION or data.get("key") != self._key(index):
                return None
            # files the JIT closures looked at may lie outside the listing (a header .gitignore hides)
            for rel, stamp in data["touched"].items():
                now = _stamp(root / rel)
                if now != stamp or (now is not None and not index.settled(now[1])):
                    return None
            result = ScanResult(root, arch, universe, layout=data["layout"])
            for name in ("gates", "skipped", "hazards", "modules"):
                value = data[name]
                if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
                    return None
                setattr(result, name, value)
            result.stats = {"parsed": int(data["parsed"])}
            return result
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None

    def save(self, index: _Index, result: ScanResult, parsed: int, touched: dict[str, list[int] | None]) -> None:
        data = {
            "version": CACHE_VERSION,
            "key": self._key(index),
            "touched": touched,
            "layout": result.layout,
            "parsed": parsed,
            "gates": result.gates,
            "skipped": result.skipped,
            "hazards": result.hazards,
            "modules": result.modules,
        }
        try:
            _write_atomic(self.path, json.dumps(data, separators=(",", ":")).encode())
        except (OSError, TypeError, ValueError):
            pass  # a cache that cannot be written only makes the next scan slower


def check(result: ScanResult) -> bool:
    """True when the scan found a hazard that is not merely potential (`scan --check` fails then)."""
    return any(not hazard["potential"] for hazard in result.hazards)


def default_cache() -> Path:
    """`$CODEMOD_HOME/scan-cache` (default ~/.cache/codemod/scan-cache)."""
    return Path(os.environ.get("CODEMOD_HOME") or Path.home() / ".cache" / "codemod") / "scan-cache"


CACHE_LIMIT_MB = 512.0


def cache_limit() -> int:
    """The most bytes the scan cache may hold: `$CODEMOD_SCAN_CACHE_MB` (default 512)."""
    try:
        megabytes = float(os.environ.get("CODEMOD_SCAN_CACHE_MB", CACHE_LIMIT_MB))
    except ValueError:
        megabytes = CACHE_LIMIT_MB
    return max(0, int(megabytes * (1 << 20)))


def prune_cache(cache: Path, limit: int) -> int:
    """Delete what no scan reads any more, then the least recently written entries, until at most `limit` bytes.

    Runs after a scan that wrote entries. Anything of another cache version
    is deleted; if the rest holds more than `limit` bytes, the oldest go
    until 80% of it is left (a deleted entry is only parsed again). Returns
    the number of files deleted.
    """
    current = os.path.join(str(cache), f"v{CACHE_VERSION}") + os.sep
    kept: list[tuple[int, str, int]] = []  # (mtime, path, size)
    doomed: list[str] = []
    total = 0
    for folder, _, names in os.walk(cache):
        for name in names:
            path = os.path.join(folder, name)
            if not path.startswith(current):
                doomed.append(path)
                continue
            try:
                status = os.stat(path)
            except OSError:
                continue
            total += status.st_size
            kept.append((status.st_mtime_ns, path, status.st_size))
    if total > limit:
        goal = limit * 4 // 5
        for _, path, size in sorted(kept):
            if total <= goal:
                break
            doomed.append(path)
            total -= size
    deleted = 0
    for path in doomed:
        try:
            os.unlink(path)
            deleted += 1
        except OSError:
            pass
    return deleted


# ---------------------------------------------------------------- listing files


def _list_files(root: Path, include_all: bool) -> tuple[list[str], list[dict]]:
    """Relative POSIX paths of the files that may hold a gate, sorted; and the folders left out, with why.

    A submodule or nested repository is listed by its own git; one that is
    not its own work tree (a submodule never initialised: an empty folder,
    or files without a repository) is left out with a hint, never listed
    through the enclosing repository (whose listing of it is itself again).
    """
    found: list[str] = []
    unlisted: list[dict] = []
    _collect(root, "", include_all, found, root.resolve(), unlisted)
    return sorted(set(found)), unlisted


def _collect(root: Path, prefix: str, include_all: bool, found: list[str], base: Path, unlisted: list[dict]) -> None:
    folder = root / prefix if prefix else root
    names = None if include_all else _git_files(folder)
    if names is None:
        _walk(folder, prefix, found, base)
        return
    for name in names:
        name = name.rstrip("/")
        parts = name.split("/")
        if not name or any(part in SKIP_DIRS for part in parts):
            continue
        if "." in parts or ".." in parts:
            # `./`: the folder is itself a submodule git knows only as an entry of the enclosing repository
            if name == "." and not prefix:
                unlisted.append({"file": ".", "reason": _not_a_work_tree(folder, ".")})
            continue
        rel = f"{prefix}/{name}" if prefix else name
        path = root / rel
        if path.is_dir() and not path.is_symlink():
            top = _work_tree_top(path)
            if top is None or top == path.resolve():
                _collect(root, rel, include_all, found, base, unlisted)  # a submodule or a nested repository
            else:
                unlisted.append({"file": rel, "reason": _not_a_work_tree(path, rel)})
        elif _wanted(posixpath.basename(name)) and _inside(path, base):
            found.append(rel)


def _work_tree_top(folder: Path) -> Path | None:
    """The top of the git work tree `folder` is in; None when git cannot tell (then the folder is walked)."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--show-toplevel"], capture_output=True, timeout=120
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    return Path(os.fsdecode(proc.stdout.rstrip(b"\r\n"))).resolve()


def _not_a_work_tree(folder: Path, rel: str) -> str:
    """Why a submodule folder (a folder git lists, in no work tree of its own) is not scanned, and what to run."""
    command = f"`git submodule update --init {shlex.quote(rel)}`"
    try:
        with os.scandir(folder) as entries:
            empty = next(entries, None) is None
    except OSError:
        empty = True
    if empty:
        return f"submodule not initialised; run {command} to scan it"
    return (
        f"submodule not initialised (its folder holds files but no repository); move them away and run "
        f"{command} to scan it, or scan them as they are with `codemod scan --all`"
    )


def _git_files(folder: Path) -> list[str] | None:
    """`git ls-files -co --exclude-standard` in `folder`; None when it is no git work tree (or git is missing)."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(folder), "ls-files", "-co", "--exclude-standard", "-z"],
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return [os.fsdecode(name) for name in proc.stdout.split(b"\0") if name]


def _walk(folder: Path, prefix: str, found: list[str], base: Path) -> None:
    stack = [(str(folder), prefix)]
    while stack:
        current, rel_dir = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIP_DIRS:
                        stack.append((entry.path, rel))
                    continue
            except OSError:
                continue
            if _wanted(entry.name) and (not entry.is_symlink() or _inside(Path(entry.path), base)):
                found.append(rel)


def _wanted(name: str) -> bool:
    """Source files by suffix, and extension-less files (C++ headers such as `nv/target`)."""
    return name.endswith(C_SUFFIXES + PYTHON_SUFFIXES) or "." not in name


def _inside(path: Path, base: Path) -> bool:
    """A symlink counts only when it resolves to a file inside the tree."""
    if not path.is_symlink():
        return True
    try:
        target = path.resolve()
    except (RuntimeError, OSError):  # a symlink loop: no file at all
        return False
    return base in target.parents and target.is_file()


def _stamp(path: Path) -> list[int] | None:
    """`_stamp_of` a file, None when there is none."""
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(status.st_mode):
        return None
    return _stamp_of(status)


def _stamp_of(status: os.stat_result) -> list[int]:
    """[size, mtime, inode]: what says a file is unchanged since the cache saw it."""
    return [status.st_size, status.st_mtime_ns, status.st_ino]


def _under(rel: str, folder: str) -> bool:
    return rel.startswith(folder.rstrip("/") + "/")


def _chunks(todo: list[tuple[str, int]], workers: int) -> list[list[str]]:
    """Files in groups of about _CHUNK_BYTES, and at least one group per worker."""
    most = max(1, min(_CHUNK_FILES, -(-len(todo) // max(1, workers))))
    chunks: list[list[str]] = []
    current: list[str] = []
    size = 0
    for rel, length in todo:
        current.append(rel)
        size += length
        if size >= _CHUNK_BYTES or len(current) >= most:
            chunks.append(current)
            current, size = [], 0
    if current:
        chunks.append(current)
    return chunks


# ---------------------------------------------------------------- the cache


@lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """A hash of every module of the package: any change to the code is a new cache (no hand-kept list)."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(str(CACHE_VERSION).encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:32]


def _context_key(arch: Arch, universe: tuple[Arch, ...], layout: bool, hazards: bool) -> str:
    text = f"{_code_fingerprint()}|{arch.name}|{','.join(a.name for a in universe)}|{int(layout)}|{int(hazards)}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temp file beside it (thousands per scan: few system calls each)."""
    tmp = f"{path.parent}{os.sep}.{path.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _tree_file(root: Path, mode: str) -> str:
    """The file name of a tree's index and snapshot, for a mode and this version of the code."""
    return hashlib.sha256(f"{root.resolve()}|{mode}|{_code_fingerprint()}".encode()).hexdigest()[:32] + ".json"


class _Index:
    """Per tree: each file's stat and content hash from the last scan, so an unchanged file is not read.

    An entry is trusted only when size, mtime and inode match and the file
    was last modified well before the index was written (a file changed
    within the file system's timestamp granularity looks unchanged).
    """

    _RACY_NS = 2_000_000_000

    def __init__(self, path: Path, entries: dict[str, list], written_ns: int) -> None:
        self.path = path
        self.entries = entries
        self.written_ns = written_ns
        self.fresh: dict[str, list] = {}
        self.started_ns = time.time_ns()

    @classmethod
    def load(cls, cache: Path, root: Path, mode: str) -> _Index:
        path = cache / f"v{CACHE_VERSION}" / "index" / _tree_file(root, mode)
        try:
            data = json.loads(path.read_bytes())
            if data.get("version") != CACHE_VERSION or not isinstance(data.get("files"), dict):
                raise ValueError("unknown index")
            return cls(path, data["files"], int(data["written_ns"]))
        except (OSError, ValueError, TypeError, KeyError):
            return cls(path, {}, 0)

    def lookup(self, rel: str, status: os.stat_result) -> list | None:
        """`[size, mtime, inode, content hash]` when the file is unchanged, else None.

        The hash is "" for a file with nothing to parse, "binary" for a binary
        """
        entry = self.entries.get(rel)
        if (
            not isinstance(entry, list)
            or len(entry) != 4
            or entry[:3] != _stamp_of(status)
            or not self.settled(status.st_mtime_ns)
            or not isinstance(entry[3], str)
        ):
            return None
        self.fresh[rel] = entry
        return entry

    def settled(self, mtime_ns: int) -> bool:
        """Whether a file modified at `mtime_ns` was modified well before this index was written."""
        return mtime_ns < self.written_ns - self._RACY_NS

    def record(self, rel: str, stamp: list[int], digest: str | None) -> None:
        if digest is not None:
            self.fresh[rel] = [*stamp, digest]

    def save(self) -> None:
        if self.fresh == self.entries:
            return
        data = {"version": CACHE_VERSION, "written_ns": self.started_ns, "files": self.fresh}
        try:
            _write_atomic(self.path, json.dumps(data, separators=(",", ":")).encode())
        except OSError:
            pass  # a cache that cannot be written only makes the next scan slower


def _object_path(context: _Context, digest: str, in_jit: bool) -> Path:
    key = hashlib.sha256(f"{digest}|{context.key}|{int(in_jit)}".encode()).hexdigest()
    return Path(context.cache) / key[:2] / f"{key[2:40]}.json"


def _load_object(context: _Context, digest: str, rel: str) -> _FileScan | None:
    """The cached result for these bytes, or None when it is missing or cannot be read."""
    if context.cache is None:
        return None
    in_jit = context.hazards and context.jit is not None and _under(rel, context.jit)
    try:
        data = json.loads(_object_path(context, digest, in_jit).read_bytes())
        if data.get("v") != CACHE_VERSION:
            return None
        return _file_scan_from_data(rel, data)
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None


def _store_object(context: _Context, digest: str, in_jit: bool, item: _FileScan) -> None:
    if context.cache is None:
        return
    try:
        _write_atomic(
            _object_path(context, digest, in_jit),
            json.dumps(_file_scan_to_data(item), separators=(",", ":")).encode(),
        )
    except OSError:
        pass


def _file_scan_to_data(item: _FileScan) -> dict:
    gates = [{k: v for k, v in gate.items() if k != "file"} for gate in item.gates]
    shape = item.structure
    return {
        "v": CACHE_VERSION,
        "gates": gates,
        "skipped": item.skipped,
        "parsed": item.parsed,
        "structure": None
        if shape is None
        else [
            [
                b.chain, b.position, b.parent, b.line, b.directive, b.condition, b.start, b.body_start,
                b.body_end, b.own_code, [[h.family, h.token, h.line, h.wrapper] for h in b.hits], b.children,
            ]
            for b in shape.branches
        ],
        "chains": None if shape is None else shape.chains,
        "specs": [_spec_to_data(spec) for spec in item.specs],
    }  # fmt: skip


def _file_scan_from_data(rel: str, data: dict) -> _FileScan:
    structure = None
    if data["structure"] is not None:
        branches = [
            Branch(
                index=i, chain=b[0], position=b[1], parent=b[2], line=b[3], directive=b[4], condition=b[5],
                start=b[6], body_start=b[7], body_end=b[8], own_code=b[9],
                hits=[Hit(h[0], h[1], h[2], h[3]) for h in b[10]], children=b[11],
            )
            for i, b in enumerate(data["structure"])
        ]  # fmt: skip
        structure = Structure(branches, data["chains"])
    return _FileScan(
        file=rel,
        gates=[{"file": rel, **gate} for gate in data["gates"]],
        skipped=data["skipped"],
        structure=structure,
        specs=[_spec_from_data(spec) for spec in data["specs"]],
        parsed=bool(data["parsed"]),
    )


def _spec_to_data(spec: jit_specs.JitSpec) -> dict:
    gate = spec.gate
    return {
        "module": spec.module,
        "function": spec.function,
        "line": spec.line,
        "sources": [list(s) for s in spec.sources],
        "include_dirs": [list(d) for d in spec.include_dirs],
        "gate": None
        if gate is None
        else [gate.function, gate.line, gate.text, list(gate.majors), [t.name for t in gate.targets]],
    }


def _spec_from_data(data: dict) -> jit_specs.JitSpec:
    gate = data["gate"]
    return jit_specs.JitSpec(
        module=data["module"],
        function=data["function"],
        line=data["line"],
        sources=tuple(tuple(s) for s in data["sources"]),
        include_dirs=tuple(tuple(d) for d in data["include_dirs"]),
        gate=None
        if gate is None
        else jit_specs.JitGate(gate[0], gate[1], gate[2], tuple(gate[3]), tuple(Arch.parse(t) for t in gate[4])),
    )


# ---------------------------------------------------------------- one file

@dataclass
class _Outcome:
    """One file scanned in a worker."""

    rel: str
    stamp: list[int] | None  # size, mtime, inode: None when it could not be read
    digest: str | None  # the content hash; "" when nothing could be a gate, "binary" for a binary file
    item: _FileScan | None
    reused: bool = False  # found in the cache by its content hash


def _scan_chunk(chunk: tuple[int, _Context, list[str]]) -> tuple[int, list[_Outcome]]:
    """The files of one chunk of tree `number` (run in a worker): (number, their outcomes)."""
    number, context, rels = chunk
    return number, [_scan_one(context, rel) for rel in rels]


def _scan_one(context: _Context, rel: str) -> _Outcome:
    path = os.path.join(context.root, rel)
    try:
        read = _read_regular(path)
    except OSError as exc:
        return _Outcome(rel, None, None, _FileScan(rel, skipped=f"cannot read: {exc.strerror or exc}"))
    if read is None:  # replaced by a FIFO or a device since it was listed
        return _Outcome(rel, None, None, _FileScan(rel, skipped=NOT_REGULAR))
    data, status = read
    stamp = _stamp_of(status)
    if not context.include_all and b"\0" in data[:_BINARY_PROBE]:
        return _Outcome(rel, stamp, "binary", None)
    in_jit = context.hazards and context.jit is not None and _under(rel, context.jit)
    if not _may_hold_gates(rel, data, in_jit):
        return _Outcome(rel, stamp, "", None)
    digest = hashlib.sha1(data).hexdigest()
    if context.cache is not None:
        cached = _load_object(context, digest, rel)
        if cached is not None:
            return _Outcome(rel, stamp, digest, cached, reused=True)
    item = _analyse(rel, data, context, in_jit)
    _store_object(context, digest, in_jit, item)
    return _Outcome(rel, stamp, digest, item)


def _read_regular(path: str | Path) -> tuple[bytes, os.stat_result] | None:
    """The bytes and stat of a regular file; None for anything else (a FIFO or a device is never read)."""
    # O_NONBLOCK: opening a FIFO for reading would wait for a writer; it changes nothing for a regular file
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb") as handle:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            return None
        return handle.read(), status


def _may_hold_gates(rel: str, data: bytes, in_jit: bool) -> bool:
    """The byte prefilter: False when no gate kind could find anything in `data`."""
    if rel.endswith(PYTHON_SUFFIXES):
        return (
            _ARCH_TOKEN in data
            or _CAPABILITY_TOKEN in data
            or bool(_python_kinds(data))
            or (in_jit and b"gen_jit_spec" in data)
        )
    return _ARCH_TOKEN in data or bool(_runtime_check_re().search(data))


def _python_kinds(data: bytes) -> list:
    """The Python gate kinds whose prefilter `data` passes (a literal test first: re is slow on a miss)."""
    kinds = [
        kind
        for (kind, prefilter), literals in zip(_PYTHON_PREFILTERS, _PREFILTER_LITERALS)
        if any(literal in data for literal in literals) and prefilter.search(data)
    ]
    if python_arch_or not in kinds and b"is_blackwell" in data and _named_or_re().search(data):
        kinds.append(python_arch_or)
    return kinds


def _analyse(rel: str, data: bytes, context: _Context, in_jit: bool) -> _FileScan:
    """Parse one file; never raises (a file that cannot be decoded or parsed comes back skipped)."""
    try:
        if rel.endswith(PYTHON_SUFFIXES):
            return _analyse_python(rel, data, context, in_jit)
        return _analyse_c(rel, data, context)
    except SourceError as exc:
        return _FileScan(rel, skipped=str(exc), parsed=True)
    except RecursionError:
        return _FileScan(rel, skipped="cannot parse: nested too deeply", parsed=True)
    except Exception as exc:  # one file never stops the scan; the reason says what to report
        return _FileScan(
            rel, skipped=f"cannot parse ({type(exc).__name__}: {exc}); please report this file", parsed=True
        )


def _record(rel: str, gate: Gate, arch: Arch, path: classify.Path | None = None, lacking: list[str] = ()) -> dict:
    """A gate's record: what it admits, whether it excludes `arch`, and its classification (classify).

    `path` is what `arch` gets where the gate excludes it (by kind when
    None); `lacking` the instructions `arch` lacks in the code it guards.
    """
    admits, unknown, excludes = _verdict(gate.admits, arch)
    if path is None:
        path = _default_path(gate, arch)
    state = False if arch.name in admits else (None if arch.name in unknown else True)
    classification, reason = classify.classify(state, path, list(lacking), gate.kind in classify.EDITABLE_KINDS)
    return {
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


def _default_path(gate: Gate, arch: Arch) -> classify.Path:
    """What `arch` gets where a gate excludes it, read from the gate alone (no #if structure at hand)."""
    if gate.kind == cuda_guard.KIND:
        return classify.Path(classify.UNDECIDED, "the #if group around it was not read (--gates-only, or CUDA text in a string)")
    if gate.kind == "cpp_runtime_check":
        return classify.runtime_path(str(gate.detail.get("in", "")), arch)
    return classify.python_path(gate.kind, f"`{gate.context}`" if gate.context else "", arch)


@lru_cache(maxsize=4096)
def _verdict(admits: ArchSet, arch: Arch) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    return tuple(admits.names()), tuple(admits.unknown_names()), admits.admits(arch) is False


# ---------------------------------------------------------------- C, C++ and CUDA files
#
# Everything here works on the raw bytes with byte searches and small regexes anchored at
# what they look for; Python runs only per directive and per instruction token. Comments are
# found lazily: block comments by following each `/*`, line comments by lexing one line.

_LEXEME_RE = re.compile(
    rb"""/\*.*?(?:\*/|\Z)|//(?:\\\r?\n|[^\n])*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""", re.DOTALL
)
_GUARD_LINE_RE = re.compile(rb"[ \t\f\v]*#[ \t]*(ifdef|ifndef|if|elifdef|elifndef|elif)\b")
_CONDITIONAL_RE = re.compile(rb"#[ \t]*(ifdef|ifndef|if|elifdef|elifndef|elif|else|endif)\b")
_INCLUDE_LINE_RE = re.compile(rb'#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)')
_CONTINUATION_RE = re.compile(rb"\\[ \t]*\r?\n")
_BLANKS_RE = re.compile(rb"[ \t\f\v\r\n]+")
_BOM = b"\xef\xbb\xbf"
_OPENING = {"if", "ifdef", "ifndef"}
_WORD = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _logical_start(data: bytes, pos: int) -> int:
    """Offset of the first byte of the logical line holding `pos` (backslash-newlines joined)."""
    start = data.rfind(b"\n", 0, pos) + 1
    while start >= 2:
        end = start - 2
        if data[end] == 0x0D and end > 0:
            end -= 1
        if data[end] != 0x5C:
            break
        start = data.rfind(b"\n", 0, end) + 1
    return start


def _logical_end(data: bytes, pos: int) -> int:
    """Offset just past the newline that ends the logical line holding `pos` (end of file if none)."""
    while True:
        newline = data.find(b"\n", pos)
        if newline < 0:
            return len(data)
        end = newline - 1
        if end >= pos and data[end] == 0x0D:
            end -= 1
        if end >= pos and data[end] == 0x5C:
            pos = newline + 1
            continue
        return newline + 1


class _Comments:
    """Where the comments of one C-family source are (string literals are code, as in hazards)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._pos = 0  # every block comment starting before this is in _starts/_ends
        self._anchor = 0  # a point in code at or before _pos

    def _index(self, upto: int) -> None:
        """Index the block comments that start at or before `upto` (most lookups are near the top: includes)."""
        data, starts, ends = self.data, self._starts, self._ends
        pos, anchor = self._pos, self._anchor
        while pos <= upto:
            at = data.find(b"/*", pos)
            if at < 0:
                pos = len(data) + 1
                break
            if at > upto:
                pos = at
                break
            holder = self._lexeme_at(max(anchor, _logical_start(data, at)), at)
            if holder is None:
                end = data.find(b"*/", at + 2)
                end = len(data) if end < 0 else end + 2
                starts.append(at)
                ends.append(end)
                anchor = pos = end
            else:
                pos = max(holder.end(), at + 1)  # inside a string or a line comment
        self._pos, self._anchor = pos, anchor

    def _lexeme_at(self, begin: int, target: int) -> re.Match | None:
        """The string or comment that holds `target`, lexing from `begin` (a point in code)."""
        for match in _LEXEME_RE.finditer(self.data, begin):
            if match.start() >= target:
                return None
            if match.end() > target:
                return match
        return None

    def block_end(self, pos: int) -> int:
        """The end of the block comment holding `pos`, or -1."""
        if pos >= self._pos:
            self._index(pos)
        i = bisect.bisect_right(self._starts, pos) - 1
        return self._ends[i] if i >= 0 and pos < self._ends[i] else -1

    def in_comment(self, pos: int) -> bool:
        if self.block_end(pos) >= 0:
            return True
        begin = _logical_start(self.data, pos)
        i = bisect.bisect_right(self._starts, pos) - 1
        if i >= 0 and self._ends[i] > begin:
            begin = self._ends[i]
        holder = self._lexeme_at(begin, pos)
        return holder is not None and holder.group().startswith(b"//")

    def masked(self, start: int, end: int) -> bytes:
        """`data[start:end]` (from a point in code) with comment bytes but newlines made spaces."""
        piece = self.data[start:end]
        if b"/" not in piece:
            return piece
        out = bytearray(piece)
        for match in _LEXEME_RE.finditer(self.data, start, end):
            if match.group().startswith(b"/"):
                for i in range(match.start() - start, match.end() - start):
                    if out[i] != 0x0A:
                        out[i] = 0x20
        return bytes(out)


class _Lines:
    """Line numbers of increasing offsets, counted incrementally."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.line = 1

    def at(self, pos: int) -> int:
        if pos < self.pos:
            self.pos, self.line = 0, 1
        self.line += self.data.count(b"\n", self.pos, pos)
        self.pos = pos
        return self.line


@dataclass(frozen=True)
class _Directive:
    start: int  # the line start
    keyword_end: int
    end: int  # just past the logical line
    keyword: str  # if, ifdef, ..., else, endif
    hash: int  # offset of the `#`


def _directives(data: bytes, comments: _Comments) -> list[_Directive]:
    """Every conditional directive (`#if` ... `#endif`) outside comments, in order."""
    found = []
    for match in _CONDITIONAL_RE.finditer(data):
        at = match.start()
        line_start = data.rfind(b"\n", 0, at) + 1
        before = data[line_start:at]
        if before and before.strip(b" \t\f\v") and not (line_start == 0 and before.startswith(_BOM)):
            continue
        if line_start and _logical_start(data, at) != line_start:
            continue  # the tail of a continued line
        if comments.block_end(at) >= 0:
            continue
        found.append(_Directive(line_start, match.end(), _logical_end(data, match.end()), match.group(1).decode(), at))
    return found


def _check_balanced(directives: list[_Directive]) -> None:
    opened = sum(1 for d in directives if d.keyword in _OPENING)
    closed = sum(1 for d in directives if d.keyword == "endif")
    if opened != closed:
        raise SourceError(f"unbalanced preprocessor conditionals: {opened} #if/#ifdef/#ifndef but {closed} #endif")


def _guard_lines(data: bytes, comments: _Comments) -> list[tuple[int, str, int, int]]:
    """(offset of `#`, directive, condition start and end) of each `#if`-style line that names an arch macro."""
    found = []
    seen = -1
    pos = data.find(_ARCH_TOKEN)
    while pos >= 0:
        start = _logical_start(data, pos)
        if start != seen:
            seen = start
            at = start + 3 if start == 0 and data.startswith(_BOM) else start
            match = _GUARD_LINE_RE.match(data, at)
            if match is not None:
                sharp = data.index(b"#", at)
                if comments.block_end(sharp) < 0:
                    span = _condition_span(data, match.end())
                    if span is not None:
                        found.append((sharp, "#" + match.group(1).decode(), *span))
        pos = data.find(_ARCH_TOKEN, pos + len(_ARCH_TOKEN))
    return found


def _condition_span(data: bytes, pos: int) -> tuple[int, int] | None:
    """Where the condition from `pos` starts and ends (cuda_guard's tokens), or None when it names no arch macro.

    Guard lines repeat (a macro test copied over a library), so they are
    tokenized once per distinct line.
    """
    end = _logical_end(data, pos)
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


def _cuda_gates(data: bytes, comments: _Comments, universe: tuple[Arch, ...], language: str) -> list[Gate]:
    lines = _Lines(data)
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


def _analyse_c(rel: str, data: bytes, context: _Context) -> _FileScan:
    decode(data)
    comments = _Comments(data)
    directives = _directives(data, comments)
    _check_balanced(directives)
    language = c_language(rel)
    gates = _cuda_gates(data, comments, context.universe, language)
    out = _FileScan(rel, parsed=True)
    checks = _runtime_checks(data, context.universe, language)
    if not gates:
        out.gates = [_record(rel, gate, context.arch) for gate in checks]
        return out
    if not context.hazards:
        out.gates = [_record(rel, gate, context.arch) for gate in sorted(gates + checks, key=lambda g: (g.line, g.start))]
        return out
    families = lacking(context.arch)
    arch = context.arch
    shape = None
    # The #if structure decides what an excluded arch gets (classify.guard_path): built where a guard excludes it.
    excluding = any(gate.admits.admits(arch) is False for gate in gates)
    if excluding or context.layout or _has_family_token(data):
        shape = _structure(data, comments, directives, families)
    if shape is not None and (context.layout or any(branch.hits for branch in shape.branches)):
        out.structure = shape
    for gate in sorted(gates + checks, key=lambda g: (g.line, g.start)):
        if gate.kind != cuda_guard.KIND or gate.admits.admits(arch) is not False or shape is None:
            out.gates.append(_record(rel, gate, arch))
            continue
        branch = shape.at(gate.start) or shape.at_line(gate.line)
        blockers = _blockers(shape, gate, arch)
        path = None
        if branch is not None:
            probes = _with_older(context.universe)
            found = _guard_admits(gate.detail["directive"], gate.text, probes)
            admitted = tuple(a for a in probes if found.admits(a) is not False)
            path = classify.guard_path(shape, branch, arch, data, admitted, probes)
        record = _record(rel, gate, arch, path, blockers)
        record["widenable"] = not blockers
        record["blockers"] = blockers
        out.gates.append(record)
    return out


@lru_cache(maxsize=1)
def _runtime_check_re() -> re.Pattern:
    """A comparison of a commonly named capability variable with a number, or a comparison macro over one."""
    names = b"|".join(re.escape(n.encode()) for n in sorted(cpp_runtime_check.COMMON_NAMES, key=len, reverse=True))
    ops = rb"(?:==|!=|<=|>=|<|>)"
    return re.compile(
        rb"\b(?:%s)\s*%s\s*\d|\d\s*%s\s*[\w.>-]*\b(?:%s)|_CHECK_(?:EQ|NE|GE|GT|LE|LT)\s*\(\s*[\w.>-]*\b(?:%s)\b"
        % (names, ops, ops, names, names)
    )


def _runtime_checks(data: bytes, universe: tuple[Arch, ...], language: str) -> list[Gate]:
    """cpp_runtime_check gates, parsed only in files whose bytes hold such a comparison."""
    if not _runtime_check_re().search(data):
        return []
    return cpp_runtime_check.find(data, universe, language)


def _blockers(shape: Structure, gate: Gate, arch: Arch) -> list[str]:
    """hazards.blockers_for over a structure already built."""
    branch = shape.at(gate.start) or shape.at_line(gate.line)
    if branch is None:
        return []
    return describe(shape.region_hits(branch, arch, lacking(arch)), arch)


def _structure(
    data: bytes, comments: _Comments, directives: list[_Directive], families, everywhere: bool = False
) -> Structure:
    """structure.structure(data), built from the directives found, with the hits of `families` only.

    Each branch keeps the first hit of each token, which is all that
    blockers and hazards report. Tokens are looked for only where an arch
    decides, unless `everywhere` (file level included, in Structure.top).
    """
    found = (
        (d.start, d.end, d.keyword, lambda d=d: _condition(comments.masked(d.keyword_end, d.end)))
        for d in directives
    )
    branches, chains, segments = assemble(found, data, lambda a, b: _has_code(data, a, b, comments))
    return _collect_hits(data, comments, Structure(branches, chains), segments, families, everywhere)


def file_structure(data: bytes) -> Structure:
    """structure.structure(data) the fast way, every family's first token per branch and at file level.

    What kernel_paths reads a file a JIT module compiles with. Raises
    SourceError when the bytes are not UTF-8.
    """
    decode(data)
    comments = _Comments(data)
    return _structure(data, comments, _directives(data, comments), TOKEN_FAMILIES, everywhere=True)


def _condition(masked: bytes) -> str:
    return " ".join(_CONTINUATION_RE.sub(b" ", masked).decode("utf-8", "replace").split())


def _has_code(data: bytes, start: int, end: int, comments: _Comments) -> bool:
    """Whether `data[start:end]` (whole lines) holds anything but blanks, comments and directives."""
    pos, line_start = start, True
    while pos < end:
        block = comments.block_end(pos)
        if block >= 0:
            line_start = line_start or b"\n" in data[pos:block]
            pos = block
            continue
        blanks = _BLANKS_RE.match(data, pos, end)
        if blanks is not None:
            line_start = line_start or b"\n" in blanks.group()
            pos = blanks.end()
            continue
        if data.startswith(b"//", pos):
            newline = _logical_end(data, pos)
            pos = newline - 1 if newline <= len(data) and data[newline - 1 : newline] == b"\n" else newline
            continue
        if data[pos] == 0x23 and line_start:
            pos = _logical_end(data, pos)
            line_start = True
            continue
        return True
    return False


@dataclass(frozen=True)
class _TokenPattern:
    family: TokenFamily
    wrapper: bool
    pattern: re.Pattern  # without a leading \b, which `boundary` checks instead (a \b defeats re's prefix search)
    boundary: bool
    named: bool
    prefix: bytes  # every match starts with these bytes: bytes.find jumps to candidates far faster than re.search

    def search(self, data: bytes, pos: int, end: int) -> re.Match | None:
        """The first match of `pattern` starting in [pos, end), tried only where the prefix occurs."""
        prefix, match = self.prefix, self.pattern.match
        stop = end + len(prefix) - 1
        at = data.find(prefix, pos, stop)
        while at >= 0:
            found = match(data, at)
            if found is not None:
                return found
            at = data.find(prefix, at + 1, stop)
        return None


def _token_patterns() -> tuple[_TokenPattern, ...]:
    out = []
    for family, wrapper, compiled in TOKEN_PATTERNS:
        source = compiled.pattern
        boundary = source.startswith(rb"\b") and source[2:3].isalnum()
        pattern = re.compile(source[2:], compiled.flags) if boundary else compiled
        prefix = literal_prefix(pattern.pattern)
        assert prefix and not _top_level_alternation(pattern.pattern), f"{source!r}: needs one literal start"
        out.append(_TokenPattern(family, wrapper, pattern, boundary, "token" in compiled.groupindex, prefix))
    return tuple(out)


def _top_level_alternation(pattern: bytes) -> bool:
    depth, escaped = 0, False
    for byte in pattern:
        if escaped:
            escaped = False
        elif byte == 0x5C:  # backslash
            escaped = True
        elif byte in b"([":
            depth += 1
        elif byte in b")]":
            depth -= 1
        elif byte == 0x7C and depth == 0:  # |
            return True
    return False


_TOKEN_PATTERNS = _token_patterns()
_FAMILY_PREFIXES = tuple(dict.fromkeys(p.prefix for p in _TOKEN_PATTERNS))


def _has_family_token(data: bytes) -> bool:
    """Whether any instruction or wrapper token could be in `data` (a byte search per literal start)."""
    return any(prefix in data for prefix in _FAMILY_PREFIXES)


# A named token (`kind::mxf4` in `mma.sync ... kind::mxf4`) lies at most this far after its match's start.
_NAMED_REACH = 512


def _collect_hits(data, comments, shape: Structure, segments, families, everywhere: bool = False) -> Structure:
    """`shape` with the first of each family token in the body of the innermost branch around it.

    Only bodies an arch decides (an arch-selected branch and everything
    nested in one) are searched: hazards and blockers look nowhere else.
    With `everywhere`, every body is, and the file level too (Structure.top).
    """
    names = {family.name for family in families}
    starts = [segment[0] for segment in segments]
    branches = shape.branches
    relevant = [everywhere or shape.selecting(branch) is not None for branch in branches]
    ranges: list[list[int]] = []
    for low, high, owner in segments:
        if (everywhere if owner is None else relevant[owner]) and high > low:
            if ranges and ranges[-1][1] == low:
                ranges[-1][1] = high
            else:
                ranges.append([low, high])
    found: list[tuple[int, str, str, bool, int]] = []
    for token_pattern in _TOKEN_PATTERNS if ranges else ():
        family = token_pattern.family.name
        if family not in names:
            continue
        pattern, boundary, named, wrapper = (
            token_pattern.pattern, token_pattern.boundary, token_pattern.named, token_pattern.wrapper
        )
        seen: set[tuple[int, bytes]] = set()

        def accept(match: re.Match, owner: int) -> None:
            begin = match.start()
            if boundary and begin > 0 and data[begin - 1] in _WORD:
                return
            at = match.start("token") if named else begin
            key = (owner, match.group("token") if named else match.group())
            if key in seen or comments.in_comment(begin) or (named and comments.in_comment(at)):
                return
            seen.add(key)
            found.append((at, family, key[1].decode("utf-8", "replace"), wrapper, owner))

        for range_low, range_high in ranges:
            pos = max(0, range_low - _NAMED_REACH) if named else range_low
            while pos < range_high:
                match = token_pattern.search(data, pos, range_high)
                if match is None:
                    break
                i = bisect.bisect_right(starts, match.start("token") if named else match.start()) - 1
                low, high, owner = segments[i] if i >= 0 else (0, match.end(), None)
                if not (everywhere if owner is None else relevant[owner]) or high <= match.start():
                    pos = max(high, match.start() + 1)
                    continue
                if named:
                    accept(match, owner)
                    pos = max(match.end(), match.start() + 1)
                    continue
                # Instruction tokens repeat by the thousand in one body: take each distinct one once,
                # at its first place that passes the checks.
                for token in sorted(set(pattern.findall(data, match.start(), high))):
                    place = data.find(token, match.start(), high)
                    while place >= 0 and (owner, token) not in seen:
                        again = pattern.match(data, place)
                        if again is not None and again.group() == token:
                            accept(again, owner)
                        place = data.find(token, place + 1, high)
                pos = high
    if not found:
        return shape
    lines = _Lines(data)
    line_of = {at: lines.at(at) for at in sorted({item[0] for item in found})}
    top: list[Hit] = []
    hits: dict[int, list[Hit]] = {}
    for at, family, token, wrapper, owner in found:
        (top if owner is None else hits.setdefault(owner, [])).append(Hit(family, token, line_of[at], wrapper))
    return shape.with_hits(top, hits)


def _includes(data: bytes) -> list[tuple[str, bool]]:
    """lexer.includes(data), found with a byte search: `#include "x"` (quoted) and `<x>`, outside comments."""
    found = []
    comments = _Comments(data)
    for match in _INCLUDE_LINE_RE.finditer(data):
        at = match.start()
        line_start = data.rfind(b"\n", 0, at) + 1
        if data[line_start:at].strip(b" \t") or comments.block_end(at) >= 0:
            continue
        quoted, angled = match.groups()
        found.append(((quoted or angled).decode("utf-8", "replace").strip(), quoted is not None))
    return found


# ---------------------------------------------------------------- Python files

_COMPOUND = python_capability.COMPOUND
_PythonText = python_capability.PythonText  # byte offsets of ast positions


class _Pruned:
    """A Python source with the statements no gate can be in cut out, and the way back to the original offsets.

    Each run of consecutive statements `wanted` rejects becomes one `0`; a
    kept compound statement keeps its header and has its bodies pruned the
    same way, so the text stays valid Python and everything kept is byte
    for byte the original. libcst then parses a few hundred bytes instead of
    a 150 KB module (its cost grows with every line, blank ones included).
    """

    def __init__(
        self, text: _PythonText, tree: ast.Module, wanted: Callable[[bytes, ast.stmt, bool], bool]
    ) -> None:
        """`wanted(source, statement, in_function)` says which statements to keep."""
        self.text = text
        cuts: list[tuple[int, int]] = []

        def visit(body: list, in_function: bool) -> None:
            run: list[int] | None = None
            for stmt in body:
                start, end = text.span(stmt)
                if not wanted(text.data[start:end], stmt, in_function):
                    run = [run[0], end] if run else [start, end]
                    continue
                if run:
                    cuts.append((run[0], run[1]))
                    run = None
                if isinstance(stmt, _COMPOUND):
                    inner = isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) or (
                        in_function and not isinstance(stmt, ast.ClassDef)
                    )
                    for name in ("body", "orelse", "finalbody"):
                        visit(getattr(stmt, name, None) or [], inner)
                    for handler in getattr(stmt, "handlers", None) or []:
                        visit(handler.body, inner)
                    for case in getattr(stmt, "cases", None) or []:
                        visit(case.body, inner)
            if run:
                cuts.append((run[0], run[1]))

        visit(tree.body, False)
        data = text.data
        pieces: list[bytes] = []
        self._compact: list[int] = []  # where each piece starts in the pruned text
        self._original: list[int] = []  # and in the original
        pos = size = 0
        for start, end in sorted(cuts):
            for piece, origin in ((data[pos:start], pos), (b"0", start)):
                self._compact.append(size)
                self._original.append(origin)
                pieces.append(piece)
                size += len(piece)
            pos = end
        self._compact.append(size)
        self._original.append(pos)
        pieces.append(data[pos:])
        self.source = b"".join(pieces)
        self._line_starts: list[int] | None = None

    def offset(self, compact: int) -> int:
        i = bisect.bisect_right(self._compact, compact) - 1
        return self._original[i] + compact - self._compact[i]

    def line(self, compact_line: int) -> int:
        """The original line of a line of the pruned text."""
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer(rb"\n", self.source)]
        return self.text.line(self.offset(self._line_starts[compact_line - 1]))

    def gate(self, gate: Gate) -> Gate:
        start, end = self.offset(gate.start), self.offset(gate.end - 1) + 1 if gate.end > gate.start else self.offset(gate.start)
        return replace(gate, start=start, end=end, line=self.text.line(start))

    def spec(self, spec: jit_specs.JitSpec) -> jit_specs.JitSpec:
        gate = spec.gate
        if gate is not None:
            gate = replace(gate, line=self.line(gate.line))
        return replace(spec, line=self.line(spec.line), gate=gate)


def _jit_names(text: _PythonText, tree: ast.Module) -> set[str]:
    """Functions around a `gen_jit_spec` call: their callers give a spec's gate (jit_specs)."""
    functions: list[tuple[int, int, str]] = []

    def visit(body: list) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((*text.span(stmt), stmt.name))
            for name in ("body", "orelse", "finalbody"):
                visit(getattr(stmt, name, None) or [])
            for inner in (getattr(stmt, "handlers", None) or []) + (getattr(stmt, "cases", None) or []):
                visit(inner.body)

    visit(tree.body)
    names = set()
    for match in re.finditer(rb"\bgen_jit_spec\b", text.data):
        around = [f for f in functions if f[0] <= match.start() < f[1]]
        if around:
            names.add(max(around)[2])  # the innermost: the latest start
    return names


def _find_every(kind, data: bytes, universe: tuple[Arch, ...]) -> list[Gate]:
    """Every gate of the kind that scan lists: a kind with a table of known shapes says so with `find_known`."""
    known = getattr(kind, "find_known", None)
    return known(data, universe) if known is not None else kind.find(data, universe)


def _analyse_python(rel: str, data: bytes, context: _Context, in_jit: bool) -> _FileScan:
    decode(data)
    out = _FileScan(rel)
    kinds = _python_kinds(data)
    want_specs = in_jit and b"gen_jit_spec" in data
    want_capability = (_CAPABILITY_TOKEN in data and _may_compare_capability(data)) or bool(
        b"get_device_sm" in data and _SM_COMPARE_RE.search(data)
    )
    in_strings = _cuda_gates(data, _NoComments(), context.universe, "cuda") if _ARCH_TOKEN in data else []
    if not (kinds or want_specs or want_capability or in_strings):
        return out
    out.parsed = True
    if want_capability and not (kinds or want_specs or in_strings):
        blocks = python_capability.blocks(data)
        if blocks is not None:  # the functions around each call, parsed alone
            out.gates = [_record(rel, gate, context.arch) for gate in python_capability.gates(*blocks, context.universe)]
            return out
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        if _python.too_deep(exc):  # never handed to libcst, whose parser crashes on it
            raise _python.nested_too_deeply(getattr(exc, "lineno", None)) from None
        if not kinds and not want_specs:
            line = getattr(exc, "lineno", None)
            raise SourceError(f"not valid Python: line {line}: {getattr(exc, 'msg', exc)}") from None
        # ast may not know newer syntax libcst does; libcst decides (and says what is wrong).
        gates = [gate for kind in kinds for gate in _find_every(kind, data, context.universe)]
        out.gates = [_record(rel, gate, context.arch) for gate in gates]
        if want_specs:
            out.specs = jit_specs.find(data, context.universe)
        return out
    text = _PythonText(data)
    gates: list[Gate] = []
    if python_arch_list in kinds:
        listed = python_arch_list.find_in_tree(data, tree, context.universe, known=True)
        if listed is not None:  # else libcst decides, below
            gates += listed
            kinds = [kind for kind in kinds if kind is not python_arch_list]
    if kinds or want_specs:
        patterns = [prefilter for kind, prefilter in _PYTHON_PREFILTERS if kind in kinds]
        if python_arch_or in kinds:
            patterns.append(_named_or_re())
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
            return bool(_JIT_RE.search(piece)) or (names_re is not None and bool(names_re.search(piece)))

        pruned = _Pruned(text, tree, wanted)
        for kind in kinds:
            gates += [pruned.gate(gate) for gate in _find_every(kind, pruned.source, context.universe)]
        if want_specs:
            out.specs = [pruned.spec(spec) for spec in jit_specs.find(pruned.source, context.universe)]
    if want_capability:
        gates += python_capability.gates(text, tree.body, context.universe)
    if in_strings:
        gates += _string_guards(text, tree, in_strings)
    gates.sort(key=lambda gate: (gate.line, gate.start))
    out.gates = [_record(rel, gate, context.arch) for gate in gates]
    return out


def _string_guards(text: _PythonText, tree: ast.Module, candidates: list[Gate]) -> list[Gate]:
    """The cuda_guard lines that lie inside Python string literals (CUDA source written by a generator)."""
    inside: list[tuple[int, int]] = []
    for node, _ in _nodes_in(text, tree.body, lambda piece: _ARCH_TOKEN in piece, 0):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.end_lineno > node.lineno:
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


class _NoComments(_Comments):
    """Python source: `#` starts no C comment that would hide a guard line in a string."""

    def __init__(self) -> None:
        super().__init__(b"")
        self._pos = 1 << 62  # nothing to index


_nodes_in = python_capability.nodes_in


# ---------------------------------------------------------------- JIT modules and their closures


def _detect(root: Path) -> Layout | None:
    for layout in LAYOUTS:
        if (root / layout.jit).is_dir() and (root / layout.csrc).is_dir():
            return layout
    return None


def _all_specific(root: Path, layout: Layout) -> bool:
    """Whether the FlashInfer at `root` builds every major >= 9 as an `a` target (kernel_paths.all_specific)."""
    return kernel_paths.all_specific(_TreeFiles(root).read, posixpath.dirname(layout.jit) or ".")


class _TreeFiles:
    """The files of a tree, as a JIT closure sees them (closures.Closures): which exist, their bytes, and what was looked at."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._base = root.resolve()
        self._exists: dict[str, bool] = {}
        # every path looked at, with [size, mtime, inode] (None: no file): the result depends on them
        self.touched: dict[str, list[int] | None] = {}

    def exists(self, rel: str) -> bool:
        """Whether `rel` is a file inside the tree (an absolute path, `..` or a symlink out of it is not)."""
        if rel not in self._exists:
            inside = not posixpath.isabs(rel) and rel != ".." and not rel.startswith("../")
            path = self.root / rel
            if inside and path.is_symlink():
                inside = _inside(path, self._base)
            self._exists[rel] = inside and path.is_file()
            self.touched[rel] = _stamp(path) if inside else None
        return self._exists[rel]

    def read(self, rel: str) -> bytes:
        read = _read_regular(self.root / rel) if self.exists(rel) else None
        if read is None:
            raise FileNotFoundError(rel)
        return read[0]


def tree_closures(root: Path, layout: Layout) -> Closures:
    """The JIT include closures of the tree at root, read as scan reads it (verify and the build proof use it)."""
    return _closures(_TreeFiles(root), layout)


def _closures(files: _TreeFiles, layout: Layout) -> Closures:
    return Closures(layout.csrc, layout.include, files.exists, files.read, layout.libraries, parse=_includes)


@dataclass
class _Module:
    """One JIT spec variant, the files it compiles, and its record for the report."""

    spec: jit_specs.JitSpec
    file: str
    files: frozenset[str]
    record: dict

    @property
    def name(self) -> str:
        return self.spec.module

    def admits(self, arch: Arch) -> bool | None:
        """Whether the gate admits `arch`; None for a spec without a gate."""
        return None if self.spec.gate is None else self.spec.gate.admits(arch)

    def target(self, arch: Arch, all_specific: bool) -> Arch:
        """The nvcc target the module is compiled for on a GPU of `arch`."""
        gate = self.spec.gate
        if gate is not None and arch.major not in gate.majors:
            for target in gate.targets:
                if target.plain == arch.plain:
                    return target
        return jit_target(arch, all_specific=all_specific)


def _modules(specs: list[tuple[str, jit_specs.JitSpec]], closures: Closures, arch: Arch) -> list[_Module]:
    modules = []
    for file, spec in specs:
        found = closures.closure(spec, libraries=False)
        files, missing = found.files, found.missing
        gate = spec.gate
        record = {
            "module": spec.module,
            "file": file,
            "line": spec.line,
            "function": spec.function,
            "gate": None if gate is None else {"function": gate.function, "line": gate.line, "text": gate.text},
            "admits_arch": None if gate is None else gate.admits(arch),
            "sources": len(spec.sources) - len(missing),
            "closure": len(files),
        }
        modules.append(_Module(spec, file, frozenset(files), record))
    return modules


def _empty_kernels(
    modules: list[_Module],
    structures: dict[str, Structure],
    arch: Arch,
    universe: tuple[Arch, ...],
    all_specific: bool,
) -> list[dict]:
    found: dict[tuple[str, int], dict] = {}
    details: dict[tuple[str, int], tuple] = {}
    for module in modules:
        gate = module.spec.gate
        if gate is None or not gate.admits(arch):
            continue
        target = module.target(arch, all_specific)
        # Only older targets count: a guard that keeps code from `arch` but gives it to a newer
        # target (`>= 1000` seen from sm_90) marks a feature `arch` lacks, not a guard left narrow.
        older = [a for a in universe if (a.major, a.minor) < (arch.major, arch.minor) and gate.admits(a)]
        siblings = {module.target(a, all_specific) for a in older}
        for rel in sorted(module.files & structures.keys()):
            shape = structures[rel]
            for branch in shape.branches:
                if branch.directive == "#else" or not branch.names_arch:
                    continue
                if shape.own(branch, target) is not False or not shape.has_code(branch):
                    continue
                if branch.parent is not None and not shape.reachable(shape.branches[branch.parent], target):
                    continue
                if shape.gives_code(branch, target):
                    continue
                kept = sorted(
                    (s for s in siblings if shape.own(branch, s) is True and shape.taken(branch, s) is not False),
                    key=lambda a: (a.major, a.minor, a.variant),
                )
                if not kept:
                    continue
                key = (rel, branch.line)
                if key in found:
                    found[key]["_modules"].append(module.name)
                    continue
                found[key] = {
                    "kind": "empty-kernel",
                    "file": rel,
                    "line": branch.line,
                    "module": module.name,
                    "potential": False,
                    "_modules": [module.name],
                }
                details[key] = (branch, target, kept, module)
    out = []
    for key, record in found.items():
        branch, target, kept, module = details[key]
        names = list(dict.fromkeys(record.pop("_modules")))
        gate = module.spec.gate
        record["message"] = (
            f"{' and '.join(names)} {'is' if len(names) == 1 else 'are'} built for {arch.name} "
            f"({module.file}:{gate.line} admits it; compiled as {target.name}), but "
            f"`{branch.directive} {branch.condition}` compiles this code out there while "
            f"{', '.join(a.name for a in kept)} keep{'s' if len(kept) == 1 else ''} it: the kernel runs without it "
            "and returns garbage without an error; widen this guard together with the JIT gate"
        )
        out.append(record)
    return out


def _unsupported(
    modules: list[_Module], structures: dict[str, Structure], arch: Arch, all_specific: bool
) -> list[dict]:
    names = {family.name for family in lacking(arch)}
    holding: dict[str, list[_Module]] = {}
    for module in modules:
        for rel in module.files:
            holding.setdefault(rel, []).append(module)
    out = []
    for rel, shape in structures.items():
        holders = holding.get(rel, [])
        admitting = [m for m in holders if m.admits(arch) is True]
        ungated = [m for m in holders if m.admits(arch) is None]
        # (target, module name, whether only potential, where the file is built)
        if admitting:
            contexts = [
                (m.target(arch, all_specific), m.name, False, f"{m.name} is built for {arch.name}") for m in admitting
            ]
        elif ungated:
            contexts = [
                (
                    m.target(arch, all_specific),
                    m.name,
                    True,
                    f"{m.name} has no arch list, so it is built for {arch.name} when asked",
                )
                for m in ungated
            ]
        elif not holders:
            contexts = [(arch, None, True, "no JIT spec compiles this file, so whether anything builds it is unknown")]
        else:
            continue  # every module that compiles this file is gated away from arch
        merged: dict[int, dict] = {}
        for target, module_name, potential, where in contexts:
            for branch in shape.branches:
                own_hits = [hit for hit in branch.hits if hit.family in names]
                if not own_hits or not shape.reachable(branch, target):
                    continue
                selecting = shape.selecting(branch)
                if selecting is None:
                    continue
                entry = merged.setdefault(
                    selecting.index,
                    {"branch": selecting, "hits": {}, "modules": {}, "decided": False, "target": target},
                )
                entry["hits"].update(dict.fromkeys(own_hits))
                entry["modules"].setdefault(module_name, where)
                entry["decided"] |= not potential and shape.taken(selecting, target) is True
        for entry in merged.values():
            out.append(_unsupported_record(rel, shape, entry, arch))
    return out


def _unsupported_record(rel: str, shape: Structure, entry: dict, arch: Arch) -> dict:
    branch, hits = entry["branch"], sorted(entry["hits"], key=lambda h: h.line)
    found_tokens = tokens(hits)
    wheres = list(entry["modules"].values())
    instructions = [hit for hit in hits if not hit.wrapper]
    condition = "#else" if branch.directive == "#else" else f"{branch.directive} {branch.condition}"
    verb = "admits" if shape.taken(branch, entry["target"]) is True else "may admit"
    if instructions:
        what = f"{', '.join(found_tokens)}, which ptxas rejects there"
    else:
        what = (
            f"{', '.join(found_tokens)}: CuTe/CUTLASS names for instructions {arch.name} lacks, which "
            "fail to build or trap at run time (CUTE_INVALID_CONTROL_PATH) when called"
        )
    more = f" (and {len(wheres) - 1} more modules)" if len(wheres) > 1 else ""
    return {
        "kind": "unsupported-instruction",
        "file": rel,
        "line": branch.line,
        "module": next(iter(entry["modules"])),
        # Wrapper names alone may compile to a trap instead of failing: never more than potential.
        "potential": not (entry["decided"] and instructions),
        "tokens": found_tokens,
        "message": (
            f"`{condition}` {verb} {arch.name} (compiled as {entry['target'].name}) around {what}; "
            f"{wheres[0]}{more}. {describe((instructions or hits)[:1], arch)[0]}"
        ),
    }


def _python_gate_paths(
    gates: list[dict], modules: list[_Module], paths: kernel_paths.Tree, arch: Arch
) -> list[dict]:
    """`unsupported-instruction` at each Python gate that admits `arch` and selects a JIT module compiling
    instructions `arch` lacks (kernel_paths): an or-chain or capability test through the functions it
    calls, a spec's supported_major_versions list or flag names through the spec (there only the tokens
    outside arch guards: _unsupported reports those inside at the guard, when the spec admits `arch`)."""
    out = []
    for gate in gates:
        if gate["kind"] not in ("python_arch_or", CAPABILITY_KIND) or arch.name not in gate["admits"]:
            continue
        try:
            source = paths.read(gate["file"])
        except OSError:
            continue
        found = kernel_paths.check(paths, gate["file"], source, gate["kind"], gate["line"], "", (arch,))
        record = _python_gate_record(gate["file"], gate["line"], gate["text"], found, arch)
        if record is not None:
            out.append(record)
    seen: set[tuple[str, int]] = set()
    for module in modules:
        gate = module.spec.gate
        if gate is None or not gate.admits(arch) or (module.file, gate.line) in seen:
            continue
        seen.add((module.file, gate.line))
        found = kernel_paths.check_specs(paths, [(module.file, module.spec)], (arch,))
        # Tokens under an arch guard of the module's closure are _unsupported's, at the guard.
        found.found = [finding for finding in found.found if not finding.guard]
        found.undecided = []
        record = _python_gate_record(module.file, gate.line, gate.text, found, arch)
        if record is not None:
            out.append(record)
    return out


# The Python kinds classified by the modules they keep from the arch. python_arch_test also selects modules
# (kernel_paths.SELECTING_KINDS: a recipe widening it is checked), but aot.py's `if has_smXX:` blocks build
# their own arch's modules; classifying those tests by module waits until the audit sample judges them.
_CLASSIFIED_BY_MODULES = ("python_arch_or", "python_arch_list", CAPABILITY_KIND)


def _classify_jit_gates(gates: list[dict], modules: list[_Module], paths: kernel_paths.Tree, arch: Arch) -> None:
    """Classify each Python gate that excludes `arch` by the JIT modules it keeps from it.

    A spec's arch list keeps its module from `arch`; an API gate (a decorator,
    an or-chain, a capability test) the modules its code path builds
    (kernel_paths). Widening is a port, not an edit, when those modules'
    sources use instructions `arch` lacks anywhere (under guards for other
    archs too: widening would build them without that code). An API gate whose
    modules cannot be followed is a blocker only when it admits an arch of
    `arch`'s family (sm_120 for sm_121); otherwise unknown.
    """
    spec_gates: dict[tuple[str, int], list[_Module]] = {}
    for module in modules:
        gate = module.spec.gate
        if gate is not None:
            spec_gates.setdefault((module.file, gate.line), []).append(module)
    for record in gates:
        if not record["excludes_arch"] or not record["kind"].startswith("python_"):
            continue
        held = spec_gates.get((record["file"], record["line"]))
        if held is not None:
            specs = [(m.file, m.spec) for m in held]
            names = " and ".join(dict.fromkeys(m.name for m in held))
            what = f"{names} is not built for {arch.name}"
        else:
            try:
                source = paths.read(record["file"])
            except OSError:
                continue
            found = (
                kernel_paths.check(
                    paths, record["file"], source, record["kind"], record["line"], record.get("symbol") or "", (arch,)
                )
                if record["kind"] in _CLASSIFIED_BY_MODULES
                else kernel_paths.PathCheck()
            )
            specs = [(f, s) for f, s in _selected_specs(paths, found.modules)]
            what = f"`{record.get('symbol') or record['text']}` does not run on {arch.name}"
            if specs:
                what += f" (it builds {', '.join(found.modules[:2])})"
        if not specs and held is None:
            family = [a for a in record["admits"] if Arch.parse(a).major == arch.major]
            if family:
                path = classify.Path(classify.NOTHING, f"{what}, while it admits {', '.join(family)}")
            else:
                path = classify.Path(
                    classify.UNDECIDED,
                    f"{what}; it is written for {', '.join(record['admits']) or 'no arch'} and the kernels it runs "
                    "are not followed",
                )
            lacking: list[str] = []
        else:
            path = classify.Path(classify.NOTHING, what)
            lacking = _module_lacking(paths, specs, arch)
        editable = record["kind"] in classify.EDITABLE_KINDS
        record["classification"], record["reason"] = classify.classify(True, path, lacking, editable)


def _selected_specs(paths: kernel_paths.Tree, names: list[str]) -> list[tuple[str, jit_specs.JitSpec]]:
    """The specs named `names` among the files kernel_paths has read."""
    wanted = set(names)
    return [(rel, spec) for rel, specs in paths._specs.items() for spec in specs if spec.module in wanted]


def _module_lacking(paths: kernel_paths.Tree, specs: list[tuple[str, jit_specs.JitSpec]], arch: Arch) -> list[str]:
    """Instructions (or CuTe/CUTLASS names for them) `arch` lacks anywhere in the modules' own sources and headers."""
    families = lacking(arch)
    hits: list[Hit] = []
    seen: set[str] = set()
    for _, spec in specs:
        if not spec.sources:
            continue
        closure = paths.closure(spec)
        for rel in closure.files:
            if rel in closure.library or rel in seen:
                continue
            seen.add(rel)
            data = paths.source(rel)
            if data is None or not may_hold(data, families):
                continue
            shape = paths._structure(rel, data)
            if shape is None:
                continue
            names = {family.name for family in families}
            found = [h for h in shape.top if h.family in names]
            found += [h for branch in shape.branches for h in branch.hits if h.family in names]
            hits += found
    instructions = [h for h in hits if not h.wrapper]
    found = describe(instructions or hits, arch)
    return found or _arch_tags(paths, specs, arch, seen)


# A CUTLASS 3.x kernel's ArchTag picks its collectives: Sm90 ones use wgmma, Sm100/103/110 ones tcgen05/UMMA.
_ARCH_TAG_RE = re.compile(rb"\bcutlass::arch::Sm(90|100|101|103|110)\b")


def _arch_tags(paths: kernel_paths.Tree, specs, arch: Arch, files: set[str]) -> list[str]:
    """The CUTLASS ArchTags of another family in the modules' own files: their kernels are built from
    collectives whose instructions `arch` lacks, even when only the CUTLASS headers hold the tokens."""
    for rel in sorted(files):
        data = paths.source(rel)
        match = _ARCH_TAG_RE.search(data) if data is not None and b"cutlass::arch::Sm" in data else None
        if match is not None and int(match.group(1)) // 10 != arch.major:
            line = data.count(b"\n", 0, match.start()) + 1
            return [f"{match.group().decode()} ({rel}:{line}): a CUTLASS kernel built from sm_{match.group(1).decode()} "
                    f"collectives, whose instructions {arch.name} lacks"]
    return []


def _owners(gates: list[dict], modules: list[_Module]) -> None:
    """`owner` of each gate that excludes the arch: the JIT module(s) compiling its file, or made by its spec."""
    compiling: dict[str, list[str]] = {}
    for module in modules:
        for rel in module.files:
            compiling.setdefault(rel, []).append(module.name)
        gate = module.spec.gate
        if gate is not None:
            compiling.setdefault(f"{module.file}:{gate.line}", []).append(module.name)
    for gate in gates:
        if not gate["excludes_arch"]:
            continue
        names = list(dict.fromkeys(compiling.get(f"{gate['file']}:{gate['line']}") or compiling.get(gate["file"], [])))
        if names:
            gate["owner"] = names[0] + (f" (and {len(names) - 1} more)" if len(names) > 1 else "")


def _python_gate_record(file: str, line: int, text: str, found, arch: Arch) -> dict | None:
    hits = sorted(found.found or found.undecided, key=lambda f: (not f.certain, f.hit.wrapper))
    if not hits:
        return None
    certain = [f for f in found.found if f.certain]
    first = next(iter(certain), next((f for f in hits if not f.hit.wrapper), hits[0]))
    found_tokens = list(dict.fromkeys(f.hit.token for f in hits))
    instructions = [f for f in found.found if not f.hit.wrapper]
    shown = ", ".join(found_tokens[:6]) + (f" and {len(found_tokens) - 6} more" if len(found_tokens) > 6 else "")
    if certain:
        what = f"{shown}, which ptxas rejects there"
    elif instructions:
        what = (
            f"{shown}, which ptxas rejects there if emitted: the first is in a header outside any arch guard, "
            "compiled only when a kernel calls it"
        )
    elif found.found:
        what = (
            f"{shown}: CuTe/CUTLASS names for instructions {arch.name} lacks, which fail to build or trap "
            "at run time (CUTE_INVALID_CONTROL_PATH) when called"
        )
    else:
        what = f"{shown} under `{first.guard}`, which codemod cannot decide for {first.target.name}"
    modules = " and ".join(found.modules[:2]) + (f" (and {len(found.modules) - 2} more)" if len(found.modules) > 2 else "")
    message = (
        f"`{_one_line(text)}` admits {arch.name}, so {modules} is built for it (compiled as {first.target.name}); "
        f"its sources use {what} (first at {first.where}). {describe([first.hit], arch)[0]}"
    )
    if found.unread:
        message += f". Not followed: {'; '.join(found.unread[:2])}"
    return {
        "kind": "unsupported-instruction",
        "file": file,
        "line": line,
        "module": first.module,
        # Only an instruction the target surely emits is definite; wrapper names may compile to a trap.
        "potential": not certain,
        "tokens": found_tokens,
        "message": message,
    }


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------- output


def dumps(data: dict) -> str:
    """JSON for `{"gates": [...], ...}` with one item per line: as readable as indent=2 for a few gates, and
    json's C encoder keeps it fast for tens of thousands (indent= falls back to the pure-Python one)."""
    parts = []
    for key, value in data.items():
        if isinstance(value, list):
            items = ",\n    ".join(json.dumps(item) for item in value)
            parts.append(f'  {json.dumps(key)}: [\n    {items}\n  ]' if value else f"  {json.dumps(key)}: []")
        else:
            parts.append(f"  {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(parts) + "\n}"


def to_json(result: ScanResult) -> dict:
    """`{"gates", "skipped", "hazards"}`; gates that exclude the arch carry `widenable` and `blockers` (cuda_guard)."""
    return {
        "gates": [dict(gate) for gate in result.gates],
        "skipped": [dict(item) for item in result.skipped],
        "hazards": [dict(hazard) for hazard in result.hazards],
    }


def _tool_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("codemod")
    except Exception:  # not installed: a source checkout on sys.path
        return None


# What a reader of each rule does about a result (SARIF `help`, required by GitHub code scanning).
RULE_HELP = {
    "gate-excludes-arch": (
        "GateExcludesArch",
        "If the feature should run on this GPU, widen the gate with a recipe (`codemod run RECIPE --dry-run` "
        "shows the edit); if the guarded code uses instructions the arch lacks (widenable: false), leave it.",
    ),
    "empty-kernel": (
        "EmptyKernel",
        "Widen the guard together with the JIT gate (`codemod run RECIPE` applies both), or narrow the JIT "
        "gate back; `codemod verify` fails a tree in this state.",
    ),
    "unsupported-instruction": (
        "UnsupportedInstruction",
        "Narrow the guard (or the Python gate that selects the module) so the arch does not compile these "
        "instructions, or keep the module's JIT gate from building it for this arch.",
    ),
}
INFORMATION_URI = "https://pypi.org/project/codemod/"


def _fingerprint(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:32]


def to_sarif(result: ScanResult, provenance: dict | None = None) -> dict:
    """The scan as a SARIF 2.1.0 log GitHub code scanning accepts: rules gate-excludes-arch, empty-kernel, unsupported-instruction.

    `provenance` (from repo.provenance: the repository's top folder, and its
    remote, commit and branch when known) makes every URI relative to the
    repository root, even when the scanned tree is a subfolder. Each result
    carries a partial fingerprint that survives line shifts: the rule, the
    file, the enclosing symbol and the normalized gate text (and which of the
    identical ones it is).
    """
    rule_ids = list(RULES)
    driver: dict = {
        "name": "codemod",
        "informationUri": INFORMATION_URI,
        "rules": [
            {
                "id": rule,
                "name": RULE_HELP[rule][0],
                "shortDescription": {"text": short},
                "fullDescription": {"text": full},
                "help": {"text": f"{full} {RULE_HELP[rule][1]}", "markdown": f"**{short}.** {full}\n\n**What to do:** {RULE_HELP[rule][1]}"},
                "defaultConfiguration": {"level": level},
            }
            for rule, (level, short, full) in RULES.items()
        ],
    }
    driver["version"] = _tool_version() or "0+unknown"
    root = Path(result.root).resolve()
    top = Path(provenance["root"]) if provenance else root
    prefix = root.relative_to(top).as_posix() if root != top and top in root.parents else ""
    prefix = prefix + "/" if prefix else ""
    seen: dict[str, int] = {}

    def fingerprint(rule: str, where: dict, text: str) -> dict:
        key = _fingerprint(rule, prefix + where["file"], where.get("symbol") or "", " ".join(text.split()))
        seen[key] = seen.get(key, 0) + 1
        return {"codemodGate/v1": f"{key}:{seen[key]}"}
    results = []
    for gate in result.gates:
        if not gate["excludes_arch"]:
            continue
        admitted = ", ".join(gate["admits"]) or "none"
        text = f"{gate['kind']} `{_one_line(gate['text'])}` excludes {result.arch.name} (admits {admitted})"
        properties = {"kind": gate["kind"], "classification": gate.get("classification"), "reason": gate.get("reason", "")}
        if gate.get("owner"):
            properties["owner"] = gate["owner"]
        text += f"; {gate.get('classification')}: {gate.get('reason', '')}" if gate.get("reason") else ""
        if "widenable" in gate:
            properties["widenable"] = gate["widenable"]
            properties["blockers"] = gate["blockers"]
            text += "; widenable" if gate["widenable"] else f"; not widenable: {'; '.join(gate['blockers'])}"
        results.append(_sarif_result("gate-excludes-arch", rule_ids, "note", text, gate, properties, prefix,
                                     fingerprint("gate-excludes-arch", gate, gate["text"])))
    for hazard in result.hazards:
        level = "warning" if hazard["potential"] else "error"
        properties = {"potential": hazard["potential"], "module": hazard.get("module")}
        if "tokens" in hazard:
            properties["tokens"] = hazard["tokens"]
        stable = re.sub(r"\b(?:line )?\d+\b", "#", hazard["message"])  # line numbers move; the finding does not
        results.append(_sarif_result(hazard["kind"], rule_ids, level, hazard["message"], hazard, properties, prefix,
                                     fingerprint(hazard["kind"], hazard, stable)))
    run: dict = {
        "tool": {"driver": driver},
        "originalUriBaseIds": {"SRCROOT": {"uri": top.as_uri() + "/"}},
        "results": results,
        "invocations": [_sarif_invocation(result.skipped, prefix)],
        "properties": {"arch": result.arch.name},
    }
    if provenance and provenance.get("revision"):
        vcs = {"repositoryUri": provenance.get("remote") or top.as_uri(), "revisionId": provenance["revision"],
               "mappedTo": {"uriBaseId": "SRCROOT"}}
        if provenance.get("branch"):
            vcs["branch"] = provenance["branch"]
        run["versionControlProvenance"] = [vcs]
    return {
        "$schema": "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json",
        "version": "2.1.0",
        "runs": [run],
    }


def _sarif_invocation(skipped: list[dict], prefix: str = "") -> dict:
    """The run's invocation: each file or folder skipped is a notification (with its reason), so it is not missed."""
    invocation: dict = {"executionSuccessful": True}
    if skipped:
        invocation["toolExecutionNotifications"] = [
            {
                "level": "warning",
                "message": {"text": f"skipped: {item['reason']}"},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": urllib.parse.quote(prefix + item["file"]), "uriBaseId": "SRCROOT"}
                        }
                    }
                ],
            }
            for item in skipped
        ]
    return invocation


def _sarif_result(rule: str, rule_ids: list[str], level: str, text: str, where: dict, properties: dict,
                  prefix: str = "", fingerprints: dict | None = None) -> dict:
    return {
        "ruleId": rule,
        "ruleIndex": rule_ids.index(rule),
        "level": level,
        "message": {"text": text},
        "partialFingerprints": fingerprints or {},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": urllib.parse.quote(prefix + where["file"]), "uriBaseId": "SRCROOT"},
                    "region": {"startLine": where["line"]},
                }
            }
        ],
        "properties": properties,
    }


def summary(result: ScanResult, top: int = 3) -> list[dict]:
    """Per gate kind: how many gates, how many exclude the arch, and the files with the most gates."""
    kinds: dict[str, dict] = {}
    for gate in result.gates:
        entry = kinds.setdefault(gate["kind"], {"kind": gate["kind"], "gates": 0, "excluding": 0, "files": {}})
        entry["gates"] += 1
        entry["excluding"] += gate["excludes_arch"]
        entry["files"][gate["file"]] = entry["files"].get(gate["file"], 0) + 1
    out = []
    for kind in sorted(kinds, key=lambda k: (-kinds[k]["gates"], k)):
        entry = kinds[kind]
        ranked = sorted(entry["files"].items(), key=lambda item: (-item[1], item[0]))
        out.append({**entry, "files": len(ranked), "top": ranked[:top]})
    return out


# Group headings: what the user does with each group.
GROUP_TITLES = {
    classify.BLOCKER: ("blockers", "{arch} gets nothing here and codemod has no edit for these: change them by hand"),
    classify.WIDENABLE: ("widenable", "{arch} gets nothing here; `codemod run RECIPE --dry-run` shows the widening"),
    classify.NEEDS_HUMAN: (
        "needs a human",
        "{arch} takes a fallback here, or the code uses instructions it lacks: decide, or port",
    ),
    classify.UNKNOWN: ("unknown", "codemod cannot tell what {arch} gets here: read the code"),
}
_COLORS = {classify.BLOCKER: "31", classify.WIDENABLE: "33", classify.NEEDS_HUMAN: "35", classify.UNKNOWN: "36",
           "hazards": "1;31", "specific": "1"}


def sibling(arch: Arch, universe: tuple[Arch, ...]) -> Arch | None:
    """The arch whose gates an arch-specific finding admits: sm_120 for sm_121 (the family's first member)."""
    if arch.minor == 0:
        return None
    first = Arch(arch.major, 0)
    return first if first in universe or first.plain in {a.plain for a in universe} else None


def groups(result: ScanResult) -> dict[str, list[dict]]:
    """The gates that exclude the arch, by classification, in file order (the four groups of the audit)."""
    out: dict[str, list[dict]] = {name: [] for name in classify.GROUPS}
    for gate in result.gates:
        if gate.get("classification") in out:
            out[gate["classification"]].append(gate)
    return out


def to_text(result: ScanResult, *, verbose: bool = False, quiet: bool = False, color: bool = False) -> str:
    """The audit: a summary (groups, kinds), the hazards, then the gates that exclude the arch by what to do.

    Gates specific to the arch (admitting its family's first member, e.g.
    sm_120 but not sm_121) come first, in their own section. `verbose` also
    lists the gates that exclude the arch harmlessly (covered) and those that
    admit it; `quiet` prints the summary and the hazards only; `color` puts
    ANSI colours on the headings.
    """

    def paint(text: str, key: str) -> str:
        return f"\033[{_COLORS[key]}m{text}\033[0m" if color else text

    arch = result.arch.name
    excluding = [g for g in result.gates if g["excludes_arch"]]
    files = len({g["file"] for g in result.gates})
    definite = [h for h in result.hazards if not h["potential"]]
    grouped = groups(result)
    covered = [g for g in result.gates if g.get("classification") == classify.COVERED]
    lines = [f"{len(result.gates)} gates in {files} files; {len(excluding)} exclude {arch}"]
    for name, members in grouped.items():
        title = GROUP_TITLES[name][0]
        lines.append(f"  {paint(f'{len(members):>5} {title}', name)}")
    lines.append(f"  {len(covered):>5} covered ({arch} takes other code there{'' if verbose else '; --verbose lists them'})")
    kinds = summary(result)
    if kinds:
        width = max(len(entry["kind"]) for entry in kinds)
        for entry in kinds:
            top = ", ".join(f"{name} ({count})" for name, count in entry["top"])
            lines.append(
                f"  {entry['kind']:<{width}}  {entry['gates']:>6} gates, {entry['excluding']:>5} exclude {arch}"
                f"  in {entry['files']} files; most in {top}"
            )
    lines.append(
        f"{len(result.hazards)} hazards for {arch}: {len(definite)} definite, "
        f"{len(result.hazards) - len(definite)} potential"
        + (f"; {len(result.modules)} JIT specs read ({result.layout} layout)" if result.layout else "")
    )
    if result.skipped:
        lines.append(f"{len(result.skipped)} skipped")
    if result.hazards:
        lines += ["", paint("hazards:", "hazards")]
        for hazard in result.hazards:
            tag = "potential " if hazard["potential"] else ""
            lines.append(f"  {hazard['file']}:{hazard['line']}: {tag}{hazard['kind']}: {hazard['message']}")
    if quiet:
        return "\n".join(lines) + "\n"
    first = sibling(result.arch, result.universe)
    specific = {id(g) for g in excluding if first is not None and classify.differs(g, first.name)}
    sections = []
    if first is not None:
        sections.append((f"specific to {arch} (they admit {first.name}, not {arch})", lambda g: id(g) in specific))
        sections.append((None, lambda g: id(g) not in specific))
    else:
        sections.append((None, lambda g: True))
    for heading, wanted in sections:
        chosen = {name: [g for g in members if wanted(g)] for name, members in grouped.items()}
        if heading is not None:
            total = sum(len(m) for m in chosen.values())
            lines += ["", paint(f"== {heading}: {total}", "specific")]
        elif first is not None:
            lines += ["", paint("== the rest", "specific")]
        for name, members in chosen.items():
            if not members:
                continue
            title, what = GROUP_TITLES[name]
            lines += ["", paint(f"{title} ({len(members)}): {what.format(arch=arch)}", name)]
            lines += [_entry(gate) for gate in members]
    if verbose and covered:
        lines += ["", f"covered ({len(covered)}): they exclude {arch}, which takes other code there"]
        lines += [_entry(gate) for gate in covered]
    admitting = [g for g in result.gates if not g["excludes_arch"]]
    if verbose and admitting:
        lines += ["", f"gates that admit {arch} (or may):"]
        for gate in admitting:
            lines.append(f"  {gate['file']}:{gate['line']}: {gate['kind']} {_one_line(gate['text'])}  {_admitted(gate)}")
    if result.skipped:
        lines += ["", "skipped:"]
        lines += [f"  {item['file']}: {item['reason']}" for item in result.skipped]
    return "\n".join(lines) + "\n"


def _entry(gate: dict) -> str:
    """One gate of the audit: where (file:line, enclosing function, owning JIT module), what, and why."""
    where = f"{gate['file']}:{gate['line']}"
    if gate.get("symbol"):
        where += f" in {gate['symbol']}"
    if gate.get("owner"):
        where += f" [{gate['owner']}]"
    return f"  {where}: {gate['kind']} {_one_line(gate['text'])}  {_admitted(gate)}\n      {gate.get('reason', '')}"


def _admitted(gate: dict) -> str:
    text = f"admits {', '.join(gate['admits']) or 'none'}"
    if gate["unknown"]:
        text += f"; unknown {', '.join(gate['unknown'])}"
    return f"({text})"
