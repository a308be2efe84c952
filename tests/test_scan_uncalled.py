"""`scan`'s audit: a CUDA guard in a device helper that nothing the JIT module compiles calls is not listed.

The shape is FlashInfer's bundled TensorRT-LLM headers: two namespaces
define a device helper of the same name; one is guarded for sm_90 through
sm_11x with an empty `#else` (sm_121 gets nothing there), the other is
not; the kernel calls the name from inside the other namespace, where C++
name lookup finds the unguarded one. The guard is classified by the one
call reader (codemods.cpp.calls, as the empty-kernel hazard reads it):
covered when no call reaches its helper, as before when a call does or
when codemod cannot tell which helper a call reaches.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemods.audit.scan import scan
from codemods.core.arch import Arch

SM121 = Arch.parse("sm_121")

NORM_PY = """\
from . import env as jit_env
from .core import JitSpec, current_compilation_context, gen_jit_spec


def gen_rmsnorm_module() -> JitSpec:
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[9, 10, 12]
    )
    return gen_jit_spec(
        "rmsnorm",
        [jit_env.FLASHINFER_CSRC_DIR / "rmsnorm.cu"],
        extra_cuda_cflags=nvcc_flags,
    )
"""

NORM_CU = """\
#include "flashinfer/warp/rmsnorm.cuh"
"""

# the guarded helper: sm_90 up to sm_11x only, nothing in the #else
LEGACY_H = """\
#pragma once
#include <cstdint>

namespace flashinfer {
namespace legacy {

__device__ __forceinline__ uint32_t leader_lane() {
  uint32_t is_leader = 0;
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200)
  asm volatile("elect.sync _|%0, 0xffffffff;" : "=r"(is_leader));
#else
#endif
  return is_leader;
}

}  // namespace legacy
}  // namespace flashinfer
"""
LEGACY = "include/flashinfer/warp/legacy.h"
LEGACY_GUARD_LINE = 9

WARP_H = """\
#pragma once
#include <cstdint>

namespace flashinfer {
namespace warp {

__device__ __forceinline__ uint32_t leader_lane() { return (threadIdx.x & 31) == 0; }

}  // namespace warp
}  // namespace flashinfer
"""

RMSNORM_CUH = """\
#pragma once
#include "legacy.h"
#include "warp.h"

using namespace flashinfer::legacy;
{prologue}
namespace flashinfer {{
namespace warp {{

__global__ void rmsnorm_kernel(float* out) {{
  if ({call}) {{
    out[blockIdx.x] = 0.f;
  }}
}}

}}  // namespace warp
}}  // namespace flashinfer
"""


def _tree(tmp_path: Path, call: str, prologue: str = "", compiled: bool = True) -> Path:
    root = tmp_path / "fi"
    files = {
        "flashinfer/jit/norm.py": NORM_PY,
        "csrc/rmsnorm.cu": NORM_CU if compiled else "// nothing included\n",
        LEGACY: LEGACY_H,
        "include/flashinfer/warp/warp.h": WARP_H,
        "include/flashinfer/warp/rmsnorm.cuh": RMSNORM_CUH.format(call=call, prologue=prologue),
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _guard(root: Path) -> dict:
    (record,) = [g for g in scan(root, SM121).gates if g["file"] == LEGACY and g["line"] == LEGACY_GUARD_LINE]
    return record


@pytest.mark.parametrize(
    "call, prologue",
    [
        pytest.param("legacy::leader_lane()", "", id="qualified-call-reaches-the-guarded-helper"),
        pytest.param("::flashinfer::legacy::leader_lane()", "", id="absolute-call"),
    ],
)
def test_before_a_guard_in_a_helper_a_kernel_calls_stays_widenable(tmp_path, call, prologue):
    record = _guard(_tree(tmp_path, call, prologue))
    assert record["excludes_arch"] is True
    assert record["classification"] == "widenable"
    assert record["symbol"] == "leader_lane"


def test_after_a_guard_in_a_helper_no_call_reaches_is_covered(tmp_path, cli):
    # the unqualified call inside flashinfer::warp finds warp::leader_lane before the using-directive's
    root = _tree(tmp_path, "leader_lane()")
    record = _guard(root)
    assert record["excludes_arch"] is True
    assert record["classification"] == "covered"
    assert record["reason"] == (
        "no call in the files of rmsnorm reaches `flashinfer::legacy::leader_lane`, the device function around "
        "this guard: no kernel runs this code on any arch"
    )
    done = cli("scan", "--repo", root, "--arch", "sm_121", "--format", "json")
    assert done.exit_code == 0, done.output
    (listed,) = [g for g in json.loads(done.stdout)["gates"] if g["file"] == LEGACY and g["line"] == LEGACY_GUARD_LINE]
    assert listed["classification"] == "covered"
    text = cli("scan", "--repo", root, "--arch", "sm_121")
    assert f"{LEGACY}:{LEGACY_GUARD_LINE}" not in text.stdout


@pytest.mark.parametrize(
    "call, prologue",
    [
        pytest.param("LEADER()", "#define LEADER() leader_lane()", id="called-from-a-macro-body"),
        pytest.param(
            "leader_lane()",
            "namespace flashinfer { namespace warp { using legacy::leader_lane; } }",
            id="a-using-declaration-makes-both-candidates",
        ),
    ],
)
def test_a_call_codemod_cannot_resolve_keeps_the_guard_listed(tmp_path, call, prologue):
    assert _guard(_tree(tmp_path, call, prologue))["classification"] == "widenable"


def test_a_guard_in_a_file_no_module_compiles_keeps_its_classification(tmp_path):
    assert _guard(_tree(tmp_path, "leader_lane()", compiled=False))["classification"] == "widenable"
