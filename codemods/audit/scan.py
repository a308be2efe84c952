"""`codemod scan`: every arch gate in a tree, and the hazards of one arch.

`scan(root, arch)` lists the files of the tree (audit.listing), skips binary
files, and parses only the files whose bytes can hold a gate (ripgrep finds
them, audit.finder; audit.prefilter decides): C, C++ and CUDA files in audit.c_files, Python files in
audit.python_files. For each gate it reports what it admits and whether it
excludes `arch`; a cuda_guard gate that excludes `arch` also says whether it
is *widenable*: no token of an instruction `arch` lacks in the region it
guards. Files that cannot be decoded or parsed are skipped with a reason.
Results are cached (audit.cache), and files are parsed in a process pool
when there are many (audit.pool).

In a FlashInfer tree (checkout, wheel or package layout; audit.jit_modules)
it also reads the JIT specs and follows each spec's sources through their
`#include` closure inside the tree, and reports `empty-kernel` and
`unsupported-instruction` hazards (audit.jit_hazards).

`check(result)` is True when any hazard is not potential. Rendering is in
render.scan_text, render.scan_json and render.sarif.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Executor, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from codemods.audit import areas, finder, incremental
from codemods.audit.cache import (
    Index,
    MeaningsMemo,
    Snapshot,
    cache_limit,
    context_key,
    load_object,
    objects_folder,
    prune_cache,
)
from codemods.audit.incremental import Change, Previous
from codemods.audit.jit_classify import (
    classify_jit_gates,
    in_ported_modules,
    outside_the_package,
    owners,
    uncalled_guards,
)
from codemods.audit.jit_hazards import empty_kernels, python_gate_paths, unsupported
from codemods.audit.jit_modules import (
    Layout,
    Module,
    TreeFiles,
    closures_over,
    detect,
    read_modules,
)
from codemods.audit.listing import NOT_REGULAR, list_files, read_regular, stamp_of
from codemods.audit.jit_users import importer
from codemods.audit.map_callers import keys_callers_pass
from codemods.audit.parallel import callers_started, searched_trees, ways_started
from codemods.audit.pool import POOL_MINIMUM, Feeder, Outcome, make_chunks, scan_chunk, usable_cpus
from codemods.audit.python_advice import ADVISED, deliberate_exclusion
from codemods.audit.records import Context, FileScan, ScanResult
from codemods.core import errors
from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.core.lazy import LazyModule
from codemods.core.pytrees import ParsedFiles
from codemods.core.source import quiet_compiler_warnings
from codemods.cpp.structure import Structure
from codemods.gates.python.predicates.reading import Meaning

if TYPE_CHECKING:
    from codemods.jit import kernel_paths
    from codemods.jit import specs as jit_specs
else:  # imported on first use: a scan of C sources, or one answered from the cache, needs none of it
    kernel_paths = LazyModule("codemods.jit.kernel_paths")


@dataclass
class _Job:
    """One tree of a scan: what the cache answered, and the files left to read."""

    root: Path
    layout: Layout | None
    context: Context
    index: Index | None
    rels: list[str]
    unlisted: list[dict] = field(default_factory=list)  # skipped before any file is read: folders, special files
    regular: set[str] = field(default_factory=set)  # the listed files that are regular files (rg blocks on a FIFO)
    scans: dict[str, FileScan] = field(default_factory=dict)
    todo: list[tuple[str, int, bool]] = field(default_factory=list)  # path, size, runtime check found (audit.finder)
    unread: list[Outcome] = field(default_factory=list)  # files the finder found nothing in: never read
    stats: dict = field(default_factory=dict)
    snapshot: Snapshot | None = None
    result: ScanResult | None = None  # answered whole from the snapshot
    touched: dict[str, list[int] | None] = field(default_factory=dict)  # paths the assembly looked at
    words: set[bytes] = field(default_factory=set)  # the words the assembly searched the Python files for
    parsed: set[str] = field(default_factory=set)  # the files parsed
    previous: Previous | None = None  # the last scan, to patch when few files changed (audit.incremental)
    # unchanged files whose results are in the cache, by content hash, not loaded while a patch may do without them
    deferred: dict[str, tuple[str, os.stat_result]] = field(default_factory=dict)
    started: float = 0.0
    listed: float = 0.0


def scan(
    root: Path, arch: Arch, universe: tuple[Arch, ...] = DEFAULT_ARCHS, jobs: int = 0, *, include_all: bool = False,
    hazards: bool = True, cache: Path | None = None, progress: Callable[[int, int], None] | None = None,
    exclude: tuple[str, ...] = (),
) -> ScanResult:
    """Gates and hazards for `arch` in the tree at `root`.

    `jobs` > 1 parses files in that many processes; 1 parses in this
    process; 0 picks the CPUs this process may use (pool.usable_cpus), or
    this process for small trees.
    `include_all` also scans binary files and files .gitignore excludes.
    `hazards=False` lists the gates only: no widenability (no #if
    structure is built) and no hazards (no JIT spec is read).
    `cache` is a folder for per-file results (`cache.default_cache()`), None for
    none. `progress(done, total)` is called as files are done. `exclude`:
    globs of files left out of the result, besides the project's own
    (audit.areas: they are still read for the others' analysis).
    """
    return scan_many(
        [root], arch, universe, jobs, include_all=include_all, hazards=hazards, cache=cache, progress=progress,
        exclude=exclude,
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
    exclude: tuple[str, ...] = (),
) -> list[ScanResult]:
    """`scan` of several trees at once: one pool of workers reads the files of all of them.

    A tree whose every file is unchanged since the last scan with the same
    settings (same size, mtime and inode, none modified close to that scan)
    is answered whole from the cache's snapshot of that scan's result.
    """
    universe = tuple(dict.fromkeys((*universe, arch)))
    size = jobs if jobs > 0 else usable_cpus()
    prepared: list[_Job] = []
    outcomes: list[list[Outcome]] = []
    results: dict[int, ScanResult] = {}
    remaining: dict[int, int] = {}  # per tree: chunks not back yet
    pending: set = set()
    pool: ProcessPoolExecutor | None = None
    feeder: Feeder | None = None  # the chunks, a few at a time: what an assembly submits waits behind few of them
    counts = {"done": 0, "total": 0}

    def tick(files: int) -> None:
        counts["done"] += files
        if progress is not None:
            progress(counts["done"], counts["total"])

    def collect(block: bool) -> None:
        """Take the chunks that are back; a tree whose chunks are all back is finished at once (its
        hazards are worked out here while the workers read the next trees)."""
        nonlocal pending
        while feeder is not None:
            pending |= set(feeder.taken(block=block and not pending))
            if not pending:
                return
            finished, pending = wait(pending, timeout=None if block else 0, return_when=FIRST_COMPLETED)
            if not finished:
                return
            for future in finished:
                number, part = future.result()
                outcomes[number] += part
                tick(len(part))
                remaining[number] -= 1
                if not remaining[number]:
                    results[number] = _finish(prepared[number], outcomes[number], size, pool)

    try:
        # Each tree is listed and its files handed to the workers before the next tree is listed.
        for number, root in enumerate(roots):
            job = _prepare(Path(root), arch, universe, include_all, hazards, cache)
            prepared.append(job)
            outcomes.append([])
            counts["total"] += len(job.rels)
            tick(len(job.rels) - len(job.todo))
            wanted = size > 1 and (jobs > 0 or len(job.todo) >= POOL_MINIMUM)
            chunks = make_chunks(job.todo, size if pool is not None or wanted else 1)
            if pool is None and wanted and len(chunks) > 1:
                pool = ProcessPoolExecutor(max_workers=size, initializer=quiet_compiler_warnings)
                feeder = Feeder(pool, 2 * size)
            if pool is None:
                for rels in chunks:
                    _, part = scan_chunk((number, job.context, rels))
                    outcomes[number] += part
                    tick(len(part))
                results[number] = _finish(job, outcomes[number], 1)
                continue
            remaining[number] = len(chunks)
            assert feeder is not None
            for rels in chunks:
                feeder.add(scan_chunk, (number, job.context, rels))
            if not chunks:
                results[number] = _finish(job, outcomes[number], size, pool)
            collect(block=False)
        collect(block=True)
    except BrokenProcessPool:  # a worker killed (the out-of-memory killer): every other future fails with it
        raise errors.WorkerDied(f"one of this scan's {size} worker processes ended abruptly, reading {_trees(roots)}") from None
    finally:
        if feeder is not None:
            feeder.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    finished = [results[number] for number in range(len(roots))]
    for root, result in zip(roots, finished):  # after the snapshot is saved: it holds every file's records
        result.stats["excluded"] = areas.place(
            result.gates, result.hazards, result.skipped, areas.for_tree(Path(root)).adding(exclude)
        )
    if cache is not None and any(result.stats["analysed"] for result in finished):
        prune_cache(Path(cache), cache_limit())
    return finished


def _trees(roots: list[Path]) -> str:
    shown = ", ".join(str(root) for root in roots[:3])
    return shown + (f" and {len(roots) - 3} more trees" if len(roots) > 3 else "")


def _prepare(
    root: Path, arch: Arch, universe: tuple[Arch, ...], include_all: bool, hazards: bool, cache: Path | None
) -> _Job:
    """List the tree, and take from the cache what it already knows."""
    started = time.perf_counter()
    layout = detect(root)
    rels, unlisted = list_files(root, include_all)
    meanings = project_meanings(root, cache)
    deliberate = deliberate_predicates(root, meanings, arch)
    listed = time.perf_counter()
    context = Context(
        root=str(root),
        arch=arch,
        universe=universe,
        jit=layout.jit if layout else None,
        layout=layout is not None,
        include_all=include_all,
        hazards=hazards,
        cache=objects_folder(cache) if cache is not None else None,
        key=context_key(arch, universe, layout is not None, hazards, _digest(meanings) + repr(deliberate)),
        meanings=meanings,
        deliberate=deliberate,
    )
    mode = f"{int(include_all)}{int(hazards)}"
    index = Index.load(Path(cache), root, mode) if cache is not None else None
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
    job.regular = {rel for rel, _ in statuses}
    entries = [index.lookup(rel, status) for rel, status in statuses] if index is not None else []
    if index is not None and cache is not None:
        job.snapshot = Snapshot(Path(cache), root, mode, context.key, unlisted)
        if all(entry is not None for entry in entries):
            job.result = job.snapshot.load(root, arch, universe, index)
            if job.result is not None:
                job.stats["parsed"] = job.result.stats["parsed"]
                job.stats["snapshot"] = True
                job.stats["cache_hits"] = len(statuses)
                job.stats["binary"] = sum(entry is not None and entry[3] == "binary" for entry in entries)
                return job
        job.previous = job.snapshot.previous(root, arch, universe, index, layout.name if layout else "")
    statuses_by_rel = dict(statuses)
    for position, (rel, status) in enumerate(statuses):
        entry = entries[position] if index is not None else None
        if entry is not None:
            known = entry[3]
            if known in ("", "binary"):
                job.stats["cache_hits"] += 1
                job.stats["binary"] += known == "binary"
                continue
            if job.previous is not None:  # loaded only if the last result cannot be patched
                job.stats["cache_hits"] += 1
                job.deferred[rel] = (known, status)
                continue
            item = load_object(context, known, rel)
            if item is not None:
                job.stats["cache_hits"] += 1
                job.scans[rel] = item
                continue
        job.todo.append((rel, status.st_size, False))
    found = finder.find(root, [rel for rel, _, _ in job.todo])
    kept = []
    for rel, size, _ in job.todo:
        if rel in found.candidates:
            kept.append((rel, size, rel in found.runtime))
        else:
            job.unread.append(Outcome(rel, stamp_of(statuses_by_rel[rel]), "", None))
    job.todo = kept
    return job


def project_meanings(root: Path, cache: Path | None = None) -> dict[str, Meaning] | None:
    """What each arch predicate of the project at `root` admits, read from its definitions in the project's
    predicate files (plan.widen.meanings_for, as `codemod run` reads them); None when no project is known there.
    With a `cache`, taken from the last scan's reading while the files it read hold the same bytes."""
    from codemods.plan.widen import meanings_for
    from codemods.recipes.load import detect as detect_project

    try:
        tree = detect_project(root)
    except errors.UnknownProject:
        return None
    memo = MeaningsMemo(cache, root, f"{tree.project.name}|{tree.layout.name}") if cache is not None else None
    contents: dict[str, bytes | None] = {}

    def read_once(rel: str) -> bytes | None:  # None: no regular file there, or none that can be read
        if rel not in contents:
            try:
                found = read_regular(root / rel)
            except OSError:
                found = None
            contents[rel] = found[0] if found is not None else None
        return contents[rel]

    kept = memo.load(read_once) if memo is not None else None
    if kept is not None:
        return kept
    read: set[str] = set()

    def reading(rel: str) -> bytes:
        read.add(rel)
        data = read_once(rel)
        if data is None:
            raise FileNotFoundError(rel)
        return data

    meanings = meanings_for(tree.project, "", b"", tree, reading)
    if memo is not None:
        memo.save({rel: MeaningsMemo.digest(contents[rel]) for rel in read}, meanings)
    return meanings


def deliberate_predicates(
    root: Path, meanings: dict[str, Meaning] | None, arch: Arch
) -> tuple[tuple[str, str], ...]:
    """The project's arch predicates that exclude `arch` and whose definition's comment says so on purpose
    (`# RTX Blackwell. Unlike is_sm120_supported(), this excludes SM121/GB10.` over `def is_sm120()`), with the
    comment's words: a gate calling one leaves the arch out by choice."""
    found = []
    texts: dict[str, bytes | None] = {}
    for name, meaning in sorted((meanings or {}).items()):
        file, _, line = meaning.where.rpartition(":")
        if meaning.caps is None or (arch.major, arch.minor) in meaning.caps or not file or not line.isdigit():
            continue
        if file not in texts:
            read = read_regular(root / file)
            texts[file] = read[0] if read is not None else None
        data = texts[file]
        said = deliberate_exclusion(data, int(line), int(line), arch) if data is not None else None
        if said is not None:
            found.append((name, said))
    return tuple(found)


def _digest(meanings: dict[str, Meaning] | None) -> str:
    if meanings is None:
        return ""
    text = "|".join(f"{name}={sorted(m.caps) if m.caps is not None else m.reason}" for name, m in sorted(meanings.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _finish(job: _Job, outcomes: list[Outcome], workers: int, pool: Executor | None = None) -> ScanResult:
    """The tree's result from its files' results: gates in file order, JIT modules, hazards (part of them read in
    `pool`'s workers, when given, while this process reads the rest)."""
    stats, index, scans = job.stats, job.index, job.scans
    finished_at = time.perf_counter()
    if job.result is not None:
        result = job.result
    else:
        changed = [*job.unread, *outcomes]
        patched = _patch(job, changed) if job.previous is not None else None
        stats["incremental"] = patched is not None
        if patched is None:
            changed += _load_deferred(job)
        for outcome in changed:
            stats["analysed"] += 1
            stats["binary"] += outcome.digest == "binary"
            stats["reused"] += outcome.reused
            if index is not None and outcome.stamp is not None:
                index.record(outcome.rel, outcome.stamp, outcome.digest)
            if outcome.item is not None:
                scans[outcome.rel] = outcome.item
        if index is not None:
            index.save()
        result = patched if patched is not None else _assemble(job, pool)
        stats["parsed"] = len(job.parsed)
        if job.snapshot is not None and index is not None:
            job.snapshot.save(index, result, job.parsed, job.touched, job.words)
    stats.update(
        cpus=usable_cpus(),
        jobs=workers,
        list_seconds=round(job.listed - job.started, 3),
        parse_seconds=round(finished_at - job.listed, 3),
        seconds=round(time.perf_counter() - job.started, 3),
    )
    result.stats = stats
    return result


def _load_deferred(job: _Job) -> list[Outcome]:
    """The cached results of the unchanged files, for a whole assembly; a file whose result is no longer in the
    cache (pruned) is read again, as the workers read it: its outcome is returned."""
    missing: dict[str, os.stat_result] = {}
    for rel, (known, status) in job.deferred.items():
        item = load_object(job.context, known, rel)
        if item is None:
            missing[rel] = status
        else:
            job.scans[rel] = item
    job.deferred = {}
    if not missing:
        return []
    job.stats["cache_hits"] -= len(missing)
    found = finder.find(job.root, list(missing))
    unread = [Outcome(rel, stamp_of(status), "", None) for rel, status in missing.items() if rel not in found.candidates]
    read = [(rel, rel in found.runtime) for rel in missing if rel in found.candidates]
    return unread + scan_chunk((0, job.context, read))[1]


def _patch(job: _Job, outcomes: list[Outcome]) -> ScanResult | None:
    """The last scan's result with the changed files' records made again, when nothing else depends on them
    (audit.incremental); None when the whole tree must be assembled."""
    previous, index = job.previous, job.index
    assert previous is not None and index is not None
    changes = [Change(o.rel, o.digest, o.item, o.stamp) for o in outcomes]
    seen = {change.rel for change in changes}
    changes += [Change(rel, None, None, None) for rel in previous.entries if rel not in job.regular and rel not in seen]

    def read(rel: str) -> bytes | None:
        found = read_regular(job.root / rel) if rel in job.regular else None
        return None if found is None else found[0]

    context = job.context
    patched = incremental.patch(previous, changes, read, index.settled, str(job.root), context.arch, context.hazards)
    if patched is None:
        return None
    result, job.touched, job.parsed = patched
    job.words = set(previous.words)
    return result


def _assemble(job: _Job, pool: Executor | None = None) -> ScanResult:
    root, layout, context = job.root, job.layout, job.context
    arch, universe, hazards = context.arch, context.universe, context.hazards
    result = ScanResult(root, arch, universe, layout=layout.name if layout else "")
    structures: dict[str, Structure] = {}
    specs: list[tuple[str, jit_specs.JitSpec]] = []
    for rel in sorted(job.scans):
        item = job.scans[rel]
        result.gates += item.gates
        if item.parsed:
            job.parsed.add(rel)
        if item.skipped:
            result.skipped.append({"file": rel, "reason": item.skipped})
        if item.structure is not None:
            structures[rel] = item.structure
        specs += [(rel, spec) for spec in item.specs]
    result.skipped += [dict(item) for item in job.unlisted]
    modules: list[Module] = []
    all_specific = False
    tree = TreeFiles(root)
    python = (posixpath.dirname(layout.jit) or ".") if layout is not None else "."
    own = _python_files(job.rels, python, layout) if layout is not None else tuple(r for r in job.rels if r.endswith(".py"))
    parsed = ParsedFiles()  # the Python trees every reader below shares, within one memory budget
    # the Python files for the callers' keys and the JIT ways in; rg says which of them hold a word (the regular
    # ones: the others are read as they are found, and read_regular refuses what is not a file)
    searched = [rel for rel in own if rel in job.regular]

    trees = searched_trees(tree.read, parsed, root, searched, job.words)
    # the keys an arch-keyed map sees are what its function's callers pass: read in a worker while this process
    # follows the JIT modules (neither reads what the other writes), else here
    started = layout is not None and hazards
    keys = callers_started(pool, str(root), result.gates, own, searched, arch, tree, job.words) if started else None
    if hazards and keys is None:
        keys_callers_pass(result.gates, trees, own, arch)
    if layout is not None and hazards:
        all_specific = kernel_paths.all_specific(tree.read, python)
        closures = closures_over(tree, layout)
        modules = read_modules(specs, closures, arch)
        ahead = ways_started(pool, str(root), result.gates, modules, own, searched, tree, job.words)
        result.modules = [module.record for module in modules]
        result.hazards = empty_kernels(modules, structures, arch, universe, all_specific, tree.read)
        paths = kernel_paths.Tree(python, closures, tree.read, all_specific, parsed=parsed)
        for rel in dict.fromkeys(rel for rel, _ in specs):
            paths.know_specs(rel, [spec for file, spec in specs if file == rel])
        result.hazards += python_gate_paths(result.gates, modules, paths, arch)
        classify_jit_gates(result.gates, modules, paths, arch, own, trees, ahead)
        if keys is not None:  # before the passes below, which read the map records too
            keys()
        if ahead is not None:
            ahead.settle()
        everything = [rel for rel in job.rels if rel.endswith(".py") and rel in job.regular]  # tests import too
        imports = searched_trees(tree.read, parsed, root, everything, job.words)
        outside_the_package(
            result.gates, tree.exists, python, lambda rel, copy: importer(imports, everything, rel, copy, {".", posixpath.dirname(python)})
        )  # fmt: skip
        uncalled_guards(result.gates, modules, tree.read)
        in_ported_modules(result.gates, modules)
        owners(result.gates, modules)
    job.touched = tree.touched
    if hazards:
        result.hazards += unsupported(modules, structures, arch, all_specific)
    for gate in result.gates:
        gate.pop(ADVISED, None)
    result.gates.sort(key=lambda g: (g["file"], g["line"]))
    result.skipped.sort(key=lambda s: s["file"])
    result.hazards.sort(key=lambda h: (h["file"], h["line"], h["kind"]))
    return result


def _python_files(rels: list[str], python: str, layout: Layout) -> tuple[str, ...]:
    """The package's own Python files: under its folder, not under the folder of its bundled sources
    (a wheel's `flashinfer/data`, which also holds CUTLASS's Python)."""
    data = posixpath.commonpath([layout.csrc, layout.include])
    inside = "" if python == "." else python.rstrip("/") + "/"
    bundled = data + "/" if data and data.startswith(inside) and data != python else None
    return tuple(
        rel for rel in rels
        if rel.endswith(".py") and rel.startswith(inside) and not (bundled and rel.startswith(bundled))
    )


def check(result: ScanResult) -> bool:
    """True when the scan found a hazard that is not merely potential (`scan --check` fails then)."""
    return any(not hazard["potential"] for hazard in result.hazards)
