"""What scan calls a gate that excludes sm_121 (issue 18 rule 2: #if/#elif/#else as one structure).

Each case is a header in the style of FlashInfer's and TRT-LLM's, the line of the gate, and the
classification; the `widened` cases are the same shapes after the fix, which admit the arch.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from codemods.core.arch import Arch
from codemods.audit.scan import scan
from codemods.render.scan_text import to_text

SM121 = Arch.parse("sm_121")


def classification(tmp_path, source: str, line: int, arch: Arch = SM121) -> tuple[str, str]:
    (tmp_path / "k.cuh").write_text(textwrap.dedent(source).lstrip("\n"))
    [gate] = [g for g in scan(tmp_path, arch, jobs=1).gates if g["line"] == line]
    return gate["classification"], gate["reason"]


CASES = [
    pytest.param(
        """
        #if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 800)
        inline __device__ float2 bf1622float2(const __nv_bfloat162 val) {
          float2 f_val; f_val.x = __low2float(val); f_val.y = __high2float(val); return f_val;
        }
        #else
        inline __device__ float2 bf1622float2(const __nv_bfloat162 val) { return __bfloat1622float2(val); }
        #endif
        """, 1, "covered", "fallback for older archs", id="bf16-fallback-below-800-with-else",
    ),
    pytest.param(
        """
        #if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 800)
        inline __device__ __nv_bfloat162 bf16hmul2(const __nv_bfloat162 x, const __nv_bfloat162 y) {
          return __floats2bfloat162_rn(__low2float(x) * __low2float(y), __high2float(x) * __high2float(y));
        }
        #endif
        """, 1, "covered", "fallback for older archs", id="bf16-fallback-below-800-alone",
    ),
    pytest.param(
        """
        #if __CUDA_ARCH__ == 900
        #define SWAP_AB_TILE 128
        #else
        #define SWAP_AB_TILE 64
        #endif
        """, 1, "covered", "default elsewhere", id="tuning-macro-with-else-default",
    ),
    pytest.param(
        """
        #if __CUDA_ARCH__ == 900
        #define ENABLE_PDL 2
        #endif
        #ifndef ENABLE_PDL
        #define ENABLE_PDL 1
        #endif
        """, 1, "covered", "default elsewhere", id="tuning-macro-with-ifndef-default",
    ),
    pytest.param(
        """
        template <typename T>
        __global__ void lamport_allreduce_kernel(AllReduceParams params) {
        #if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))
          cudaGridDependencySynchronize();
          reduce_into(params.out, params.peer_ptrs, params.size);
        #endif
        }
        """, 3, "widenable", "no branch of this #if group gives sm_121 code", id="kernel-body-nothing-else",
    ),
    pytest.param(
        """
        #if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))
        __device__ void store_flags(int* flags) { flags[threadIdx.x] = 1; }
        #else
        #error "this kernel needs sm_90 to sm_11x"
        #endif
        """, 1, "widenable", "an #error", id="else-is-an-error",
    ),
    pytest.param(
        """
        __global__ void moe_permute_kernel(int* out, const int* in) {
        #if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900 || __CUDA_ARCH__ == 1000)
          out[threadIdx.x] = in[threadIdx.x];
        #else
          __trap();
        #endif
        }
        """, 2, "widenable", "does no work", id="else-is-a-trap",
    ),
    pytest.param(
        """
        __global__ void fill_kernel(float* out) {
        #if __CUDA_ARCH__ >= 1000 && __CUDA_ARCH__ < 1200
          out[threadIdx.x] = 1.f;
        #else
          assert(false);
          return;
        #endif
        }
        """, 2, "widenable", "does no work", id="else-is-assert-false-and-return",
    ),
    pytest.param(
        """
        __device__ void load_tile(float* smem, const float* gmem) {
        #if __CUDA_ARCH__ == 900 || __CUDA_ARCH__ == 1000
          tma_load_tile(smem, gmem);
        #else
          for (int i = threadIdx.x; i < 1024; i += blockDim.x) smem[i] = gmem[i];
        #endif
        }
        """, 2, "needs-human", "takes #else (line 4) instead", id="else-is-a-slower-fallback",
    ),
    pytest.param(
        """
        __device__ void mma_tile(float* d) {
        #if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900)
          asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");
        #endif
        }
        """, 2, "needs-human", "instructions the arch lacks", id="hopper-only-wgmma",
    ),
    pytest.param(
        """
        static inline __device__ float warp_reduce_max(const float m) {
          float max_val = m;
        #if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000) && defined(__CUDA_ARCH_FEAT_SM100_ALL)
          asm volatile("redux.sync.max.f32 %0, %1, %2;" : "=f"(max_val) : "f"(m), "r"(0xffffffff));
          return max_val;
        #endif
          for (int delta = 16; delta > 0; delta /= 2) max_val = fmaxf(max_val, __shfl_down_sync(0xffffffff, max_val, delta));
          return max_val;
        }
        """, 3, "needs-human", "early-return fast path", id="early-return-fast-path",
    ),
    pytest.param(
        """
        #if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200
        __device__ void kernel_body(float* p) {
        #if __CUDA_ARCH__ == 900
          p[0] = 1.f;
        #endif
        }
        #endif
        """, 3, "covered", "which sm_121 does not take", id="nested-in-an-excluding-branch",
    ),
    pytest.param(
        """
        #if __CUDA_ARCH__ >= 1200
        #define XQA_TILE 64
        __device__ void tile(float* p) { p[0] = 2.f; }
        #elif __CUDA_ARCH__ == 900
        __device__ void tile(float* p) { p[0] = 1.f; }
        #endif
        """, 4, "covered", "takes its own branch", id="arch-takes-an-earlier-branch",
    ),
    pytest.param(
        """
        #if !defined(__CUDA_ARCH__)
        inline void host_only_check() {}
        #endif
        """, 1, "covered", "host pass from the device pass", id="host-device-split",
    ),
]


@pytest.mark.parametrize("source, line, expected, reason", CASES)
def test_what_sm121_gets_where_a_guard_excludes_it(tmp_path, source, line, expected, reason):
    got, why = classification(tmp_path, source, line)
    assert got == expected, why
    assert reason in why


@pytest.mark.parametrize(
    "source, line",
    [
        pytest.param(
            """
            __global__ void lamport_allreduce_kernel(AllReduceParams params) {
            #if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))
              reduce_into(params.out, params.peer_ptrs, params.size);
            #endif
            }
            """, 2, id="widened-kernel-body",
        ),
        pytest.param(
            """
            __device__ void moe_permute(int* out, const int* in) {
            #if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900 || __CUDA_ARCH__ == 1000 || __CUDA_ARCH__ == 1210)
              out[threadIdx.x] = in[threadIdx.x];
            #else
              __trap();
            #endif
            }
            """, 2, id="widened-equality-chain",
        ),
    ],
)
def test_widened_shapes_admit_sm121(tmp_path, source, line):
    assert classification(tmp_path, source, line)[0] == "admits"


def test_sm121_specific_findings_come_first(tmp_path):
    (tmp_path / "mma_tensor_op.h").write_text(
        "#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 1200)\n"
        "__device__ void mma(float* d) { d[0] = 1.f; }\n"
        "#endif\n"
        "#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200\n"
        "__device__ void comm(float* d) { d[0] = 2.f; }\n"
        "#endif\n"
    )
    text = to_text(scan(tmp_path, SM121, jobs=1))
    specific, _, rest = text.partition("== the rest")
    assert "== specific to sm_121 (they admit sm_120, not sm_121): 1" in specific
    assert "mma_tensor_op.h:1: cuda_guard" in specific and "mma_tensor_op.h:4" in rest
    # sm_120 has no such section, and the == 1200 guard admits it
    assert "== specific" not in to_text(scan(tmp_path, Arch.parse("sm_120"), jobs=1))


def test_cli_quiet_verbose_and_colours(cli, tmp_path):
    (tmp_path / "k.cuh").write_text(
        "#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200\n__device__ void f(float* p) { p[0] = 1.f; }\n#endif\n"
        "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800\n__device__ void g(float* p) { p[0] = 0.f; }\n#endif\n"
    )
    plain = cli("scan", "--repo", tmp_path, "--arch", "sm_121")
    assert plain.exit_code == 0 and "\033[" not in plain.stdout and "scanned " not in plain.stderr
    assert "\nwidenable (1): sm_121 gets nothing here" in plain.stdout and "k.cuh:4" not in plain.stdout
    quiet = cli("scan", "--repo", tmp_path, "--arch", "sm_121", "--quiet")
    assert "      1 widenable" in quiet.stdout and "k.cuh:1" not in quiet.stdout
    verbose = cli("scan", "--repo", tmp_path, "--arch", "sm_121", "--verbose")
    assert "covered (1): they exclude sm_121" in verbose.stdout and "k.cuh:4" in verbose.stdout
    assert "scanned " in verbose.stderr
    coloured = to_text(scan(tmp_path, SM121, jobs=1), color=True)
    assert "\033[33mwidenable (1):" in coloured


def test_json_and_sarif_carry_the_text_groups(cli, tmp_path):
    (tmp_path / "mma_tensor_op.h").write_text(
        "__device__ void mma(float* d) {\n"
        "#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 1200)\n  d[0] = 1.f;\n#else\n  d[0] = 0.f;\n#endif\n}\n"
        "__device__ void comm(float* d) {\n"
        "#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200\n  d[0] = 2.f;\n#endif\n}\n"
        "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800\n__device__ void g(float* p) { p[0] = 0.f; }\n#endif\n"
    )
    text = cli("scan", "--repo", tmp_path, "--arch", "sm_121").stdout
    assert "\nneeds a human (1): " in text and "\nwidenable (1): " in text
    data = json.loads(cli("scan", "--repo", tmp_path, "--arch", "sm_121", "--format", "json").stdout)
    by_line = {g["line"]: g for g in data["gates"]}
    assert [(by_line[n]["classification"], by_line[n]["symbol"], by_line[n]["specific"]) for n in (2, 9)] == [
        ("needs-human", "mma", True), ("widenable", "comm", False)
    ]
    assert by_line[13]["classification"] == "covered" and by_line[13]["specific"] is False
    [run] = json.loads(cli("scan", "--repo", tmp_path, "--arch", "sm_121", "--format", "sarif").stdout)["runs"]
    gates = {r["locations"][0]["physicalLocation"]["region"]["startLine"]: r for r in run["results"]}
    assert {n: (r["properties"]["classification"], r["level"]) for n, r in gates.items()} == {
        2: ("needs-human", "note"), 9: ("widenable", "warning"), 13: ("covered", "none")
    }
    assert gates[9]["message"]["text"].startswith("widenable: cuda_guard `__CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200` in comm")
    assert gates[9]["locations"][0]["logicalLocations"] == [{"name": "comm", "kind": "function"}]
    assert gates[2]["properties"]["specific"] is True and gates[9]["properties"]["specific"] is False
    assert run["properties"]["classifications"] == {
        "blocker": 0, "widenable": 1, "needs-human": 1, "other-arch": 0, "tuning": 0, "unknown": 0, "covered": 1,
        "definition": 0
    }
    # sm_120 has no sibling: no `specific` anywhere
    plain = json.loads(cli("scan", "--repo", tmp_path, "--arch", "sm_120", "--format", "json").stdout)
    assert all("specific" not in g for g in plain["gates"])


def test_a_choice_is_a_fallback_and_a_value_is_unknown_never_a_blocker():
    from codemods.audit import classify

    choice = classify.value_path("'xqa'", "", SM121)
    assert classify.classify(True, choice, [], editable=True) == (
        "needs-human", "sm_121 gets `'xqa'` instead: the condition picks between two values, not a path it lacks; "
        "widening would change which one it gets")
    value = classify.value_path(None, "what uses `is_sm120` decides", SM121)
    assert classify.classify(True, value, [], editable=True) == (
        "unknown", "a value, not a guard: what uses `is_sm120` decides")
