"""`verify --build` never gives nvcc a flag that could run a program the inspected tree chose.

The flags come from evaluating the tree's own JIT code, so a hostile tree
writes them: `-ccbin script` makes nvcc run the script as its host compiler.
The fixture tree is test_build_proof's; the planted script leaves a marker
file when it runs.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from codemods.prove import trusted_flags
from test_build_proof import ARCHS, build_cache, edit, tree  # noqa: F401  (fixtures)

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA 13) is installed here and in CI")

SPEC_CALL = "        extra_cuda_cflags=nvcc_flags,\n"


def plant(root: Path, flags: str) -> tuple[Path, int]:
    """A marker-writing script in the tree, and `flags` added to the spec's extra_cuda_cflags; the line of the flags."""
    marker = root.parent / "marker"
    script = root / "tools" / "cc.sh"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\necho ran >> {marker}\nexec {shutil.which('g++') or 'g++'} \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    comm = root / "flashinfer/jit/comm.py"
    edit(comm, SPEC_CALL, "        extra_cuda_cflags=nvcc_flags\n        + " + flags.format(script=script) + ",\n")
    line = comm.read_text().splitlines().index("        + " + flags.format(script=script) + ",") + 1
    return marker, line


@pytest.mark.parametrize(
    "flags, shown",
    [
        pytest.param('["-ccbin", "{script}"]', "-ccbin {script}", id="ccbin-pair"),
        pytest.param('["--compiler-bindir={script}"]', "--compiler-bindir={script}", id="compiler-bindir"),
        pytest.param('["-Xcompiler=-fplugin={script}"]', "-Xcompiler=-fplugin={script}", id="xcompiler-plugin"),
        pytest.param('[f"@{script}"]', "@{script}", id="response-file"),
    ],
)
def test_a_host_compiler_planted_in_the_jit_spec_never_runs_and_is_named_with_file_and_line(cli, tree, flags, shown):  # noqa: F811
    marker, line = plant(tree, flags)
    script = tree / "tools" / "cc.sh"
    result = cli("verify", "--build", "--repo", tree, *ARCHS)

    assert not marker.exists(), f"the tree's script ran as nvcc's host compiler: {marker.read_text()!r}"
    assert result.exit_code == 13, result.output
    first = result.stderr.splitlines()[0]
    assert first.startswith("error[flag-refused]: work tree: nvcc flag `" + shown.format(script=script) + "`"), first
    assert f"(from flashinfer/jit/comm.py:{line})" in first
    assert "Traceback" not in result.output


def test_a_source_that_is_a_flag_is_refused(cli, tree):  # noqa: F811
    edit(tree / "flashinfer/jit/comm.py", '[jit_env.FLASHINFER_CSRC_DIR / "pdl_demo.cu"]', '[jit_env.FLASHINFER_CSRC_DIR / "pdl_demo.cu", "--compiler-bindir=/tmp"]')
    result = cli("verify", "--build", "--repo", tree, *ARCHS)
    assert result.exit_code == 13, result.output
    assert "source `--compiler-bindir=/tmp` is not one codemod passes to nvcc (from flashinfer/jit/comm.py:" in result.stderr


TREE, ROOTS = "/src/fi", ("/usr/local/cuda", "/venv/tvm_ffi/include", "/usr/include/python3.11")

FLASHINFER_FLAGS = [  # every flag FlashInfer 0.6.3 - 0.6.16's JIT code writes for a CUDA compile
    "-DFLASHINFER_ENABLE_FP8_E8M0", "-DPy_LIMITED_API=0x03090000", "-D_GLIBCXX_USE_CXX11_ABI=1", "-DDTYPE=__nv_bfloat16",
    "-DTOKENS_PER_PAGE=16", "-DCUTLASS_DEBUG_TRACE_LEVEL=2", "-U__CUDA_NO_HALF_OPERATORS__", "-O3", "-O0", "-std=c++17",
    "-std=c++20", "--std=c++17", "--expt-relaxed-constexpr", "--expt-extended-lambda", "-use_fast_math",
    "-gencode=arch=compute_120a,code=sm_120a", "-gencode=arch=compute_100f,code=sm_100f", "-gencode=arch=compute_80,code=sm_80",
    "-lineinfo", "-g", "-G", "--device-debug", "--ptxas-options=-v", "--threads=1", "-static-global-template-stub=false",
    "--compiler-options=-fPIC", "-rdc=true", "-Xfatbin=-compress-all", "-Wno-deprecated-gpu-targets",
    "-Xcompiler", "-Wno-enum-compare", "-isystem", "/src/fi/3rdparty/cutlass/include", "-isystem", "/usr/local/cuda/include/cccl",
    "-isystem", "/venv/tvm_ffi/include", "-isystem", "/usr/include/python3.11", "-I/src/fi/flashinfer/data/csrc/nv_internal",
]


def test_every_flag_flashinfer_writes_passes():
    assert trusted_flags.first_refused(FLASHINFER_FLAGS, TREE, ROOTS) is None


@pytest.mark.parametrize(
    "flags, refused",
    [
        (["-ccbin", "/src/fi/cc.sh"], "-ccbin /src/fi/cc.sh"),
        (["-ccbin=/src/fi/cc.sh"], "-ccbin=/src/fi/cc.sh"),
        (["--compiler-bindir", "/tmp"], "--compiler-bindir /tmp"),
        (["-Xcompiler=-fplugin=/src/fi/p.so"], "-Xcompiler=-fplugin=/src/fi/p.so"),
        (["-Xcompiler", "-fPIC,-fplugin=/src/fi/p.so"], "-Xcompiler -fPIC,-fplugin=/src/fi/p.so"),
        (["--compiler-options=-Wl,-plugin=/x"], "--compiler-options=-Wl,-plugin=/x"),
        (["-Xcompiler=-B/src/fi/bin"], "-Xcompiler=-B/src/fi/bin"),
        (["-Xlinker", "-plugin"], "-Xlinker"),
        (["-Xptxas=--load-plugin"], "-Xptxas=--load-plugin"),
        (["@/src/fi/flags.rsp"], "@/src/fi/flags.rsp"),
        (["--options-file", "/src/fi/flags"], "--options-file /src/fi/flags"),
        (["-optf=/src/fi/flags"], "-optf=/src/fi/flags"),
        (["-include", "/etc/passwd"], "-include /etc/passwd"),
        (["-I../../etc"], "-I../../etc"),
        (["-I/src/fi/../../etc"], "-I/src/fi/../../etc"),
        (["-isystem", "/home/user/other"], "-isystem /home/user/other"),
        (["-Dx=$(touch /tmp/m)"], "-Dx=$(touch /tmp/m)"),
        (["-Xcompiler"], "-Xcompiler"),
        (["--dryrun"], "--dryrun"),
        (["-O3", "-odir", "/tmp"], "-odir /tmp"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_flags_that_could_run_a_program_or_read_outside_are_refused(flags, refused):
    assert trusted_flags.first_refused(flags, TREE, ROOTS) == refused


def test_an_include_inside_the_tree_passes():
    assert trusted_flags.first_refused(["-include", "/src/fi/include/prelude.h", "-I/src/fi/include"], TREE, ROOTS) is None


@pytest.mark.real
def test_every_module_of_flashinfer_0_6_3_passes_the_allow_list(real_unpacked, tmp_path):
    from codemods.core import errors
    from codemods.core.arch import Arch
    from codemods.jit.flags import Machine
    from codemods.prove.build import _side, _specs
    from codemods.prove.compile import find_tvm_ffi
    from codemods.prove.module_flags import module_flags
    from conftest import flashinfer_checkout

    root = flashinfer_checkout(real_unpacked["flashinfer"], tmp_path / "flashinfer", third_party=True)
    tvm_include, python_include = find_tvm_ffi(None)
    machine = Machine(os.path.dirname(os.path.dirname(shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")), "13.0", tvm_include, python_include)
    side = _side("work", root, "flashinfer")
    built, flags = 0, set()
    for rel, spec in _specs(root):
        for arch in ("sm_80", "sm_90", "sm_100", "sm_120"):
            try:
                build = module_flags(side, os.path.relpath(root / rel, root / "flashinfer"), spec.function, Arch.parse(arch), machine)
            except errors.JitUnreadable:
                continue  # a module whose JIT code this reader does not evaluate is refused on its own
            if not isinstance(build, str):
                built += 1
                flags |= set(build.flags)
    assert built >= 80, "0.6.3's readable modules on four archs"
    assert {"--compiler-options=-fPIC", "-static-global-template-stub=false", "-gencode=arch=compute_120a,code=sm_120a"} <= flags


def test_verify_build_run_from_a_folder_with_a_json_py_never_imports_it(cli, tree, tmp_path, monkeypatch):  # noqa: F811
    from test_packages import hostile_folder

    marker = tmp_path / "probe-marker"
    monkeypatch.chdir(hostile_folder(tmp_path / "cwd", marker))
    edit(tree / "flashinfer/jit/comm.py", "supported_major_versions=[9, 10]", "supported_major_versions=[9, 10, 12]")
    result = cli("verify", "--build", "--repo", tree, *ARCHS)
    assert not marker.exists(), f"the folder's modules ran: {marker.read_text()}"
    assert result.exit_code == 1 and "FAIL pdl_demo" in result.stdout, result.output
