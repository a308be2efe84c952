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

The parts: codemods.prove.nvcc (the nvcc runs, the stand-ins, the cache),
prove.outputs (comparing outputs), prove.branches (the changed files' `#if`
branches, over codemods.cpp's one structure, and the evaluator),
prove.doubts (guards a stand-in may decide), prove.results (the records
and how an arch is judged).

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

`half_patched` are `codemod scan`'s empty-kernel hazards
(codemods.audit.jit_modules): a JIT module whose gate admits a target while
a guard in its sources compiles code out there. A tree in that state (a JIT
gate widened without its guards) fails.

This module runs subprocesses and writes temp files; it never runs git and
never prints.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from codemods.core.arch import Arch
from codemods.prove.branches import FilePair, evaluate
from codemods.prove.nvcc import Preprocessor, nvcc_version
from codemods.prove.results import VerifyReport, judge

if TYPE_CHECKING:
    from codemods.audit.empty_kernels import EmptyKernel

CUDA_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".inl")
# FlashInfer's JIT compiles with -std=c++17 (flashinfer/jit/core.py); nvcc 13.0 defaults to it too.
DEFAULT_FLAGS: tuple[str, ...] = ("-std=c++17",)


def is_cuda_source(path: str) -> bool:
    """Whether a path is a CUDA/C++ source or header the proof preprocesses."""
    return path.endswith(CUDA_SUFFIXES)


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
    regions it must gain. `half_patched` (from audit.empty_kernels.find) fail
    their arch. `jobs` is the number of parallel nvcc runs (0: one per CPU).
    Falls back to the evaluator when `nvcc` is None or not found.
    """
    started = time.perf_counter()
    files = sorted(path for path in changed if is_cuda_source(path))
    sources = {path: changed[path] for path in files}
    archs = tuple(dict.fromkeys(archs))
    universe = tuple(dict.fromkeys((*archs, *targets)))
    structures = {path: FilePair.read(path, *sources[path], universe) for path in files}
    found = shutil.which(nvcc) if nvcc else None
    version = nvcc_version(found) if found else None
    if version is None:
        verdicts = {arch: evaluate(structures, arch) for arch in archs}
        method, preprocessed, cached = "evaluator", 0, 0
    else:
        preprocessor = Preprocessor(
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
    results = [judge(arch, verdicts[arch], arch in targets, expected, half_patched) for arch in archs]
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


def _include_dir(path: str) -> str:
    path = posixpath.normpath(path.replace("\\", "/")).strip("/")
    return "" if path == "." else path
