"""verify: nvcc -E before and after on every arch, the evaluator fallback, the base-output cache.

The small tree has the shape of FlashInfer's `trtllm_allreduce.cuh`: PDL calls
under `__CUDA_ARCH__ >= 900 && < 1200` guards, a sibling header included with
quotes and a `__FILE__` use, so the base overlay must resolve relative
includes and the normalisation must hide the absolute paths.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from textwrap import dedent

import pytest

from codemods.core.arch import DEFAULT_ARCHS, parse_archs
from codemods.prove.overlay import shadow_tree
from codemods.prove.preprocess import verify

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")

OLD_GUARD = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"
NEW_GUARD = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))"

HEADER = "include/flashinfer/comm/x.cuh"
SIBLING = "include/flashinfer/exception.h"

SIBLING_TEXT = dedent(
    """\
    #pragma once
    #define FLASHINFER_CHECK(cond, msg) \\
      do { if (!(cond)) flashinfer_report(__FILE__, __LINE__, msg); } while (0)
    static const char* kExceptionFile = __FILE__;
    """
)

BASE_HEADER = dedent(
    f"""\
    #pragma once
    #include "../exception.h"

    __device__ void reduce(int* out) {{
    {OLD_GUARD}
      cudaGridDependencySynchronize();
    #endif
      FLASHINFER_CHECK(out != nullptr, "reduce");
      out[0] += 1;
    {OLD_GUARD}
      cudaTriggerProgrammaticLaunchCompletion();
    #endif
    }}

    __device__ void norm(int* out) {{
    {OLD_GUARD}
      cudaGridDependencySynchronize();
    #endif
      out[0] *= 2;
    }}

    #if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 900)
    __device__ void fallback() {{}}
    #endif
    """
)

GUARD_LINES = [5, 10, 16]
SMALL_ARCHS = parse_archs("sm_80,sm_90,sm_100,sm_120,sm_121")
TARGETS = parse_archs("sm_120,sm_121")
EXPECTED = {"sm_120": 3, "sm_121": 3}


def patched(header: str) -> str:
    return header.replace(OLD_GUARD, NEW_GUARD)


def make_tree(tmp_path: Path, base: str, work: str, path: str = HEADER) -> tuple[Path, dict[str, tuple[bytes, bytes]]]:
    """A work tree holding `work` at `path` and the sibling header; returns it with the `changed` map."""
    root = tmp_path / "work"
    for rel, text in ((SIBLING, SIBLING_TEXT), (path, work)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root, {path: (base.encode(), work.encode())}


def run(tmp_path: Path, base: str, work: str, *, path: str = HEADER, **options):
    root, changed = make_tree(tmp_path, base, work, path)
    options.setdefault("expected", EXPECTED)
    return verify(root, changed, SMALL_ARCHS, TARGETS, ["include"], **options)


def by_arch(report) -> dict:
    return {result.arch: result for result in report.results}


def summary(report) -> dict[str, tuple[str, bool, list[tuple[str, int]], list[tuple[str, int]]]]:
    return {
        r.arch: (r.status, r.ok, [(g.file, g.line) for g in r.gained], [(g.file, g.line) for g in r.lost])
        for r in report.results
    }


# ------------------------------------------------------------------ nvcc


@needs_nvcc
def test_dropped_upper_bound_gains_the_guarded_calls_on_targets_only(tmp_path):
    report = run(tmp_path, BASE_HEADER, patched(BASE_HEADER))

    assert (report.method, report.flags) == ("nvcc", ["-std=c++17"])
    assert report.ok, [r.detail for r in report.results]
    assert report.files == [HEADER]
    results = by_arch(report)
    for name in ("sm_80", "sm_90", "sm_100"):
        assert results[name].status == "identical"
        assert results[name].ok and not results[name].target
    for name in ("sm_120", "sm_121"):
        result = results[name]
        assert (result.status, result.ok, result.target, result.expected) == ("changed", True, True, 3)
        assert result.lost == []
        assert [(g.file, g.line) for g in result.gained] == [(HEADER, line) for line in GUARD_LINES]
        assert [g.text for g in result.gained] == [
            "cudaGridDependencySynchronize();",
            "cudaTriggerProgrammaticLaunchCompletion();",
            "cudaGridDependencySynchronize();",
        ]
        assert {g.guard for g in result.gained} == {NEW_GUARD.removeprefix("#if ")}


@needs_nvcc
def test_expected_count_that_does_not_match_is_not_ok(tmp_path):
    report = run(tmp_path, BASE_HEADER, patched(BASE_HEADER), expected={"sm_120": 2})

    assert not report.ok
    results = by_arch(report)
    assert not results["sm_120"].ok
    assert results["sm_120"].detail == "gained 3 region(s), expected 2"
    assert results["sm_121"].ok  # no count given for it


BODY_EDITED = patched(BASE_HEADER).replace(
    "  cudaTriggerProgrammaticLaunchCompletion();", "  cudaTriggerProgrammaticLaunchCompletion();\n  __syncwarp();"
)
SM80_ADMITTED = patched(BASE_HEADER).replace(NEW_GUARD, "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800))", 1)

WRONG_PATCHES = [
    pytest.param(
        patched(BASE_HEADER).replace("out[0] += 1;", "out[0] += 2;"),
        ["sm_80", "sm_90", "sm_100", "sm_120", "sm_121"],
        id="code-edit-outside-guards-changes-every-arch",
    ),
    pytest.param(
        BODY_EDITED,
        ["sm_90", "sm_100"],  # the targets gain the region either way
        id="edit-inside-an-sm90-region",
    ),
    pytest.param(
        SM80_ADMITTED,
        ["sm_80"],
        id="lower-bound-lowered-admits-sm80",
    ),
]


@needs_nvcc
@pytest.mark.parametrize("work, wrong", WRONG_PATCHES)
def test_wrong_patch_is_not_ok_and_names_the_arch(tmp_path, work, wrong):
    report = run(tmp_path, BASE_HEADER, work)

    assert not report.ok
    not_ok = [r.arch for r in report.results if not r.ok]
    assert not_ok == wrong
    for result in report.results:
        if not result.ok and not result.target:
            assert result.detail.startswith(f"{result.arch} is not a target but changed")
            assert HEADER in result.detail


@needs_nvcc
def test_else_branch_lost_on_a_target_is_not_ok(tmp_path):
    base = dedent(
        f"""\
        __device__ void wait() {{
        {OLD_GUARD}
          cudaGridDependencySynchronize();
        #else
          __syncthreads();
        #endif
        }}
        """
    )
    report = run(tmp_path, base, patched(base), expected=None)

    results = by_arch(report)
    assert [r.arch for r in report.results if not r.ok] == ["sm_120", "sm_121"]
    assert [(g.line, g.text) for g in results["sm_120"].gained] == [(2, "cudaGridDependencySynchronize();")]
    assert [(g.line, g.text) for g in results["sm_120"].lost] == [(4, "__syncthreads();")]
    assert results["sm_120"].detail == f"lost 1 region(s): {HEADER}:4"


@needs_nvcc
@pytest.mark.parametrize("nvcc", ["nvcc", None])
def test_adjacent_guards_are_two_regions(tmp_path, nvcc):
    base = dedent(
        f"""\
        __device__ void wait() {{
        {OLD_GUARD}
          cudaGridDependencySynchronize();
        #endif
        {OLD_GUARD}
          cudaTriggerProgrammaticLaunchCompletion();
        #endif
        }}
        """
    )
    report = run(tmp_path, base, patched(base), expected={"sm_120": 2}, nvcc=nvcc)

    assert report.ok
    assert [(g.line, g.text) for g in by_arch(report)["sm_120"].gained] == [
        (2, "cudaGridDependencySynchronize();"),
        (5, "cudaTriggerProgrammaticLaunchCompletion();"),
    ]


@needs_nvcc
def test_file_outside_include_dirs_is_preprocessed_itself(tmp_path):
    path = "csrc/kernels/allreduce.cu"
    base = f'#include "../../{HEADER}"\n' + BASE_HEADER.replace('#include "../exception.h"\n', "")
    (tmp_path / "work" / HEADER).parent.mkdir(parents=True)
    (tmp_path / "work" / HEADER).write_text(BASE_HEADER)
    report = run(tmp_path, base, patched(base), path=path)

    assert report.ok, [r.detail for r in report.results]
    assert [(g.file, g.line) for g in by_arch(report)["sm_121"].gained] == [(path, line) for line in GUARD_LINES]


@needs_nvcc
def test_nvcc_error_is_a_failed_arch_not_an_exception(tmp_path):
    work = patched(BASE_HEADER).replace('#include "../exception.h"', '#include "../exception.h"\n#include "missing.h"')
    report = run(tmp_path, BASE_HEADER, work)

    assert not report.ok
    for result in report.results:
        assert (result.status, result.ok) == ("failed", False)
        assert result.detail.startswith(f"{HEADER} (work): ")
        assert "missing.h" in result.detail
        assert "<root>" in result.detail  # absolute paths hidden


@needs_nvcc
def test_arch_specific_and_family_targets_are_preprocessed_as_such(tmp_path):
    root, changed = make_tree(tmp_path, BASE_HEADER, patched(BASE_HEADER))
    report = verify(root, changed, parse_archs("sm_90a,sm_100f,sm_120a,sm_120f"), parse_archs("sm_120a,sm_120f"), ["include"])

    assert report.ok
    assert [(r.arch, r.status, len(r.gained)) for r in report.results] == [
        ("sm_90a", "identical", 0), ("sm_100f", "identical", 0), ("sm_120a", "changed", 3), ("sm_120f", "changed", 3),
    ]


@needs_nvcc
def test_arch_nvcc_rejects_is_failed_with_its_message(tmp_path):
    root, changed = make_tree(tmp_path, BASE_HEADER, patched(BASE_HEADER))
    # CUDA 13.0 renamed sm_101 to sm_110 and rejects compute_101.
    report = verify(root, changed, parse_archs("sm_90,sm_101"), (), ["include"])

    assert not report.ok
    sm_90, sm_101 = report.results
    assert (sm_90.status, sm_90.ok) == ("identical", True)
    assert (sm_101.status, sm_101.ok) == ("failed", False)
    assert sm_101.detail == f"{HEADER}: nvcc fatal : Unsupported gpu architecture 'compute_101'"


@needs_nvcc
def test_second_run_reuses_cached_base_outputs(tmp_path):
    root, changed = make_tree(tmp_path, BASE_HEADER, patched(BASE_HEADER))
    cache = tmp_path / "cache"

    def once():
        return verify(root, changed, SMALL_ARCHS, TARGETS, ["include"], expected=EXPECTED, cache_dir=cache)

    first = once()
    assert (first.preprocessed, first.cached) == (10, 0)
    assert len(list(cache.glob("*.ii.gz"))) == 5

    second = once()
    assert (second.preprocessed, second.cached) == (5, 5)
    assert summary(second) == summary(first) and second.ok

    # An unchanged header the base output read has changed: its entry is stale.
    (root / SIBLING).write_text(SIBLING_TEXT + "#define FLASHINFER_EXTRA 1\n")
    third = once()
    assert (third.preprocessed, third.cached) == (10, 0)
    assert third.ok


# ------------------------------------------------------------------ evaluator


@needs_nvcc
@pytest.mark.parametrize(
    "work",
    [pytest.param(patched(BASE_HEADER), id="sm120-enable"), pytest.param(SM80_ADMITTED, id="sm80-admitted")],
)
def test_evaluator_agrees_with_nvcc(tmp_path, work):
    with_nvcc = run(tmp_path / "a", BASE_HEADER, work)
    without = run(tmp_path / "b", BASE_HEADER, work, nvcc=None)

    assert (with_nvcc.method, without.method) == ("nvcc", "evaluator")
    assert summary(without) == summary(with_nvcc)
    assert without.ok == with_nvcc.ok
    assert [g.text for g in by_arch(without)["sm_120"].gained] == [g.text for g in by_arch(with_nvcc)["sm_120"].gained]


def test_evaluator_fallback_when_nvcc_is_absent(tmp_path):
    report = run(tmp_path, BASE_HEADER, patched(BASE_HEADER), nvcc="codemod-no-such-nvcc")

    assert report.method == "evaluator"
    assert report.ok
    assert (report.preprocessed, report.cached, report.flags) == (0, 0, [])
    results = by_arch(report)
    assert [r.status for r in report.results] == ["identical"] * 3 + ["changed"] * 2
    assert [g.line for g in results["sm_121"].gained] == GUARD_LINES


def test_evaluator_refuses_changes_outside_guards(tmp_path):
    report = run(tmp_path, BASE_HEADER, BODY_EDITED, nvcc=None)

    assert not report.ok
    for result in report.results:
        assert result.status == "failed"
        assert result.detail == f"{HEADER}: changes outside arch guards; the evaluator judges guard conditions only"


def test_evaluator_else_branch_and_nesting(tmp_path):
    base = dedent(
        f"""\
        #ifndef X_CUH
        #define X_CUH
        #if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
        {OLD_GUARD}
          first();
        #elif defined(FLASHINFER_EXTRA)
          second();
        #else
          third();
        #endif
        #endif
        #endif
        """
    )
    report = run(tmp_path, base, patched(base), nvcc=None, expected=None)

    results = by_arch(report)
    # sm_80/90 never reach the inner chain; sm_100 does, and its verdict does not change.
    assert [r.status for r in report.results] == ["identical"] * 3 + ["changed"] * 2
    assert [(g.line, g.text) for g in results["sm_120"].gained] == [(4, "first();")]
    # FLASHINFER_EXTRA is unknown, so `second()` may have been active before: both it and `third()` are lost.
    assert [(g.line, g.text) for g in results["sm_120"].lost] == [(6, "second();"), (8, "third();")]


def test_non_cuda_files_are_ignored(tmp_path):
    root, changed = make_tree(tmp_path, BASE_HEADER, patched(BASE_HEADER))
    changed["flashinfer/jit/comm.py"] = (b"supported_major_versions=[9, 10]\n", b"supported_major_versions=[9, 10, 12]\n")
    report = verify(root, changed, SMALL_ARCHS, TARGETS, ["include"], nvcc=None)

    assert report.files == [HEADER]


def test_shadow_tree_reads_like_the_source_with_replacements(tmp_path):
    source = tmp_path / "src"
    for rel in ("a/b/c.h", "a/b/d.h", "a/e.h", "f.h"):
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text(rel)
    dest = tmp_path / "dest"

    shadow_tree(source, dest, {"a/b/c.h": b"new"})

    assert (dest / "a/b/c.h").read_bytes() == b"new" and not (dest / "a/b/c.h").is_symlink()
    assert (source / "a/b/c.h").read_text() == "a/b/c.h"
    for rel in ("a/b/d.h", "a/e.h", "f.h"):
        assert (dest / rel).read_text() == rel
    assert (dest / "f.h").is_symlink() and not (dest / "a").is_symlink()


# ------------------------------------------------------------------ real release


REAL_HEADER = "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"
REAL_INCLUDE_DIRS = [
    "flashinfer/data/include",
    "flashinfer/data/cutlass/include",
    "flashinfer/data/cutlass/tools/util/include",
    # flashinfer/logging.h includes <spdlog/...>; the wheel ships it here.
    "flashinfer/data/spdlog/include",
]


@pytest.mark.real
@needs_nvcc
def test_flashinfer_063_trtllm_allreduce(real_unpacked, tmp_path):
    unpacked = real_unpacked["flashinfer"]
    base = (unpacked / REAL_HEADER).read_bytes()
    assert base.count(OLD_GUARD.encode()) == 13
    work = base.replace(OLD_GUARD.encode(), NEW_GUARD.encode())
    # The work tree: the read-only unpacked wheel through symlinks, with the patched header in place.
    root = tmp_path / "work"
    shadow_tree(unpacked, root, {REAL_HEADER: work})
    changed = {REAL_HEADER: (base, work)}
    targets = parse_archs("sm_120,sm_121")

    def once():
        started = time.perf_counter()
        report = verify(
            root, changed, DEFAULT_ARCHS, targets, REAL_INCLUDE_DIRS,
            expected={"sm_120": 13, "sm_121": 13}, cache_dir=tmp_path / "cache",
        )
        return report, time.perf_counter() - started

    first, first_seconds = once()
    second, second_seconds = once()
    print(f"\nverify trtllm_allreduce.cuh on {len(DEFAULT_ARCHS)} archs: {first_seconds:.1f} s, cached {second_seconds:.1f} s")

    assert first.method == "nvcc"
    assert first.ok, [(r.arch, r.detail) for r in first.results]
    results = by_arch(first)
    for name in ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103", "sm_110"):
        assert results[name].status == "identical", results[name].detail
    for name in ("sm_120", "sm_121"):
        gained = results[name].gained
        assert len(gained) == 13 and results[name].lost == []
        assert all(g.file == REAL_HEADER for g in gained)
        assert all(
            "cudaGridDependencySynchronize" in g.body or "cudaTriggerProgrammaticLaunchCompletion" in g.body
            for g in gained
        )
        assert sum(g.text.startswith(("cudaGridDependencySynchronize", "cudaTriggerProgrammatic")) for g in gained) == 12
        guard_lines = [i for i, line in enumerate(base.decode().splitlines(), 1) if line == OLD_GUARD]
        assert [g.line for g in gained] == guard_lines
    assert (second.preprocessed, second.cached) == (9, 9)
    assert summary(second) == summary(first)

    evaluated = verify(root, changed, DEFAULT_ARCHS, targets, REAL_INCLUDE_DIRS, nvcc=None)
    assert evaluated.method == "evaluator"
    assert summary(evaluated) == summary(first)
