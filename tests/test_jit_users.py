"""A JIT list that keeps a module from sm_121 is widenable only if widening it gives sm_121 something that works.

Two shapes of FlashInfer 0.6.10 scan used to call widenable: `moe_utils` (`[10]`), whose only ways in are
CuTe DSL MoE APIs for sm_100/103 and `aot.py`'s `if has_sm100f:`, and `mixed_comm` (`[9, 10]`), whose kernels
are `multimem` (NVLS) collectives that need multicast hardware. Each is a small tree in FlashInfer's shape:
the case that needs a human, and the same tree with the one difference that makes the list widenable.
"""

from __future__ import annotations

import ast
from pathlib import Path
from textwrap import dedent

import pytest

from codemods.audit.jit_users import Trees, calls, ways_in
from codemods.audit.scan import scan
from codemods.core.arch import Arch

SM121 = Arch.parse("sm_121")

MOE_UTILS_SPEC = """\
from . import env as jit_env
from .core import JitSpec, current_compilation_context, gen_jit_spec


def gen_moe_utils_module() -> JitSpec:
    nvcc_flags = ["-DENABLE_BF16"]
    nvcc_flags += current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[10]
    )
    return gen_jit_spec(
        "moe_utils",
        [jit_env.FLASHINFER_CSRC_DIR / "moe_utils_binding.cu"],
        extra_cuda_cflags=nvcc_flags,
    )
"""

PORTABLE_KERNEL = """\
#include <cuda_runtime.h>

__global__ void moe_permute_kernel(const int* in, int* out, const int* map) {
#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))
  cudaGridDependencySynchronize();
#endif
  out[map[threadIdx.x]] = in[threadIdx.x];
}
"""

MOE_UTILS_PY = """\
import functools

from ...jit.moe_utils import gen_moe_utils_module


@functools.cache
def _get_moe_utils_module():
    spec = gen_moe_utils_module()
    return spec.build_and_load()


def moe_sort(topk_ids, num_experts):
    module = _get_moe_utils_module()
    return module.moe_sort(topk_ids, num_experts)


def moe_permute(x, permuted):
    module = _get_moe_utils_module()
    return module.moe_permute(x, permuted)
"""

FUSED_MOE_PY = """\
from ...utils import supported_compute_capability
from .moe_utils import moe_sort


def _moe_core_impl(x, topk_ids):
    order = moe_sort(topk_ids, 256)
    return x[order]


class CuteDslMoEWrapper:
    @supported_compute_capability([100, 103])
    def __init__(self, num_experts: int):
        self.num_experts = num_experts

    def run(self, x, topk_ids):
        return _moe_core_impl(x, topk_ids)


@supported_compute_capability([100, 103])
def cute_dsl_fused_moe_nvfp4(x, topk_ids):
    return _moe_core_impl(x, topk_ids)
"""

AOT_PY = """\
from .jit.moe_utils import gen_moe_utils_module


def gen_all_modules(has_sm90: bool, has_sm100f: bool):
    jit_specs = []
    if has_sm100f:
        jit_specs.append(gen_moe_utils_module())
    return jit_specs
"""

# an API nothing gates, exported by the package: sm_121 reaches moe_utils through it
UNGATED_EXPORT = ("flashinfer/__init__.py", "from .fused_moe.cute_dsl.moe_utils import moe_permute as moe_permute\n")

MIXED_COMM_SPEC = """\
from . import env as jit_env
from .core import JitSpec, current_compilation_context, gen_jit_spec


def gen_mixed_comm_module() -> JitSpec:
    source_paths = [jit_env.FLASHINFER_CSRC_DIR / "mixed_comm.cu"]
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[9, 10]
    ) + ["-rdc=true"]
    return gen_jit_spec("mixed_comm", source_paths, extra_cuda_cflags=nvcc_flags)
"""

MIXED_COMM_CU = '#include "flashinfer/comm/mixed_comm.cuh"\n'

MULTIMEM_CUH = """\
#pragma once
#include <cuda_runtime.h>

__device__ __forceinline__ void multimem_add(uint32_t* mc_ptr, uint32_t value) {
  asm volatile("multimem.red.release.sys.global.add.u32 [%0], %1;" ::"l"(mc_ptr), "r"(value) : "memory");
}
"""

UNICAST_CUH = """\
#pragma once
#include <cuda_runtime.h>

__device__ __forceinline__ void unicast_add(uint32_t* ptr, uint32_t value) { atomicAdd(ptr, value); }
"""

MIXED_COMM_PY = """\
from ..jit.comm import gen_mixed_comm_module


def get_mixed_comm_module():
    return gen_mixed_comm_module().build_and_load()


def run_mixed_comm(x):
    return get_mixed_comm_module().allreduce(x)
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "include").mkdir(exist_ok=True)
    return root


def moe_tree(root: Path, *extra: tuple[str, str]) -> Path:
    return write(root, {
        "flashinfer/jit/moe_utils.py": MOE_UTILS_SPEC,
        "csrc/moe_utils_binding.cu": PORTABLE_KERNEL,
        "flashinfer/fused_moe/cute_dsl/moe_utils.py": MOE_UTILS_PY,
        "flashinfer/fused_moe/cute_dsl/fused_moe.py": FUSED_MOE_PY,
        "flashinfer/aot.py": AOT_PY,
        "flashinfer/jit/__init__.py": "from .moe_utils import gen_moe_utils_module as gen_moe_utils_module\n",
        **dict(extra),
    })


def comm_tree(root: Path, header: str) -> Path:
    return write(root, {
        "flashinfer/jit/comm.py": MIXED_COMM_SPEC,
        "csrc/mixed_comm.cu": MIXED_COMM_CU,
        "include/flashinfer/comm/mixed_comm.cuh": header,
        "flashinfer/comm/mixed_comm.py": MIXED_COMM_PY,
        "flashinfer/comm/__init__.py": "from .mixed_comm import run_mixed_comm as run_mixed_comm\n",
    })


def gate(root: Path, file: str) -> dict:
    [found] = [g for g in scan(root, SM121, jobs=1).gates if g["file"] == file and g["kind"] == "python_arch_list"]
    return found


def test_a_module_only_apis_for_other_archs_use_needs_a_human(tmp_path):
    found = gate(moe_tree(tmp_path), "flashinfer/jit/moe_utils.py")
    assert found["classification"] == "needs-human", found["reason"]
    assert "only code kept from sm_121 uses it" in found["reason"]
    for where in ("flashinfer/aot.py:6", "fused_moe.py:11, [100, 103]", "fused_moe.py:19, [100, 103]"):
        assert where in found["reason"]


def test_the_same_module_with_an_ungated_export_is_widenable(tmp_path):
    found = gate(moe_tree(tmp_path, UNGATED_EXPORT), "flashinfer/jit/moe_utils.py")
    assert (found["classification"], found["reason"]) == ("widenable", "moe_utils is not built for sm_121")


def test_a_module_an_sm12x_api_uses_stays_widenable(tmp_path):
    sm12x = FUSED_MOE_PY.replace("[100, 103])\ndef", "[100, 103, 120])\ndef")
    found = gate(moe_tree(tmp_path, ("flashinfer/fused_moe/cute_dsl/fused_moe.py", sm12x)), "flashinfer/jit/moe_utils.py")
    assert found["classification"] == "widenable"  # the API gate admits sm_120: the list goes with widening it


def test_multimem_kernels_need_a_human(tmp_path):
    found = gate(comm_tree(tmp_path, MULTIMEM_CUH), "flashinfer/jit/comm.py")
    assert found["classification"] == "needs-human", found["reason"]
    assert "multimem.red (include/flashinfer/comm/mixed_comm.cuh:5)" in found["reason"]
    assert "NVLink multicast" in found["reason"]


def test_the_same_collective_without_multimem_is_widenable(tmp_path):
    found = gate(comm_tree(tmp_path, UNICAST_CUH), "flashinfer/jit/comm.py")
    assert found["classification"] == "widenable"


def _ways(tmp_path, files: dict[str, str], gates: dict[str, set[int]], function: str):
    root = write(tmp_path, files)
    rels = [p.relative_to(root).as_posix() for p in root.rglob("*.py")]
    return ways_in(lambda rel: (root / rel).read_bytes(), rels, gates, function)


@pytest.mark.parametrize(
    "caller, gated",
    [
        pytest.param("if has_sm100f:\n        specs.append(gen_x_module())", [True], id="enclosing-if-gate"),
        # not inside the if: the way goes on to gen_all_modules's callers, and nothing calls or exports it
        pytest.param("if not has_sm100f:\n        return specs\n    specs.append(gen_x_module())", [],
                     id="call-after-an-early-return-is-not-inside-the-if"),
        pytest.param("registry = {'x': gen_x_module}", [False], id="a-reference-that-is-not-a-call"),
    ],
)
def test_ways_in_stop_at_the_gate_that_decides(tmp_path, caller, gated):
    aot = f"def gen_all_modules(has_sm100f):\n    specs = []\n    {caller}\n    return specs\n"
    gate_lines = {n for n, text in enumerate(aot.splitlines(), 1) if "has_sm100f:" in text}
    ways = _ways(tmp_path, {"flashinfer/aot.py": aot}, {"flashinfer/aot.py": gate_lines}, "gen_x_module")
    assert ways is not None and [w.gated for w in ways] == gated


def test_ways_in_follow_a_class_to_its_constructor_calls(tmp_path):
    handler = dedent(
        """\
        class MixedCommHandler:
            def __init__(self, group):
                self.module = get_x_module()


        def make_handler(group):
            return MixedCommHandler(group)
        """
    )
    files = {"flashinfer/comm/mixed.py": handler + "\n\ndef get_x_module():\n    return gen_x_module()\n",
             "flashinfer/comm/__init__.py": "from .mixed import make_handler as make_handler\n"}
    ways = _ways(tmp_path, files, {}, "gen_x_module")
    assert ways is not None and [(w.file, w.function, w.gated) for w in ways] == [
        ("flashinfer/comm/__init__.py", "make_handler", False)
    ]
    assert ast.parse(handler)  # the fixture is Python


# A held-out audit (tests/audit/sm110_flashinfer.toml) scanned for sm_110 called widenable the `[12]` lists of
# FlashInfer's SM120 modules (gemm_sm120, fp4_gemm_cutlass_sm120) and `[10]` of fused_moe_trtllm_sm100: widening
# them builds kernels written for another family (block-scaled mma.sync, sm_100a cubins) for sm_110.
SM110 = Arch.parse("sm_110")

GEMM_SPEC = """\
from . import env as jit_env
from .core import JitSpec, current_compilation_context, gen_jit_spec


def gen_gemm_sm120_module() -> JitSpec:
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[12]
    )
    return gen_jit_spec(
        "gemm_sm120",
        [jit_env.FLASHINFER_CSRC_DIR / "gemm_groupwise_sm120.cu"],
        extra_cuda_cflags=nvcc_flags,
    )
"""

GEMM_CU = '#include "flashinfer/gemm/gemm_groupwise.cuh"\n'

SM120_COLLECTIVE_CUH = """\
#pragma once
#include <cutlass/gemm/collective/collective_builder.hpp>

namespace flashinfer::gemm {
using ArchTag = cutlass::arch::Sm120;
using OperatorClass = cutlass::arch::OpClassBlockScaledTensorOp;
}  // namespace flashinfer::gemm
"""

PLAIN_CUH = """\
#pragma once
#include <cuda_runtime.h>

__global__ void scale_kernel(float* out, const float* in, float s) { out[threadIdx.x] = in[threadIdx.x] * s; }
"""


def gemm_tree(root: Path, header: str, name: str = "gemm_sm120") -> Path:
    spec = GEMM_SPEC.replace('"gemm_sm120"', f'"{name}"')
    source = "gemm_groupwise_sm120.cu" if name.endswith("sm120") else "gemm_groupwise.cu"
    return write(root, {
        "flashinfer/jit/gemm/core.py": spec.replace("gemm_groupwise_sm120.cu", source),
        f"csrc/{source}": GEMM_CU,
        "include/flashinfer/gemm/gemm_groupwise.cuh": header,
    })


def gemm_gate(root: Path, arch: Arch = SM110) -> dict:
    [found] = [g for g in scan(root, arch, jobs=1).gates if g["file"] == "flashinfer/jit/gemm/core.py"]
    return found


def test_a_module_named_for_another_family_needs_a_human(tmp_path):
    found = gemm_gate(gemm_tree(tmp_path, PLAIN_CUH))
    assert found["classification"] == "needs-human", found["reason"]
    assert "named for another family than sm_110 (gemm_sm120 for sm_120)" in found["reason"]


def test_the_same_module_named_for_no_arch_is_widenable(tmp_path):
    found = gemm_gate(gemm_tree(tmp_path, PLAIN_CUH, name="gemm_groupwise"))
    assert (found["classification"], found["reason"]) == ("widenable", "gemm_groupwise is not built for sm_110")


def test_a_module_named_for_the_arch_family_stays_widenable(tmp_path):
    tree = gemm_tree(tmp_path, PLAIN_CUH)
    (tree / "flashinfer/jit/gemm/core.py").write_text(GEMM_SPEC.replace("[12]", "[10]"))
    found = gemm_gate(tree, Arch.parse("sm_121"))  # gemm_sm120 kept from sm_121 by its list: same family
    assert found["classification"] == "widenable", found["reason"]


def test_an_sm120_cutlass_arch_tag_is_a_port_for_sm110(tmp_path):
    found = gemm_gate(gemm_tree(tmp_path, SM120_COLLECTIVE_CUH, name="gemm_groupwise"))
    assert found["classification"] == "needs-human", found["reason"]
    assert "cutlass::arch::Sm120 (include/flashinfer/gemm/gemm_groupwise.cuh:5)" in found["reason"]


GEMM_CHECK_CU = """\
#include "flashinfer/gemm/gemm_groupwise.cuh"

void gemm_fp8_nt_groupwise(int64_t device) {
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  TVM_FFI_ICHECK(major == 12) << "gemm_sm120 requires SM 12.x, got SM " << major << minor;
}
"""


def _check(root: Path, source: str) -> dict:
    (root / "csrc" / source).write_text(GEMM_CHECK_CU)
    [found] = [g for g in scan(root, SM110, jobs=1).gates if g["kind"] == "cpp_runtime_check"]
    return found


def test_a_check_only_a_module_for_another_family_compiles_needs_a_human(tmp_path):
    # FlashInfer 0.6.10 trtllm_fused_moe_kernel_launcher.cu: `TVM_FFI_ICHECK(major == 10 || major == 12)`, compiled
    # by fused_moe_trtllm_sm100 only, was widenable for sm_110 while the module's list needs a port
    found = _check(gemm_tree(tmp_path, PLAIN_CUH), "gemm_groupwise_sm120.cu")
    assert found["classification"] == "needs-human", found["reason"]
    assert found["reason"].startswith("only gemm_sm120 compile this file, and the list keeping it from the arch needs a human")


def test_the_same_check_in_a_module_whose_list_is_widenable_stays_widenable(tmp_path):
    found = _check(gemm_tree(tmp_path, PLAIN_CUH, name="gemm_groupwise"), "gemm_groupwise.cu")
    assert found["classification"] == "widenable", found["reason"]


# FlashInfer mla.py: a refusal in one backend's branch (`if backend == "xqa": if cap[0] != 12: raise`) guards the
# code after it in that branch, not the trtllm-gen branch beside it; scan called it widenable for sm_110 ("it
# builds fmha_gen"), the module of the other branch.
FMHA_SPEC = """\
from . import env as jit_env
from .core import JitSpec, gen_jit_spec


def gen_trtllm_gen_fmha_module() -> JitSpec:
    return gen_jit_spec("fmha_gen", [jit_env.FLASHINFER_CSRC_DIR / "trtllm_fmha_kernel_launcher.cu"])
"""

MLA_PY = """\
import functools

from .jit.attention import gen_trtllm_gen_fmha_module
from .utils import get_compute_capability


@functools.cache
def get_trtllm_gen_fmha_module():
    return gen_trtllm_gen_fmha_module().build_and_load()


def trtllm_batch_decode_with_kv_cache_mla(query, kv_cache, backend="auto"):
    if backend == "xqa":
        if get_compute_capability(query.device)[0] != 12:
            raise ValueError("XQA MLA only supports fp8 operation on SM120 GPUs")
        return xqa_batch_decode_with_kv_cache_mla(query, kv_cache)
    elif backend == "trtllm-gen":
        return get_trtllm_gen_fmha_module().trtllm_paged_attention_decode(query, kv_cache)
    raise ValueError(f"Backend {backend} not supported")
"""


def test_a_refusal_guards_the_code_after_it_not_the_branch_beside_it(tmp_path):
    root = write(tmp_path, {
        "flashinfer/jit/attention.py": FMHA_SPEC,
        "csrc/trtllm_fmha_kernel_launcher.cu": PLAIN_CUH,
        "flashinfer/mla.py": MLA_PY,
    })
    [found] = [g for g in scan(root, SM110, jobs=1).gates if g["file"] == "flashinfer/mla.py"]
    # the refusal's message states the requirement (issue 34: a requirement, not an oversight; before: unknown,
    # "the kernels it runs are not followed")
    assert (found["line"], found["classification"]) == (14, "needs-human"), found["reason"]
    assert "fmha_gen" not in found["reason"] and found["reason"].startswith("a stated requirement")


FMHA_V2_SPEC = """\
from . import env as jit_env
from .core import JitSpec, current_compilation_context, gen_jit_spec
from .fmha_v2_generator import generate_jit_sources


def gen_fmha_v2_module(input_layout, dtype) -> JitSpec:
    uri = f"fmha_v2_{input_layout}_{dtype}"
    source_paths = generate_jit_sources(uri, input_layout, dtype, compilation_context=current_compilation_context)
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[9, 12]
    )
    return gen_jit_spec(uri, source_paths, extra_cuda_cflags=nvcc_flags)
"""


def test_a_list_of_a_module_whose_sources_are_computed_is_not_widenable(tmp_path):
    # FlashInfer 0.6.10 fmha_v2: its kernels are generated at JIT time (for sm_90 and sm_120 only); scan called its
    # `[9, 12]` widenable for sm_110 without having read a line of what widening builds
    root = write(tmp_path, {"flashinfer/jit/fmha_v2.py": FMHA_V2_SPEC, "csrc/fmha_v2_run.cu": PLAIN_CUH})
    [found] = [g for g in scan(root, SM110, jobs=1).gates if g["file"] == "flashinfer/jit/fmha_v2.py"]
    assert found["classification"] == "unknown", found["reason"]
    assert "are computed: codemod cannot read what widening would build" in found["reason"]


def test_calls_follow_the_names_importers_give_a_function():
    files = {
        "python/pkg/attention/compat.py": "def cols(cc):\n    return cc\n\n\ndef twice(cc):\n    return cols(cc) * 2\n",
        "python/pkg/attention/decode.py": "from .compat import cols as _cols\n\n\ndef run():\n    return _cols('sm_100')\n",
        "python/pkg/mla.py": "import pkg.attention.compat as compat\n\nX = compat.cols('sm_103')\n",
        "python/pkg/gdn.py": "import cutlass.cute as cute\nfrom other import cols\n\n"
                             "a = cute.arch.cols('sm_90')\nb = cols(x)\n",  # other libraries' `cols`
        "python/pkg/table.py": "from pkg.attention.compat import cols\n\nTABLE = [cols]\n",
    }
    found = list(calls(Trees(lambda rel: files[rel].encode()), list(files), "python/pkg/attention/compat.py", "cols"))
    assert None not in found
    seen = sorted((r.file, r.line, r.call is not None) for r in found)
    assert seen == [
        ("python/pkg/attention/compat.py", 6, True),
        ("python/pkg/attention/decode.py", 5, True),
        ("python/pkg/mla.py", 3, True),
        ("python/pkg/table.py", 3, False),
    ]
    exported = {**files, "python/pkg/__init__.py": "from .attention.compat import cols\n"}
    listed = ["python/pkg/__init__.py", *files]
    assert list(calls(Trees(lambda rel: exported[rel].encode()), listed, "python/pkg/attention/compat.py", "cols")) == [
        None
    ]


def test_calls_reads_no_file_past_the_reference_its_reader_stops_at():
    # FlashInfer 0.7.4's `spec` is named in 1,982 files: map_callers stops at the first reference that is no call
    # passing a literal, and the files after it must not be read or parsed (they cost 74 s of a cold scan)
    files = {
        "pkg/compat.py": "def spec(cc):\n    return cc\n",
        "pkg/a.py": "from pkg.compat import spec\n\nTABLE = [spec]\n",
        "pkg/b.py": "from pkg.compat import spec\n\nX = spec('sm_100')\n",
    }
    read: list[str] = []

    def reading(rel: str) -> bytes:
        read.append(rel)
        return files[rel].encode()

    first = next(calls(Trees(reading), ["pkg/a.py", "pkg/b.py", "pkg/compat.py"], "pkg/compat.py", "spec"))
    assert first is not None and (first.file, first.line, first.call) == ("pkg/a.py", 3, None)
    assert read == ["pkg/a.py"]


def test_with_the_scans_finder_only_files_holding_the_word_are_read_and_the_ways_are_the_same(tmp_path):
    # The scan's Trees asks rg which files hold a word (finder.holding) instead of reading every file per word.
    files = {
        "flashinfer/comm/mixed.py": "def get_x_module():\n    return gen_x_module()\n\n\nregistry = [get_x_module]\n",
        "flashinfer/comm/__init__.py": "from .mixed import get_x_module as get_x_module\n",
        "flashinfer/unrelated.py": "def other():\n    return 1\n",
        "flashinfer/mentions.py": "# gen_x_module_v2 is another module\n",
    }
    root = write(tmp_path, files)
    rels = sorted(files)
    read: list[str] = []

    def reading(rel: str) -> bytes:
        read.append(rel)
        return (root / rel).read_bytes()

    from codemods.audit import finder

    trees = Trees(reading, files=rels, find=lambda literal: finder.holding(root, rels, literal))
    found = ways_in(reading, rels, {}, "gen_x_module", trees)
    assert found == ways_in(lambda rel: (root / rel).read_bytes(), rels, {}, "gen_x_module")
    assert found is not None and [(w.file, w.function, w.gated) for w in found] == [
        ("flashinfer/comm/mixed.py", "<module>", False), ("flashinfer/comm/__init__.py", "get_x_module", False),
    ]
    assert "flashinfer/unrelated.py" not in read
    assert "flashinfer/mentions.py" in read  # holds the bytes, not the word: read, and found to be no reference
