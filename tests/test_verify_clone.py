"""`codemod verify` on a plain clone: submodules not initialised, JIT gates widened without their guards.

The superproject has FlashInfer's checkout shape (examples/flashinfer plus a
`logging.h` that includes spdlog, as FlashInfer's does) and `3rdparty/spdlog`
and `3rdparty/cutlass` as real git submodules of small local repositories.
Each test works on a `git clone` of a bare copy without `--recurse-submodules`:
the two folders are empty, so nvcc cannot find `spdlog/spdlog.h` unless
verify stands it in.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import EXAMPLES, git

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA 13) is installed here and in CI")

HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"
COMM = "flashinfer/jit/comm.py"
ARCHS = ("--archs", "sm_90,sm_120,sm_121")
SPDLOG_HEADERS = ["spdlog/sinks/stdout_color_sinks.h", "spdlog/spdlog.h"]
PDL_GUARD = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"

LOGGING_H = """\
// In the shape of FlashInfer's include/flashinfer/logging.h: spdlog comes from 3rdparty/spdlog.
#pragma once

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#define FLASHINFER_LOG_INFO(...) spdlog::info(__VA_ARGS__)

namespace flashinfer {
inline void set_log_level() { auto sink = spdlog::sinks::stdout_color_sink_mt(); (void)sink; }
}  // namespace flashinfer
"""

SPDLOG = {
    "include/spdlog/spdlog.h": "#pragma once\nnamespace spdlog {\ntemplate <typename... Args>\ninline void info(const char*, Args&&...) {}\n}  // namespace spdlog\n",
    "include/spdlog/sinks/stdout_color_sinks.h": "#pragma once\nnamespace spdlog {\nnamespace sinks {\nstruct stdout_color_sink_mt {};\n}  // namespace sinks\n}  // namespace spdlog\n",
}
CUTLASS = {
    "include/cutlass/arch/config.h": (
        "#pragma once\n"
        "#if defined(__CUDACC_VER_MAJOR__) && (__CUDACC_VER_MAJOR__ >= 12)\n"
        "#define CUTLASS_ARCH_MMA_SM90_SUPPORTED 1\n"
        "#endif\n"
    ),
}


def _library(folder: Path, files: dict[str, str]) -> Path:
    """A small git repository holding `files`, and its bare copy (the submodule URL)."""
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    git(folder, "init", "-q", "-b", "main")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "headers")
    bare = folder.with_name(folder.name + ".git")
    git(folder.parent, "clone", "-q", "--bare", str(folder), str(bare))
    return bare


@pytest.fixture(scope="module")
def origin(tmp_path_factory) -> dict[str, Path]:
    """The bare superproject (with its two submodules) and the libraries' own folders (the real headers)."""
    base = tmp_path_factory.mktemp("origin")
    libs = {"spdlog": base / "spdlog", "cutlass": base / "cutlass"}
    bares = {"spdlog": _library(libs["spdlog"], SPDLOG), "cutlass": _library(libs["cutlass"], CUTLASS)}
    work = base / "flashinfer"
    shutil.copytree(EXAMPLES / "flashinfer", work)
    (work / "include/flashinfer/logging.h").write_text(LOGGING_H)
    header = work / HEADER
    text = header.read_text()
    text = text.replace("#include <cuda_runtime.h>\n", '#include <cuda_runtime.h>\n\n#include "../logging.h"\n', 1)
    header.write_text(text)
    git(work, "init", "-q", "-b", "main")
    for name in ("cutlass", "spdlog"):
        git(work, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(bares[name]), f"3rdparty/{name}")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "FlashInfer-shaped tree with two submodules")
    bare = base / "flashinfer.git"
    git(base, "clone", "-q", "--bare", str(work), str(bare))
    return {"bare": bare, **libs}


@pytest.fixture
def clone(origin, tmp_path) -> Path:
    """A plain clone: 3rdparty/cutlass and 3rdparty/spdlog are empty folders."""
    dest = tmp_path / "fi"
    git(tmp_path, "clone", "-q", str(origin["bare"]), str(dest))
    assert (dest / "3rdparty/spdlog").is_dir() and not any((dest / "3rdparty/spdlog").iterdir())
    return dest


def commit_all(repo: Path, message: str) -> None:
    git(repo, "commit", "-q", "-am", message)


def test_the_clone_lacks_the_headers(clone):
    unit = clone / "u.cu"
    unit.write_text('#include "flashinfer/comm/trtllm_allreduce.cuh"\n')
    proc = subprocess.run(
        ["nvcc", "-E", "-x", "cu", "-I", str(clone / "include"), str(unit)], capture_output=True, text=True
    )
    assert proc.returncode != 0 and "spdlog/sinks/stdout_color_sinks.h: No such file or directory" in proc.stderr


def test_run_then_verify_stands_in_the_missing_headers(cli, clone):
    assert cli("run", "sm120-enable", "--repo", clone).exit_code == 0
    result = cli("verify", "--repo", clone, *ARCHS)

    assert result.exit_code == 0, result.output
    assert f"stand-ins (empty, the same on base and work tree): {', '.join(SPDLOG_HEADERS)}" in result.stdout
    assert "ok   sm_90    identical" in result.stdout
    assert "ok   sm_120   changed (target: expected 4 region(s), gained 4, lost 0)" in result.stdout
    assert result.stdout.splitlines()[-1] == (
        "verified: every other arch is byte-identical and the targets gained exactly the planned regions "
        "(with empty stand-ins for the missing third-party headers)"
    )
    assert (
        "note: 3rdparty/cutlass/include, 3rdparty/cutlass/tools/util/include, 3rdparty/spdlog/include missing: "
        "preprocessed with empty stand-ins (the same on the base and the work tree) for 2 header(s): "
        + ", ".join(SPDLOG_HEADERS)
    ) in result.stderr
    assert result.stderr.count("submodule update --init") == 1, "the hint once per run, not per arch"
    assert f"git -C {clone} submodule update --init 3rdparty/cutlass 3rdparty/spdlog" in result.stderr
    assert not any((clone / "3rdparty/spdlog").iterdir()), "nothing is written into the tree"

    data = json.loads(cli("verify", "--repo", clone, *ARCHS, "--format", "json").stdout)
    assert (data["ok"], data["status"]) == (True, "verified")
    assert data["headers"] == {
        "source": "none", "folders": [], "installed": None, "wheel": None, "versions": None,
        "missing": ["3rdparty/cutlass/include", "3rdparty/cutlass/tools/util/include", "3rdparty/spdlog/include"],
        "submodules": ["3rdparty/cutlass", "3rdparty/spdlog"], "stand_ins": SPDLOG_HEADERS,
    }  # fmt: skip
    assert data["cached"] == 3, "the base outputs made with the same stand-ins are reused"


def test_include_folders_give_the_real_headers(cli, clone, origin):
    assert cli("run", "sm120-enable", "--repo", clone).exit_code == 0
    spdlog, cutlass = origin["spdlog"] / "include", origin["cutlass"] / "include"
    result = cli("verify", "--repo", clone, *ARCHS, "--include", spdlog, "--include", cutlass, "--format", "json")

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["headers"]["source"] == "include" and data["headers"]["stand_ins"] == []
    assert data["headers"]["folders"] == [str(spdlog.resolve()), str(cutlass.resolve())]
    assert f"note: third-party headers from --include: {spdlog.resolve()}, {cutlass.resolve()}" in result.stderr
    assert "stand-in" not in result.stderr and "submodule" not in result.stderr


def test_include_that_is_not_a_folder_is_refused(cli, clone, tmp_path):
    assert cli("run", "sm120-enable", "--repo", clone).exit_code == 0
    result = cli("verify", "--repo", clone, "--include", tmp_path / "nope")
    assert result.exit_code == 5 and "is not a folder" in result.stderr


def _installed(site: Path, version: str, origin) -> None:
    """An installed FlashInfer wheel in `site` (site-packages layout) with its bundled spdlog and CUTLASS."""
    info = site / f"flashinfer_python-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: flashinfer-python\nVersion: {version}\n")
    (site / "flashinfer/jit").mkdir(parents=True)
    (site / "flashinfer/data/include/flashinfer").mkdir(parents=True)
    shutil.copytree(origin["spdlog"] / "include", site / "flashinfer/data/spdlog/include")
    shutil.copytree(origin["cutlass"] / "include", site / "flashinfer/data/cutlass/include")


@pytest.mark.parametrize("version, used", [("0.6.3+example", True), ("0.6.2", False)], ids=["same-version", "other-version"])
def test_installed_package_of_the_same_version_gives_the_headers(cli, clone, origin, tmp_path, monkeypatch, version, used):
    _installed(tmp_path / "site", version, origin)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert cli("run", "sm120-enable", "--repo", clone).exit_code == 0
    result = cli("verify", "--repo", clone, *ARCHS, "--format", "json")

    assert result.exit_code == 0, result.output
    headers = json.loads(result.stdout)["headers"]
    if used:
        assert (headers["source"], headers["stand_ins"]) == ("installed", [])
        assert headers["installed"] == f"flashinfer-python 0.6.3+example at {tmp_path / 'site'}"
        assert "note: third-party headers from the installed flashinfer-python 0.6.3+example" in result.stderr
    else:  # the tree is 0.6.3+example: another version's headers are not used
        assert (headers["source"], headers["stand_ins"]) == ("none", SPDLOG_HEADERS)


def test_guard_reading_a_macro_a_stand_in_may_define_is_unknown(cli, clone, origin):
    header = clone / HEADER
    text = header.read_text()
    text = text.replace('#include "../logging.h"\n', '#include "../logging.h"\n#include "cutlass/arch/config.h"\n', 1)
    # The first PDL call sits inside a CUTLASS feature guard, as CUTLASS-based kernels do.
    guarded = f"{PDL_GUARD}\n  cudaGridDependencySynchronize();\n#endif\n"
    assert guarded in text
    text = text.replace(guarded, f"#if defined(CUTLASS_ARCH_MMA_SM90_SUPPORTED)\n{guarded}#endif\n", 1)
    header.write_text(text)
    commit_all(clone, "guard a PDL call on a CUTLASS macro")
    assert cli("run", "sm120-enable", "--repo", clone).exit_code == 0

    result = cli("verify", "--repo", clone, *ARCHS)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert "ok   sm_90    identical" in lines, "no guard flips on sm_90: no macro can make it differ"
    for arch in ("sm_120", "sm_121"):
        line = next(line for line in lines if line.startswith(f"unknown {arch} "))
        assert "unknown: a guard deciding the change reads macros a stood-in header may define" in line
    guard_line = text.splitlines().index("#if defined(CUTLASS_ARCH_MMA_SM90_SUPPORTED)") + 1
    assert lines.count(
        f"       ? {HEADER}:{guard_line}  #if defined(CUTLASS_ARCH_MMA_SM90_SUPPORTED)  (reads CUTLASS_ARCH_MMA_SM90_SUPPORTED)"
    ) == 2
    assert "cutlass/arch/config.h" in result.stdout
    assert lines[-1].startswith("NOT verified: unknown")
    assert result.stderr.count("submodule update --init") == 1

    data = json.loads(cli("verify", "--repo", clone, *ARCHS, "--format", "json").stdout)
    assert (data["ok"], data["status"]) == (False, "unknown")
    by_arch = {a["arch"]: a for a in data["archs"]}
    assert by_arch["sm_120"]["verdict"] == "unknown"
    assert by_arch["sm_120"]["unknown"] == [
        {"file": HEADER, "line": guard_line, "guard": "#if defined(CUTLASS_ARCH_MMA_SM90_SUPPORTED)",
         "macros": ["CUTLASS_ARCH_MMA_SM90_SUPPORTED"]},
    ]  # fmt: skip

    # With the real CUTLASS header the macro is defined, and the change is proven.
    includes = ("--include", origin["spdlog"] / "include", "--include", origin["cutlass"] / "include")
    result = cli("verify", "--repo", clone, *ARCHS, *includes)
    assert result.exit_code == 0, result.output
    assert "ok   sm_120   changed (target: expected 4 region(s), gained 4, lost 0)" in result.stdout


def test_the_pdl_guards_read_only_the_arch_so_they_are_proven(cli, clone):
    assert cli("run", "sm120-enable", "--repo", clone).exit_code == 0
    data = json.loads(cli("verify", "--repo", clone, *ARCHS, "--format", "json").stdout)
    assert data["headers"]["stand_ins"] == SPDLOG_HEADERS
    assert all(a["unknown"] == [] for a in data["archs"])


def test_a_missing_header_of_the_tree_itself_still_fails(cli, clone):
    header = clone / HEADER
    header.write_text(header.read_text().replace('#include "../logging.h"\n', '#include "../logging.h"\n#include "flashinfer/gone.h"\n', 1))
    commit_all(clone, "include a header the tree does not have")
    assert cli("run", "sm120-enable", "--repo", clone).exit_code == 0

    result = cli("verify", "--repo", clone, *ARCHS)
    assert result.exit_code == 1
    assert "FAIL sm_90    failed" in result.stdout
    assert "fatal error: flashinfer/gone.h: No such file or directory" in result.stdout
    assert not any(line.startswith("  stand-ins") and "gone.h" in line for line in result.stdout.splitlines())


# ------------------------------------------------------------------ half-patched trees


def _guard_lines(repo: Path) -> list[int]:
    return [number for number, line in enumerate((repo / HEADER).read_text().splitlines(), 1) if line == PDL_GUARD]


def _assert_half_patched(result, guard_lines: list[int], hint: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    for arch in ("sm_120", "sm_121"):
        line = next(line for line in lines if line.startswith(f"FAIL {arch} "))
        assert f"half-patched: trtllm_comm ({COMM}:" in line and f"built for {arch}" in line
        assert "4 guard(s) of its sources compile code out there (empty kernels)" in line
    for number in guard_lines:
        assert lines.count(f"       ! {HEADER}:{number}  {PDL_GUARD}  (drops code trtllm_comm needs)") == 2
    assert "ok   sm_90    identical" in lines
    assert lines[-1] == "NOT verified: see the FAIL lines above"
    assert "expected None" not in result.stdout
    assert "error: half-patched: the JIT gate of trtllm_comm" in result.stderr and "admits sm_120, sm_121" in result.stderr
    assert hint in result.stderr


def test_jit_gate_widened_by_hand_fails(cli, clone):
    guards = _guard_lines(clone)
    git(clone, "switch", "-q", "-c", "sm120-by-hand")
    comm = clone / COMM
    text = comm.read_text()
    spec = text.index("def gen_trtllm_comm_module")
    comm.write_text(text[:spec] + text[spec:].replace("supported_major_versions=[9, 10]", "supported_major_versions=[9, 10, 12]", 1))
    commit_all(clone, "build trtllm_comm for SM12x")

    result = cli("verify", "--repo", clone, "--base", "main", "--arch", "sm_120", *ARCHS)
    _assert_half_patched(result, guards, "widen those guards together with the JIT gate")
    assert "(target: no region expected (no guard of the changed files was widened for it), gained 0, lost 0)" in result.stdout


def test_jit_change_alone_from_a_recipe_fails(cli, clone):
    guards = _guard_lines(clone)
    assert cli("run", "sm120-enable", "--only", "flashinfer.trtllm-comm-jit", "--repo", clone).exit_code == 3
    assert cli("run", "sm120-enable", "--only", "flashinfer.trtllm-comm-jit", "--force", "--repo", clone).exit_code == 0
    result = cli("verify", "--repo", clone, *ARCHS)
    _assert_half_patched(result, guards, f"codemod revert sm120-enable --repo {clone}")
    data = json.loads(cli("verify", "--repo", clone, *ARCHS, "--format", "json").stdout)
    assert data["status"] == "failed"
    kernels = {a["arch"]: a["empty_kernels"] for a in data["archs"]}
    assert [(k["module"], k["file"], k["line"]) for k in kernels["sm_120"]] == [("trtllm_comm", HEADER, n) for n in guards]
    assert kernels["sm_90"] == []


def test_guards_commit_undone_after_the_recipe_fails(cli, clone):
    guards = _guard_lines(clone)
    assert cli("run", "sm120-enable", "--repo", clone).exit_code == 0
    assert cli("verify", "--repo", clone, *ARCHS).exit_code == 0
    git(clone, "revert", "--no-edit", "HEAD")  # the guards commit: the JIT gate stays widened
    result = cli("verify", "--repo", clone, *ARCHS)
    _assert_half_patched(result, guards, "codemod revert sm120-enable")


def test_whole_recipe_is_not_half_patched(cli, clone):
    assert cli("run", "sm120-enable", "--repo", clone).exit_code == 0
    data = json.loads(cli("verify", "--repo", clone, *ARCHS, "--format", "json").stdout)
    assert data["status"] == "verified"
    assert all(a["empty_kernels"] == [] for a in data["archs"])
