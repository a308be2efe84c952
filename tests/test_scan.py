"""`scan`: gates, widenability and hazards over small trees in FlashInfer's shapes, and over real FlashInfer 0.6.3."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from textwrap import dedent

import pytest

from codemods.core.arch import Arch
from codemods.audit.scan import check, scan
from codemods.render.sarif import to_sarif
from codemods.render.scan_json import to_json
from codemods.render.scan_text import to_text

SM120 = Arch.parse("sm_120")
SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"

OLD_GUARD = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"
NEW_GUARD = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))"

COMM_PY = """\
from . import env as jit_env
from .core import JitSpec, current_compilation_context, gen_jit_spec


def gen_comm_alltoall_module() -> JitSpec:
    return gen_jit_spec(
        "comm",
        [
            jit_env.FLASHINFER_CSRC_DIR / "trtllm_alltoall.cu",
        ],
    )


def gen_trtllm_comm_module() -> JitSpec:
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions={majors}
    )
    return gen_jit_spec(
        "trtllm_comm",
        [
            jit_env.FLASHINFER_CSRC_DIR / "trtllm_allreduce.cu",
        ],
        extra_cuda_cflags=nvcc_flags,
    )
"""

ALLREDUCE_CU = """\
#include <cstdint>

#include "flashinfer/comm/trtllm_allreduce.cuh"
"""

ALLREDUCE_CUH = """\
#pragma once
#include "../utils.cuh"

template <typename T>
__global__ void rms_norm_kernel(T* out) {{
{guard}
  cudaGridDependencySynchronize();
#endif
  out[threadIdx.x] = T(0);
{guard}
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}}
"""

UTILS_CUH = """\
#pragma once
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  // a fallback for old GPUs: excludes sm_120, but is no kernel body of the module's archs
  inline __device__ int lane() { return 0; }
#endif
"""

ALLTOALL_CU = """\
#if __CUDA_ARCH__ >= 900
__global__ void alltoall() {}
#endif
"""


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(dedent(text) if text.startswith("\n") else text)
    return root


def flashinfer(tmp_path: Path, majors: str = "[9, 10]", guard: str = OLD_GUARD, extra: dict | None = None) -> Path:
    """A FlashInfer checkout in miniature: one gated and one ungated JIT spec, a .cu including a header."""
    return write(
        tmp_path / "fi",
        {
            "flashinfer/jit/comm.py": COMM_PY.format(majors=majors),
            "csrc/trtllm_allreduce.cu": ALLREDUCE_CU,
            "csrc/trtllm_alltoall.cu": ALLTOALL_CU,
            "include/flashinfer/comm/trtllm_allreduce.cuh": ALLREDUCE_CUH.format(guard=guard),
            "include/flashinfer/utils.cuh": UTILS_CUH,
            **(extra or {}),
        },
    )


HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"


# ---------------------------------------------------------------- empty-kernel


def test_partial_patch_is_an_empty_kernel_hazard(tmp_path):
    result = scan(flashinfer(tmp_path, majors="[9, 10, 12]"), SM120)
    empty = [h for h in result.hazards if h["kind"] == "empty-kernel"]
    assert [(h["file"], h["line"], h["module"], h["potential"]) for h in empty] == [
        (HEADER, 6, "trtllm_comm", False),
        (HEADER, 10, "trtllm_comm", False),
    ]
    assert "trtllm_comm is built for sm_120" in empty[0]["message"]
    assert "returns garbage without an error" in empty[0]["message"]
    assert check(result) is True


def test_full_patch_has_no_hazard(tmp_path):
    result = scan(flashinfer(tmp_path, majors="[9, 10, 12]", guard=NEW_GUARD), SM120)
    assert result.hazards == []
    assert check(result) is False


def test_unpatched_jit_gate_excludes_the_arch_so_no_hazard(tmp_path):
    result = scan(flashinfer(tmp_path), SM120)
    assert result.hazards == []
    guards = [g for g in result.gates if g["file"] == HEADER]
    assert [(g["line"], g["excludes_arch"], g["widenable"], g["blockers"]) for g in guards] == [
        (6, True, True, []),
        (10, True, True, []),
    ]


def test_sm121_is_judged_like_sm120(tmp_path):
    result = scan(flashinfer(tmp_path, majors="[9, 10, 12]"), Arch.parse("sm_121"))
    assert [h["line"] for h in result.hazards if h["kind"] == "empty-kernel"] == [6, 10]


def _hazards_for(tmp_path, body: str, majors: str = "[9, 10, 12]", arch: Arch = SM120) -> list[dict]:
    header = "#pragma once\n" + dedent(body)
    result = scan(flashinfer(tmp_path, majors=majors, extra={HEADER: header}), arch)
    return [h for h in result.hazards if h["kind"] == "empty-kernel"]


@pytest.mark.parametrize(
    "body, majors, arch",
    [
        pytest.param(
            """\
            #if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200
              fast_path();
            #else
              slow_path();
            #endif
            """,
            "[9, 10, 12]",
            SM120,
            id="the-else-branch-gives-the-arch-code",
        ),
        pytest.param(
            """\
            #if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200
              // nothing but a comment
            #define ONLY_A_MACRO 1
            #endif
            """,
            "[9, 10, 12]",
            SM120,
            id="body-without-code",
        ),
        pytest.param(
            """\
            #if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
              fp4_only_path();
            #endif
            """,
            "[9, 10, 12]",
            Arch.parse("sm_90"),
            id="a-feature-floor-newer-targets-keep-is-no-narrow-guard",
        ),
        pytest.param(
            """\
            #if __CUDA_ARCH__ < 800
              fallback();
            #endif
            """,
            "[9, 10, 12]",
            SM120,
            id="no-target-of-the-module-keeps-the-code",
        ),
        pytest.param(
            """\
            #ifndef __CUDA_ARCH__
              host_only();
            #endif
            """,
            "[9, 10, 12]",
            SM120,
            id="host-pass-only",
        ),
        pytest.param(
            """\
            #if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200
              body();
            #endif
            """,
            "sorted(MAJORS)",
            SM120,
            id="computed-list-is-no-gate",
        ),
    ],
)
def test_no_empty_kernel(tmp_path, body, majors, arch):
    assert _hazards_for(tmp_path, body, majors, arch) == []


def test_exact_match_guard_misses_the_newer_family_member(tmp_path):
    body = """\
    #if __CUDA_ARCH__ == 1200
      sm120_body();
    #endif
    """
    hazards = _hazards_for(tmp_path, body, majors="[12]", arch=Arch.parse("sm_121"))
    assert [(h["line"], h["module"]) for h in hazards] == [(2, "trtllm_comm")]


def test_only_the_outer_of_nested_excluding_guards_is_reported(tmp_path):
    body = """\
    #if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200
    #if __CUDA_ARCH__ >= 1000 && __CUDA_ARCH__ < 1200
      inner();
    #endif
      outer();
    #endif
    """
    assert [h["line"] for h in _hazards_for(tmp_path, body)] == [2]


def test_a_guard_in_a_spec_without_arch_list_is_not_judged(tmp_path):
    # trtllm_alltoall.cu belongs to the ungated `comm` spec; its guard excludes nothing in
    # the module's (unknown) archs, and the rule judges only explicitly listed majors.
    extra = {"csrc/trtllm_alltoall.cu": OLD_GUARD + "\n__global__ void k() {}\n#endif\n"}
    result = scan(flashinfer(tmp_path, extra=extra), SM120)
    assert result.hazards == []


def test_multi_part_and_loose_sources_reach_the_closure(tmp_path):
    comm = dedent(
        """\
        def gen_moe_module():
            nvcc_flags = current_compilation_context.get_nvcc_flags_list(supported_major_versions=[9, 10, 12])
            return gen_jit_spec(
                "moe",
                [jit_env.FLASHINFER_CSRC_DIR / "nv_internal" / "kernels" / "moe.cu"],
                extra_include_paths=[str(jit_env.FLASHINFER_CSRC_DIR / "nv_internal" / "include")],
                extra_cuda_cflags=nvcc_flags,
            )


        def gen_loose_module():
            source_paths = []
            for filename in ["loose.cu"]:
                source_paths.append(jit_env.FLASHINFER_GEN_SRC_DIR / filename)
            return gen_jit_spec("loose", source_paths, extra_cuda_cflags=sm120a_nvcc_flags)
        """
    )
    guarded = OLD_GUARD + "\n  body();\n#endif\n"
    root = write(
        tmp_path / "fi",
        {
            "flashinfer/jit/moe.py": comm,
            "csrc/nv_internal/kernels/moe.cu": '#include "common/utils.h"\n',
            "csrc/nv_internal/include/common/utils.h": guarded,
            "csrc/loose.cu": "#include <flashinfer/loose.cuh>\n",
            "include/flashinfer/loose.cuh": "#if __CUDA_ARCH__ == 900\n  body();\n#endif\n",
        },
    )
    result = scan(root, SM120)
    assert {m["module"]: m["closure"] for m in result.modules} == {"moe": 2, "loose": 2}
    assert [(h["file"], h["module"]) for h in result.hazards] == [
        ("csrc/nv_internal/include/common/utils.h", "moe"),
    ]  # `loose` is built for sm_120a only: no older target keeps the == 900 code


# ---------------------------------------------------------------- unsupported-instruction

TCGEN05 = """\
#if __CUDA_ARCH__ >= 1000
__device__ void alloc(unsigned* dst) {
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(dst));
}
#endif
"""


def _tcgen05_tree(tmp_path: Path, module: str | None) -> Path:
    """TCGEN05 in csrc/tmem.cu, compiled by a JIT spec with the given gate (no spec when None)."""
    files: dict[str, str] = {"csrc/tmem.cu": TCGEN05, "flashinfer/jit/__init__.py": ""}
    if module is not None:
        files["flashinfer/jit/tmem.py"] = dedent(
            f"""\
            def gen_tmem_module():
                {module}
                return gen_jit_spec("tmem", [jit_env.FLASHINFER_CSRC_DIR / "tmem.cu"], extra_cuda_cflags=flags)
            """
        )
    return write(tmp_path / "fi", files)


def test_tcgen05_in_no_module_is_a_potential_hazard(tmp_path):
    result = scan(_tcgen05_tree(tmp_path, None), SM120)
    assert [(h["kind"], h["file"], h["line"], h["potential"], h["tokens"]) for h in result.hazards] == [
        ("unsupported-instruction", "csrc/tmem.cu", 1, True, ["tcgen05.alloc", ".cta_group::1"]),
    ]
    assert check(result) is False


def test_tcgen05_in_a_module_gated_away_from_the_arch_is_no_hazard(tmp_path):
    flags = "flags = ctx.get_nvcc_flags_list(supported_major_versions=[10, 11])"
    assert scan(_tcgen05_tree(tmp_path, flags), SM120).hazards == []


def test_tcgen05_in_a_module_built_for_the_arch_is_a_hazard(tmp_path):
    flags = "flags = ctx.get_nvcc_flags_list(supported_major_versions=[10, 11, 12])"
    result = scan(_tcgen05_tree(tmp_path, flags), SM120)
    [hazard] = result.hazards
    assert (hazard["kind"], hazard["module"], hazard["potential"]) == ("unsupported-instruction", "tmem", False)
    assert "tcgen05.alloc" in hazard["message"] and "tmem is built for sm_120" in hazard["message"]
    assert check(result) is True


def test_tcgen05_in_a_module_without_arch_list_is_potential(tmp_path):
    result = scan(_tcgen05_tree(tmp_path, "flags = []"), SM120)
    assert [(h["module"], h["potential"]) for h in result.hazards] == [("tmem", True)]


def test_cute_wrapper_names_alone_are_potential(tmp_path):
    source = "#if __CUDA_ARCH__ >= 900\n  cute::warpgroup_arrive();\n#endif\n"
    root = _tcgen05_tree(tmp_path, "flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 12])")
    (root / "csrc/tmem.cu").write_text(source)
    [hazard] = scan(root, SM120).hazards
    assert (hazard["tokens"], hazard["potential"]) == (["warpgroup_arrive"], True)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            '#if __CUDA_ARCH__ == 1000\n  asm volatile("tcgen05.alloc;");\n#endif\n', id="guard-excludes-the-arch"
        ),
        pytest.param(
            "#if __CUDA_ARCH__ >= 1000\n  // tcgen05.alloc is not used here\n#endif\n", id="token-in-a-comment"
        ),
        pytest.param(
            '__device__ void f() { asm volatile("tcgen05.alloc;"); }\n__CUDA_ARCH__;\n', id="no-arch-guard-around-it"
        ),
        pytest.param(
            "#if defined(__CUDA_ARCH__) && !defined(NDEBUG)\n  assert(tmem_addr);\n#endif\n",
            id="device-pass-test-selects-no-arch",
        ),
        pytest.param(
            '#if __CUDA_ARCH__ >= 1000\n#if __CUDA_ARCH__ < 1200\n  asm("tcgen05.alloc;");\n#endif\n#endif\n',
            id="an-inner-guard-excludes-the-arch",
        ),
    ],
)
def test_no_unsupported_instruction(tmp_path, source):
    root = _tcgen05_tree(tmp_path, None)
    (root / "csrc/tmem.cu").write_text(source)
    assert scan(root, SM120).hazards == []


def test_block_scaled_mma_sync_blocks_sm100(tmp_path):
    source = dedent(
        """\
        #if __CUDA_ARCH__ >= 1000
          asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X"
                       ".f32.e4m3.e4m3.f32.ue8m0 {%0}, ...;");
        #endif
        """
    )
    root = _tcgen05_tree(tmp_path, None)
    (root / "csrc/tmem.cu").write_text(source)
    assert [h["tokens"] for h in scan(root, Arch.parse("sm_100")).hazards] == [["kind::mxf8f6f4", ".block_scale"]]
    assert scan(root, SM120).hazards == []


# ---------------------------------------------------------------- widenability


def test_guard_excluding_sm120_around_tcgen05_is_not_widenable(tmp_path):
    source = TCGEN05.replace("#if __CUDA_ARCH__ >= 1000", "#if __CUDA_ARCH__ >= 1000 && __CUDA_ARCH__ < 1200")
    root = write(tmp_path / "t", {"kernels/tmem.cu": source})
    [gate] = scan(root, SM120).gates
    assert gate["excludes_arch"] is True
    assert gate["widenable"] is False
    assert [b.split(" (")[0] for b in gate["blockers"]] == ["tcgen05.alloc", ".cta_group::1"]
    assert gate["blockers"][0].startswith("tcgen05.alloc (line 3): tcgen05/TMEM exists only on sm_100/103/110")


def test_blockers_ignore_nested_branches_the_arch_still_skips(tmp_path):
    source = dedent(
        """\
        #if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200
        #if __CUDA_ARCH__ == 900
          asm volatile("wgmma.fence.sync.aligned;");
        #else
          portable();
        #endif
        #endif
        """
    )
    gates = scan(write(tmp_path / "t", {"k.cuh": source}), SM120).gates
    assert [(g["line"], g["excludes_arch"], g.get("widenable")) for g in gates] == [
        (1, True, True),
        (2, True, False),  # the inner guard itself would admit sm_120 onto wgmma
    ]


def test_blockers_for_is_callable_per_gate():
    from codemods.gates.cpp import cuda_guard
    from codemods.cpp.hazards import blockers_for

    source = b'#if __CUDA_ARCH__ == 1200\n  asm("mma.sync.aligned.kind::f8f6f4.m16n8k32 ...;");\n#endif\n'
    [gate] = cuda_guard.find(source)
    assert blockers_for(source, gate, SM120) == []  # sm_120 has it
    [blocker] = blockers_for(source, gate, Arch.parse("sm_100a"))
    assert blocker.startswith("kind::f8f6f4 (line 2): mma.sync kind::*/block_scale exists only on sm_120/121")
    assert blocker.endswith("; not on sm_100a")


def test_python_gates_carry_no_widenability(tmp_path):
    result = scan(flashinfer(tmp_path), SM120)
    [jit] = [g for g in result.gates if g["kind"] == "python_arch_list"]
    assert jit["excludes_arch"] is True and "widenable" not in jit and "blockers" not in jit


# ---------------------------------------------------------------- walking, skipping, jobs


def test_skips_undecodable_and_unparsable_files_with_a_reason(tmp_path):
    root = write(
        tmp_path / "t",
        {
            "bad.cu": b"#if __CUDA_ARCH__ >= 900 // caf\xe9\n#endif\n",
            "bad.py": "f(supported_major_versions=[9, 10]\n",
            "good.cu": "#if __CUDA_ARCH__ >= 900\n#endif\n",
        },
    )
    result = scan(root, SM120)
    assert [s["file"] for s in result.skipped] == ["bad.cu", "bad.py"]
    assert result.skipped[0]["reason"].startswith("not UTF-8")
    assert result.skipped[1]["reason"].startswith("not valid Python")
    assert [g["file"] for g in result.gates] == ["good.cu"]


def test_ignores_git_pycache_binary_and_unprefiltered_files(tmp_path):
    guard = "#if __CUDA_ARCH__ >= 900\n#endif\n"
    root = write(
        tmp_path / "t",
        {
            ".git/hooks/x.cu": guard,
            "pkg/__pycache__/x.py": "f(supported_major_versions=[9])\n",
            "blob.h": b"\0\0\0" + guard.encode(),
            "notes.txt": guard,
            "plain.py": "supported_major_versions = None\n",
            "kept.cuh": guard,
        },
    )
    result = scan(root, SM120)
    assert [g["file"] for g in result.gates] == ["kept.cuh"]
    assert result.skipped == []


def test_a_process_pool_gives_the_same_result(tmp_path):
    root = flashinfer(tmp_path, majors="[9, 10, 12]")
    serial, pooled = scan(root, SM120, jobs=1), scan(root, SM120, jobs=2)
    assert pooled.stats["jobs"] == 2
    assert to_json(serial) == to_json(pooled)


def test_the_arch_joins_a_universe_that_lacks_it(tmp_path):
    result = scan(flashinfer(tmp_path), Arch.parse("sm_120a"), universe=(Arch.parse("sm_90"),))
    guard = next(g for g in result.gates if g["file"] == HEADER)
    assert guard["admits"] == ["sm_90"] and guard["excludes_arch"] is True


# ---------------------------------------------------------------- output


def test_json_shape(tmp_path):
    out = to_json(scan(flashinfer(tmp_path, majors="[9, 10, 12]"), SM120))
    assert list(out) == ["gates", "skipped", "hazards"]
    json.dumps(out)  # plain data
    keys = {"file", "line", "kind", "text", "symbol", "admits", "unknown", "excludes_arch", "classification", "reason",
            "area"}
    for gate in out["gates"]:
        expected = keys | (
            {"widenable", "blockers"} if gate["excludes_arch"] and gate["kind"] == "cuda_guard" else set()
        )
        # Every excluding gate of this tree is in a file trtllm_comm compiles: its owner.
        expected |= {"owner"} if gate["excludes_arch"] else set()
        assert set(gate) == expected
        assert gate.get("owner") in (None, "trtllm_comm")
    assert {tuple(sorted(h)) for h in out["hazards"]} == {
        ("area", "file", "kind", "line", "message", "module", "potential"),
    }
    assert out["gates"][0] == {
        "file": "csrc/trtllm_alltoall.cu",
        "line": 1,
        "kind": "cuda_guard",
        "text": "__CUDA_ARCH__ >= 900",
        "symbol": "",
        "admits": ["sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"],
        "unknown": [],
        "excludes_arch": False,
        "classification": "admits",
        "reason": "",
        "area": "library",
    }


def test_unsupported_instruction_json_has_tokens(tmp_path):
    [hazard] = to_json(scan(_tcgen05_tree(tmp_path, None), SM120))["hazards"]
    assert set(hazard) == {"kind", "file", "line", "module", "potential", "message", "tokens", "area"}
    assert hazard["module"] is None


def test_sarif_validates_against_the_official_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    root = flashinfer(tmp_path, majors="[9, 10, 12]", extra={"csrc/tmem.cu": TCGEN05})
    sarif = to_sarif(scan(root, SM120))
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(sarif)
    [run] = sarif["runs"]
    assert run["tool"]["driver"]["name"] == "codemod"
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == [
        "gate-excludes-arch",
        "empty-kernel",
        "unsupported-instruction",
    ]
    by_rule = {}
    for res in run["results"]:
        by_rule.setdefault(res["ruleId"], []).append(res)
        location = res["locations"][0]["physicalLocation"]
        assert not location["artifactLocation"]["uri"].startswith("/")
        assert location["region"]["startLine"] >= 1
    assert [r["level"] for r in by_rule["empty-kernel"]] == ["error", "error"]
    assert [r["level"] for r in by_rule["unsupported-instruction"]] == ["warning"]
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in by_rule["empty-kernel"]} == {
        HEADER
    }


def test_sarif_uri_is_percent_encoded(tmp_path):
    root = write(tmp_path / "t", {"my dir/k.cu": "#if __CUDA_ARCH__ < 1200\n x();\n#endif\n"})
    [res] = to_sarif(scan(root, SM120))["runs"][0]["results"]
    assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "my%20dir/k.cu"


def test_text_report_lists_hazards_and_excluding_gates(tmp_path):
    text = to_text(scan(flashinfer(tmp_path, majors="[9, 10, 12]"), SM120))
    assert "2 hazards for sm_120: 2 definite, 0 potential" in text
    assert f"  {HEADER}:6: empty-kernel: trtllm_comm is built for sm_120" in text
    # issue 18: the bf16 fallback for older GPUs (`< 800`) is not widenable (sm_120 takes the implementation);
    # the allreduce guards that leave sm_120 nothing are, each with its function, owner and why.
    assert "include/flashinfer/utils.cuh:2" not in text
    assert (
        "  include/flashinfer/comm/trtllm_allreduce.cuh:6 in rms_norm_kernel [trtllm_comm]: cuda_guard (defined(__CUDA_ARCH__) && "
        "(__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))  (admits sm_90, sm_100, sm_103, sm_110)\n"
        "      no branch of this #if group gives sm_120 code" in text
    )
    assert "\nwidenable (2): sm_120 gets nothing here" in text
    verbose = to_text(scan(flashinfer(tmp_path, majors="[9, 10, 12]"), SM120), verbose=True)
    assert "include/flashinfer/utils.cuh:2 [trtllm_comm]: cuda_guard defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800" in verbose
    assert "the guard is a fallback for older archs (sm_70, sm_75)" in verbose


# ---------------------------------------------------------------- real FlashInfer 0.6.3


def _real_flashinfer(unpacked: Path, dest: Path) -> Path:
    """The parts of the FlashInfer wheel scan reads: the JIT specs and the sources they compile."""
    pkg = unpacked / "flashinfer"
    shutil.copytree(pkg / "jit", dest / "flashinfer" / "jit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(pkg / "compilation_context.py", dest / "flashinfer" / "compilation_context.py")
    for part in ("csrc", "include"):
        shutil.copytree(pkg / "data" / part, dest / "flashinfer" / "data" / part)
    return dest


def _patch(root: Path, *, guards: bool) -> list[int]:
    """Widen trtllm_comm's JIT gate (and the header guards); return the old guards' lines."""
    comm = root / "flashinfer/jit/comm.py"
    text = comm.read_text()
    assert text.count("supported_major_versions=[9, 10]\n") == 1
    comm.write_text(text.replace("supported_major_versions=[9, 10]\n", "supported_major_versions=[9, 10, 12]\n"))
    header = root / "flashinfer/data" / HEADER
    lines = header.read_text().splitlines(keepends=True)
    old = [n for n, line in enumerate(lines, 1) if line.rstrip("\n") == OLD_GUARD]
    if guards:
        header.write_text("".join(NEW_GUARD + "\n" if line.rstrip("\n") == OLD_GUARD else line for line in lines))
    return old


@pytest.mark.real
def test_real_partial_patch_names_the_13_guards(real_unpacked, tmp_path):
    root = _real_flashinfer(real_unpacked["flashinfer"], tmp_path / "fi")
    old = _patch(root, guards=False)
    assert len(old) == 13
    result = scan(root, SM120)
    comm = [h for h in result.hazards if h["module"] == "trtllm_comm"]
    assert {h["kind"] for h in comm} == {"empty-kernel"}
    assert [(h["file"], h["line"]) for h in comm] == [(f"flashinfer/data/{HEADER}", n) for n in old]
    assert all(not h["potential"] for h in comm)
    assert [h for h in result.hazards if h["kind"] == "empty-kernel"] == comm
    assert check(result) is True


@pytest.mark.real
def test_real_full_patch_and_unpatched_have_no_trtllm_comm_hazard(real_unpacked, tmp_path):
    root = _real_flashinfer(real_unpacked["flashinfer"], tmp_path / "fi")
    unpatched = scan(root, SM120)
    assert [h for h in unpatched.hazards if h["module"] == "trtllm_comm"] == []
    _patch(root, guards=True)
    patched = scan(root, SM120)
    assert [h for h in patched.hazards if h["module"] == "trtllm_comm"] == []
    assert check(patched) is False and check(unpatched) is False
    guards = [g for g in patched.gates if g["file"] == f"flashinfer/data/{HEADER}" and "900" in g["text"]]
    assert len(guards) == 13 and not any(g["excludes_arch"] for g in guards)


@pytest.mark.real
@pytest.mark.parametrize("project", ["flashinfer", "sglang"])
def test_real_whole_wheel(real_unpacked, project, capsys):
    root = real_unpacked[project]
    started = time.perf_counter()
    result = scan(root, SM120)
    seconds = time.perf_counter() - started
    kinds: dict[str, int] = {}
    for gate in result.gates:
        kinds[gate["kind"]] = kinds.get(gate["kind"], 0) + 1
    hazards = {}
    for hazard in result.hazards:
        key = f"{hazard['kind']}{' (potential)' if hazard['potential'] else ''}"
        hazards[key] = hazards.get(key, 0) + 1
    excluding = [g for g in result.gates if g["excludes_arch"]]
    blocked = [g for g in excluding if g.get("widenable") is False]
    with capsys.disabled():
        print(
            f"\n{project}: {seconds:.1f}s ({result.stats['jobs']} jobs), {result.stats['files']} files walked, "
            f"{result.stats['parsed']} parsed; gates {kinds}; {len(excluding)} exclude sm_120 "
            f"({len(blocked)} not widenable); {len(result.modules)} JIT specs; hazards {hazards}; "
            f"{len(result.skipped)} skipped"
        )
    assert result.gates
    assert check(result) is False  # the released wheels are consistent
    if project == "flashinfer":
        assert result.layout == "wheel" and len(result.modules) > 50
        assert re.search(r"\d+ gates in \d+ files", to_text(result))


def test_includes_never_leave_the_tree(tmp_path):
    outside = write(tmp_path / "outside", {"evil.cuh": OLD_GUARD + "\n  body();\n#endif\n"})
    root = flashinfer(tmp_path, majors="[9, 10, 12]", guard=NEW_GUARD)
    (root / "csrc/trtllm_allreduce.cu").write_text(
        f'#include "{outside}/evil.cuh"\n#include "../../outside/evil.cuh"\n#include "flashinfer/comm/link.cuh"\n'
    )
    (root / "include/flashinfer/comm/link.cuh").symlink_to(outside / "evil.cuh")
    result = scan(root, SM120)
    assert result.hazards == []
    assert next(m for m in result.modules if m["module"] == "trtllm_comm")["closure"] == 1


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("flags(supported_major_versions=[9, 10])\n", id="list"),
        pytest.param("flags(supported_major_versions = (9,))\n", id="tuple"),
        pytest.param("x = _is_sm90_supported or _is_sm100_supported\n", id="names"),
        pytest.param("x = (\n    is_sm90_supported()\n    or is_sm100_supported()\n)\n", id="calls-over-lines"),
        pytest.param("x = is_sm100a_supported(torch.device('cuda')) or is_sm120a_supported(d)\n", id="nested-call"),
        pytest.param("x = get_platform().is_sm90 or get_platform().is_sm100\n", id="attributes"),
        pytest.param("x = ((is_sm90_supported()) or is_sm100_supported())\n", id="parenthesized-operand"),
    ],
)
def test_python_prefilters_let_every_gate_through(tmp_path, source):
    from codemods.audit.prefilter import PYTHON_PREFILTERS as _PYTHON_PREFILTERS

    found = [kind for kind, prefilter in _PYTHON_PREFILTERS if kind.find(source.encode())]
    assert found and all(prefilter.search(source.encode()) for kind, prefilter in _PYTHON_PREFILTERS if kind in found)
    assert [g["kind"] for g in scan(write(tmp_path / "t", {"m.py": source}), SM120).gates] == [found[0].KIND]


def test_scan_lists_capability_pairs_a_class_attribute_holds(tmp_path):
    source = (
        "class _BlockSparseResolver(_CudaResolver):\n"
        "    supported_capabilities = {(9, 0), (10, 0)}\n\n"
        "    @classmethod\n"
        "    def resolve(cls, platform):\n"
        "        cap = platform.get_device_capability()\n"
        "        if (cap.major, cap.minor) not in cls.supported_capabilities:\n"
        "            raise ValueError(cap)\n"
    )
    result = scan(write(tmp_path / "t", {"platforms/cuda.py": source, "shapes.py": "KERNEL_SIZES = ((3, 3), (3, 1))\n"}), SM120)
    assert [(g["file"], g["line"], g["kind"], g["text"], g["admits"]) for g in result.gates] == [
        ("platforms/cuda.py", 2, "python_arch_list", "{(9, 0), (10, 0)}", ["sm_90", "sm_100"])
    ]
