"""`codemod verify --build` on a tiny tree in FlashInfer's checkout shape: one JIT module, one kernel source.

The tree's JIT code (core.py, cpp_ext.py, compilation_context.py, env.py) is
written here in the shape of FlashInfer's, small; the flags nvcc gets are read
from it (a -DBUILD_PROOF_FLAG only the fixture's gen_jit_spec adds is required
by the kernel source). The kernel's whole body sits under a PDL guard that
stops below sm_120, as FlashInfer 0.6.3's lamport kernels do: widening the JIT
gate alone compiles it empty for sm_120.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import init_repo

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA 13) is installed here and in CI")

ARCHS = ("--arch", "sm_120", "--archs", "sm_90,sm_120")
GUARD = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"
WIDE = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))"

TREE = {
    "build_backend.py": """
        from pathlib import Path

        _root = Path(__file__).parent.resolve()
        _data_dir = _root / "flashinfer" / "data"


        def _create_data_dir(use_symlinks=True):
            def ln(source: str, target: str) -> None:
                (_data_dir / target).symlink_to(_root / source, target_is_directory=True)

            ln("3rdparty/spdlog", "spdlog")
            ln("csrc", "csrc")
            ln("include", "include")
        """,
    "flashinfer/__init__.py": "",
    "flashinfer/_build_meta.py": '__version__ = "0.0.1"\n',
    "flashinfer/version.py": """
        try:
            from ._build_meta import __version__ as __version__
        except ModuleNotFoundError:
            __version__ = "0.0.0+unknown"
        """,
    "flashinfer/compilation_context.py": """
        import os
        import torch


        class CompilationContext:
            COMMON_NVCC_FLAGS = ["-DFLASHINFER_ENABLE_FP8_E8M0"]

            def __init__(self):
                self.TARGET_CUDA_ARCHS = set()
                if "FLASHINFER_CUDA_ARCH_LIST" in os.environ:
                    for arch in os.environ["FLASHINFER_CUDA_ARCH_LIST"].split(" "):
                        major, minor = arch.split(".")
                        self.TARGET_CUDA_ARCHS.add((int(major), str(minor)))
                else:
                    for device in range(torch.cuda.device_count()):
                        major, minor = torch.cuda.get_device_capability(device)
                        if major >= 9:
                            minor = str(minor) + "a"
                        self.TARGET_CUDA_ARCHS.add((int(major), str(minor)))

            def get_nvcc_flags_list(self, supported_major_versions=None):
                if supported_major_versions:
                    archs = [a for a in self.TARGET_CUDA_ARCHS if a[0] in supported_major_versions]
                else:
                    archs = self.TARGET_CUDA_ARCHS
                if len(archs) == 0:
                    raise RuntimeError(f"No supported CUDA architectures found for major versions {supported_major_versions}.")
                return [f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}" for major, minor in archs] + self.COMMON_NVCC_FLAGS
        """,
    "flashinfer/jit/__init__.py": "",
    "flashinfer/jit/env.py": """
        import pathlib
        from ..version import __version__ as flashinfer_version

        _package_root: pathlib.Path = pathlib.Path(__file__).resolve().parents[1]
        FLASHINFER_JIT_DIR = pathlib.Path.home() / ".cache" / "flashinfer" / flashinfer_version / "cached_ops"
        FLASHINFER_INCLUDE_DIR: pathlib.Path = _package_root / "data" / "include"
        FLASHINFER_CSRC_DIR: pathlib.Path = _package_root / "data" / "csrc"
        SPDLOG_INCLUDE_DIR: pathlib.Path = _package_root / "data" / "spdlog" / "include"
        """,
    "flashinfer/jit/cpp_ext.py": """
        import os
        import subprocess

        import tvm_ffi

        from . import env as jit_env
        from ..compilation_context import CompilationContext


        def get_cuda_path() -> str:
            return subprocess.run(["which", "nvcc"], capture_output=True).stdout.decode()


        def join_multiline(vs):
            return " $\\n    ".join(vs)


        def build_cuda_cflags(common_cflags, extra_cuda_cflags=None):
            cuda_cflags = ["$common_cflags", "--compiler-options=-fPIC", "--expt-relaxed-constexpr"]
            global_flags = CompilationContext().get_nvcc_flags_list()
            if extra_cuda_cflags is not None:
                if any(flag.startswith("-gencode=") for flag in extra_cuda_cflags):
                    cuda_cflags += [f for f in global_flags if not f.startswith("-gencode=")] + extra_cuda_cflags
                else:
                    cuda_cflags += global_flags + extra_cuda_cflags
            else:
                cuda_cflags += global_flags
            return cuda_cflags


        def generate_ninja_build_for_op(name, sources, extra_cflags, extra_cuda_cflags, extra_ldflags, extra_include_dirs, needs_device_linking=False):
            cuda_home = get_cuda_path()
            common_cflags = [f"-isystem {d}" for d in (
                tvm_ffi.libinfo.find_include_path(),
                jit_env.FLASHINFER_INCLUDE_DIR.resolve(),
                jit_env.FLASHINFER_CSRC_DIR.resolve(),
                jit_env.SPDLOG_INCLUDE_DIR.resolve(),
            )]
            cuda_cflags = build_cuda_cflags(common_cflags, extra_cuda_cflags)
            lines = [
                "ninja_required_version = 1.3",
                f"cuda_home = {cuda_home}",
                "common_cflags = " + join_multiline(common_cflags),
                "cuda_cflags = " + join_multiline(cuda_cflags),
                "",
            ]
            output_dir = jit_env.FLASHINFER_JIT_DIR / name
            for source in sources:
                obj = (output_dir / source.with_suffix(".cuda.o").name).resolve()
                lines.append(f"build {obj}: cuda_compile {source.resolve()}")
            return "\\n".join(lines)
        """,
    "flashinfer/jit/core.py": """
        import dataclasses
        import os
        from pathlib import Path
        from typing import List, Optional

        from ..compilation_context import CompilationContext

        current_compilation_context = CompilationContext()


        @dataclasses.dataclass
        class JitSpec:
            name: str
            sources: List[Path]
            extra_cflags: Optional[List[str]]
            extra_cuda_cflags: Optional[List[str]]
            extra_ldflags: Optional[List[str]]
            extra_include_dirs: Optional[List[Path]]
            needs_device_linking: bool = False


        def gen_jit_spec(name, sources, extra_cflags=None, extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None):
            debug = os.environ.get("FLASHINFER_JIT_DEBUG", "0") == "1"
            cuda_cflags = ["-use_fast_math", "-DBUILD_PROOF_FLAG=1"]
            if not (extra_cuda_cflags is not None and any(f.startswith("-std=") for f in extra_cuda_cflags)):
                cuda_cflags.insert(0, "-std=c++17")
            if debug:
                cuda_cflags += ["-g", "-G"]
            else:
                cuda_cflags += ["-DNDEBUG", "-O3"]
            if extra_cuda_cflags is not None:
                cuda_cflags += extra_cuda_cflags
            return JitSpec(
                name=name,
                sources=[Path(x) for x in sources],
                extra_cflags=extra_cflags,
                extra_cuda_cflags=cuda_cflags,
                extra_ldflags=extra_ldflags,
                extra_include_dirs=None,
            )
        """,
    "flashinfer/jit/comm.py": """
        from .core import JitSpec, gen_jit_spec, current_compilation_context
        from . import env as jit_env


        def gen_pdl_demo_module() -> JitSpec:
            nvcc_flags = current_compilation_context.get_nvcc_flags_list(
                supported_major_versions=[9, 10]
            )
            return gen_jit_spec(
                "pdl_demo",
                [jit_env.FLASHINFER_CSRC_DIR / "pdl_demo.cu"],
                extra_cuda_cflags=nvcc_flags,
            )


        def gen_other_module() -> JitSpec:
            return gen_jit_spec("other", [jit_env.FLASHINFER_CSRC_DIR / "other.cu"])
        """,
    "include/flashinfer/pdl_demo.cuh": f"""
        #pragma once
        #include <spdlog/version.h>

        namespace flashinfer {{

        template <typename T>
        __global__ void lamport_demo_kernel(T* out, const T* in, int n) {{
        {GUARD}
          asm volatile("griddepcontrol.wait;" ::: "memory");
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) out[i] = in[i] * T(2);
          asm volatile("griddepcontrol.launch_dependents;");
        #endif
        }}

        template <typename T>
        __global__ void scale_kernel(T* out, int n) {{
          int i = blockIdx.x * blockDim.x + threadIdx.x;
        #if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 1000)
          if (i < n) out[i] *= T(3);
        #else
          if (i < n) out[i] *= T(3);
        #endif
        }}

        }}  // namespace flashinfer
        """,
    "csrc/pdl_demo.cu": """
        #include "flashinfer/pdl_demo.cuh"

        #ifndef BUILD_PROOF_FLAG
        #error "the flags of the JIT code were not used"
        #endif

        template __global__ void flashinfer::lamport_demo_kernel<float>(float*, const float*, int);
        template __global__ void flashinfer::scale_kernel<float>(float*, int);
        """,
    "csrc/other.cu": "__global__ void other_kernel(float* x) { x[0] = 1.0f; }\n",
    "3rdparty/spdlog/include/spdlog/version.h": "#pragma once\n#define SPDLOG_VER_MAJOR 1\n",
}


def write_tree(root: Path) -> Path:
    for rel, text in TREE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


@pytest.fixture(scope="module")
def build_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("build-cache")


@pytest.fixture
def tree(tmp_path, build_cache, monkeypatch) -> Path:
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(build_cache))
    return init_repo(write_tree(tmp_path / "fi"))


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def widen_jit_gate(tree: Path) -> None:
    edit(tree / "flashinfer/jit/comm.py", "supported_major_versions=[9, 10]", "supported_major_versions=[9, 10, 12]")


def test_jit_gate_alone_builds_the_kernel_empty_on_sm_120(cli, tree):
    widen_jit_gate(tree)
    result = cli("verify", "--build", "--repo", tree, *ARCHS)

    assert result.exit_code == 1, result.output
    out = result.stdout
    assert "build proof of" in out and "base HEAD @" in out
    assert "module pdl_demo (flashinfer/jit/comm.py:gen_pdl_demo_module)" in out
    assert "sm_120  target   base  not built (FlashInfer's JIT: No supported CUDA architectures found for major versions [9, 10].)" in out
    assert "sm_120  target   work  1 source(s), 2 kernels, 1 empty" in out
    assert "  empty on sm_120 (1):\n    lamport_demo_kernel<float>  [csrc/pdl_demo.cu]" in out
    assert "FAIL pdl_demo: sm_120: 1 kernel(s) compile empty (`ret;` only) but have a body on sm_90" in out
    assert "sm_90   compared work  same PTX as the base" in out
    assert "other" not in out.split("module pdl_demo")[0], "a module whose spec did not change is not built"

    data = json.loads(cli("verify", "--build", "--repo", tree, *ARCHS, "--format", "json").stdout)
    assert (data["ok"], data["status"], data["targets"], data["compared"]) == (False, "failed", ["sm_120"], ["sm_90"])
    (module,) = data["modules"]
    assert [k["name"] for k in module["empty"]["sm_120"]] == ["lamport_demo_kernel<float>"]
    rows = {k["kernel"]: k for k in module["kernels"]}
    lamport = next(k for name, k in rows.items() if "lamport" in name)
    assert lamport["empty"] and lamport["instructions"] == 1 and lamport["opcodes"] == {}
    assert lamport["reference"]["sm_90"]["opcodes"] == {"griddepcontrol.wait": 1, "griddepcontrol.launch_dependents": 1}
    assert data["cached"] >= 2 and data["compiled"] == 0, "the second run compiles nothing"


def test_widened_guards_give_the_kernel_its_body_and_leave_sm_90_alone(cli, tree):
    widen_jit_gate(tree)
    edit(tree / "include/flashinfer/pdl_demo.cuh", GUARD, WIDE)
    result = cli("verify", "--build", "--repo", tree, *ARCHS, "--format", "json")

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    import jsonschema

    jsonschema.validate(data, json.loads(cli("schema", "verify").stdout))  # `codemod schema verify` covers --build
    (module,) = data["modules"]
    assert module["ok"] and module["empty"] == {} and module["missing"] == {}
    assert module["promised"] == [
        {"file": "include/flashinfer/pdl_demo.cuh", "line": 8, "instruction": "griddepcontrol.launch_dependents"},
        {"file": "include/flashinfer/pdl_demo.cuh", "line": 8, "instruction": "griddepcontrol.wait"},
    ]
    lamport = next(k for k in module["kernels"] if "lamport" in k["kernel"])
    assert not lamport["empty"] and lamport["instructions"] > 5
    assert lamport["opcodes"] == {"griddepcontrol.wait": 1, "griddepcontrol.launch_dependents": 1}
    sm90 = next(a for a in module["archs"] if a["arch"] == "sm_90")
    assert sm90["same_as_base"] is True and sm90["work"]["gencode"] == "arch=compute_90a,code=sm_90a"
    sm120 = next(a for a in module["archs"] if a["arch"] == "sm_120")
    assert sm120["work"]["gencode"] == "arch=compute_120a,code=sm_120a"
    assert sm120["base"] == {"built": False, "reason": "No supported CUDA architectures found for major versions [9, 10].", "gencode": None, "sources": []}

    assert data["compiled"] <= 2, "sm_90 and sm_120 at most: sm_90 is the same preprocessed text on both sides, one compile serves both"
    text = cli("verify", "--build", "--repo", tree, *ARCHS).stdout
    assert "the widened guards promise griddepcontrol.launch_dependents, griddepcontrol.wait (2 guard(s))" in text
    assert text.splitlines()[-1].startswith("passed: no kernel compiles empty on sm_120")


def test_a_guard_that_changes_sm_90_code_fails(cli, tree):
    widen_jit_gate(tree)
    edit(tree / "include/flashinfer/pdl_demo.cuh", GUARD, WIDE)
    edit(tree / "include/flashinfer/pdl_demo.cuh", "(__CUDA_ARCH__ < 1000)\n  if (i < n) out[i] *= T(3);", "(__CUDA_ARCH__ < 1000)\n  if (i < n) out[i] *= T(5);")
    result = cli("verify", "--build", "--repo", tree, *ARCHS)

    assert result.exit_code == 1, result.output
    assert "FAIL pdl_demo: sm_90: PTX differs from the base in 1 kernel(s); a non-target arch must stay untouched" in result.stdout
    assert "  differs from the base on sm_90 (1):\n    csrc/pdl_demo.cu: _ZN10flashinfer12scale_kernelIfEEvPT_i" in result.stdout


def test_promised_instruction_missing_on_the_target_fails(cli, tree):
    widen_jit_gate(tree)
    header = tree / "include/flashinfer/pdl_demo.cuh"
    edit(header, GUARD, WIDE)
    edit(header, '  asm volatile("griddepcontrol.launch_dependents;");\n', '#if __CUDA_ARCH__ < 1200\n  asm volatile("griddepcontrol.launch_dependents;");\n#endif\n')
    data = json.loads(cli("verify", "--build", "--repo", tree, *ARCHS, "--format", "json").stdout)
    (module,) = data["modules"]
    assert [m["instruction"] for m in module["missing"]["sm_120"]] == ["griddepcontrol.launch_dependents"]
    assert "sm_120: 1 kernel(s) lack an instruction the widened guards promise" in module["failures"]


def test_a_package_without_codemod_record_builds_the_work_tree_alone(cli, tmp_path, build_cache, monkeypatch):
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(build_cache))
    loose = write_tree(tmp_path / "loose")
    widen_jit_gate(loose)
    result = cli("verify", "--build", "--repo", loose, *ARCHS)
    assert result.exit_code == 2 and "no JIT module to build: there is no base to find changed modules from" in result.stderr
    result = cli("verify", "--build", "--repo", loose, *ARCHS, "--module", "pdl_demo")
    assert result.exit_code == 1, result.output
    assert "base none (no codemod record: the work tree alone)" in result.stdout
    assert "    lamport_demo_kernel<float>  [csrc/pdl_demo.cu]" in result.stdout
    assert " base " not in result.stdout.split("\n", 1)[1], "nothing is built for a base"


def test_compile_error_names_the_first_error_with_file_and_line(cli, tree):
    widen_jit_gate(tree)
    edit(tree / "include/flashinfer/pdl_demo.cuh", "int i = blockIdx.x * blockDim.x + threadIdx.x;\n#if defined", "int i = blockIdx.x * blockDim.x + threadIdx.x + undefined_name;\n#if defined")
    result = cli("verify", "--build", "--repo", tree, *ARCHS)
    assert result.exit_code == 12, result.output
    first = result.stderr.splitlines()[0]
    assert first.startswith("error[compile-failed]: csrc/pdl_demo.cu (")
    assert 'include/flashinfer/pdl_demo.cuh:18: error: identifier "undefined_name" is undefined' in first


def test_missing_third_party_headers_are_named_never_stood_in(cli, tree, tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # the release wheel (tests/test_build_proof_headers.py) is not on PyPI either
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    widen_jit_gate(tree)
    shutil.rmtree(tree / "3rdparty/spdlog/include")
    result = cli("verify", "--build", "--repo", tree, *ARCHS)
    assert result.exit_code == 11, result.output
    assert "third-party headers missing: 3rdparty/spdlog/include (absent or empty)" in result.stderr
    assert f"git -C {tree} submodule update --init 3rdparty/spdlog" in result.stderr


def test_no_nvcc_and_no_tvm_ffi_are_one_line_errors(cli, tree, tmp_path, monkeypatch):
    widen_jit_gate(tree)
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    result = cli("verify", "--build", "--repo", tree, *ARCHS, "--python", bare / "bin" / "python")
    assert result.exit_code == 11
    assert "TVM-FFI's headers (tvm/ffi/*.h, dlpack/dlpack.h) are missing: no apache-tvm-ffi package in" in result.stderr
    assert "-m pip install 'apache-tvm-ffi!=0.1.8,!=0.1.8.post0,<0.2,>=0.1.6'" in result.stderr

    tools = tmp_path / "tools"  # git, but no nvcc
    tools.mkdir()
    (tools / "git").symlink_to(shutil.which("git"))
    monkeypatch.setenv("PATH", str(tools))
    result = cli("verify", "--build", "--repo", tree, *ARCHS)
    assert result.exit_code == 11
    assert result.stderr.splitlines()[0] == "error[build-needs]: verify --build: nvcc not found"
    assert "Traceback" not in result.output


def test_unreadable_jit_code_is_refused_with_file_and_line(cli, tree):
    widen_jit_gate(tree)
    edit(tree / "flashinfer/jit/core.py", '    debug = os.environ.get("FLASHINFER_JIT_DEBUG", "0") == "1"\n', "    debug = os.urandom(1)[0] > 200\n")
    result = cli("verify", "--build", "--repo", tree, *ARCHS)
    assert result.exit_code == 13, result.output
    assert "flashinfer/jit/core.py:23: calls os.urandom(), which this reader does not evaluate" in result.stderr


def test_module_names_an_unknown_module(cli, tree):
    result = cli("verify", "--build", "--repo", tree, *ARCHS, "--module", "nope")
    assert result.exit_code == 2 and "no JIT module nope" in result.stderr
