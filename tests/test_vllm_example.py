"""examples/vllm, a small checkout in vLLM's shapes: sm120-enable beside examples/flashinfer (run, status, revert,
bytes), the half-patch refusal without FlashInfer, and `scan --arch sm_120` finding the tables, the platform
predicate gates and the CMake arch lists."""

from __future__ import annotations

import json

from conftest import git, tree_digest

FUSION = "vllm/compilation/passes/fusion/allreduce_rms_fusion.py"
CONFIG = "vllm/config/vllm.py"

ENABLE_AFTER = '''    return (
        tensor_parallel_size > 1
        and current_platform.is_cuda()
        and has_flashinfer()
        and (
            current_platform.is_device_capability_family(100)
            or current_platform.is_device_capability(90)
            or current_platform.is_device_capability_family(120)
        )
    )
'''

ROWS_AFTER = '''    103: {
        2: 64,  # 64MB
        4: 64,  # 64MB
        8: 2,  # 2MB
    },
    120: {
        2: 64,  # 64MB
        4: 32,  # 32MB
        8: 1,  # 1MB
    },
    121: {
        2: 64,  # 64MB
        4: 32,  # 32MB
        8: 1,  # 1MB
    },
}
'''


def test_sm120_enable_on_the_vllm_and_flashinfer_examples(cli, example_repo):
    vllm, flashinfer = example_repo("vllm"), example_repo("flashinfer")
    before = tree_digest(vllm)
    dry = cli("run", "sm120-enable", "--repo", vllm, "--repo", flashinfer, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "FI_ALLREDUCE_FUSION_MAX_SIZE_MB: row(s) 120, 121 copied from row 100, not measured" in dry.output
    assert tree_digest(vllm) == before

    result = cli("run", "sm120-enable", "--repo", vllm, "--repo", flashinfer)
    assert result.exit_code == 0, result.output
    assert git(vllm, "diff", "--name-only", "main", "HEAD").split() == [FUSION, CONFIG]
    assert ENABLE_AFTER in (vllm / CONFIG).read_text()
    fusion = (vllm / FUSION).read_text()
    assert ROWS_AFTER in fusion and fusion.count("    120: {") == 2
    trailers = git(vllm, "log", "--format=%(trailers:key=Codemod-Change,valueonly)", "main..HEAD").split()
    assert set(trailers) == {"vllm.allreduce-fusion-max-size", "vllm.allreduce-fusion-one-shot-size", "vllm.allreduce-fusion-auto-enable"}

    status = cli("status", "--repo", vllm)
    assert status.exit_code == 0 and "vllm.allreduce-fusion-auto-enable" in status.output, status.output
    back = cli("revert", "sm120-enable", "--repo", vllm, "--repo", flashinfer)
    assert back.exit_code == 0, back.output
    assert tree_digest(vllm) == before


def test_vllm_alone_is_refused_as_a_half_patch(cli, example_repo):
    vllm = example_repo("vllm")
    before = tree_digest(vllm)
    result = cli("run", "sm120-enable", "--repo", vllm)
    assert result.exit_code == 3, result.output
    assert "needs flashinfer.trtllm-comm-jit, which is in flashinfer, a project this run does not touch" in result.stderr
    assert tree_digest(vllm) == before and git(vllm, "branch", "--show-current").strip() == "main"
    forced = cli("run", "sm120-enable", "--repo", vllm, "--force")
    assert forced.exit_code == 0, forced.output
    assert "half-patch applied with --force" in forced.stderr


def test_scan_finds_the_tables_the_predicate_gates_and_the_cmake_lists(cli, example_repo):
    vllm = example_repo("vllm")
    result = cli("scan", "--repo", vllm, "--arch", "sm_120", "--format", "json")
    assert result.exit_code == 0, result.output
    gates = json.loads(result.stdout)["gates"]
    excluding = {(g["file"], g["kind"], g["symbol"]) for g in gates if g["excludes_arch"]}
    assert excluding == {
        (FUSION, "python_arch_map", "FI_ALLREDUCE_FUSION_MAX_SIZE_MB"),
        (FUSION, "python_arch_map", "_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB"),
        (CONFIG, "python_arch_call", "enable_allreduce_rms_fusion"),
        ("tests/compile/test_fusion_all_reduce.py", "python_arch_call", "test_all_reduce_fusion_nvfp4_quant"),
        ("CMakeLists.txt", "cmake_arch_list", "SCALED_MM_ARCHS"),
    }
    # has_device_capability(90/100) admit sm_120 by vLLM's own `>=`; FP4_ARCHS and MARLIN_ARCHS list 12.0
    admitting = {(g["file"], g["line"]) for g in gates if g["excludes_arch"] is False}
    assert (FUSION, 52) in admitting and ("tests/compile/test_fusion_all_reduce.py", 16) in admitting
    assert {g["symbol"] for g in gates if g["kind"] == "cmake_arch_list"} >= {"SCALED_MM_ARCHS", "MARLIN_ARCHS", "FP4_ARCHS"}
