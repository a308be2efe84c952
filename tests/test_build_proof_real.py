"""`codemod verify --build` on FlashInfer 0.6.3 (the issue's "done when"), trtllm_comm on sm_90 and sm_120 only.

The checkout layout is built from the wheel: include/ and csrc/ copied, the
bundled data/cutlass and data/spdlog linked as 3rdparty/cutlass and
3rdparty/spdlog, build_backend.py at the top (it says where flashinfer/data
links to), committed as one release. These compile real sources (minutes
cold); the PTX cache is shared by the tests of this file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import flashinfer_checkout, init_repo

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA 13) is installed here and in CI"),
]

ARCHS = ("--arch", "sm_120", "--archs", "sm_90,sm_120")
COMM = "flashinfer/jit/comm.py"
HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"


@pytest.fixture(scope="module")
def build_cache(ptx_cache) -> Path:
    return ptx_cache


@pytest.fixture
def checkout(real_unpacked, tmp_path, build_cache, monkeypatch) -> Path:
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(build_cache))
    return init_repo(flashinfer_checkout(real_unpacked["flashinfer"], tmp_path / "flashinfer", third_party=True))


def widen_comm_by_hand(root: Path) -> None:
    path = root / COMM
    text = path.read_text()
    assert text.count("supported_major_versions=[9, 10]\n    )\n    return gen_jit_spec(\n        \"trtllm_comm\"") == 1
    path.write_text(text.replace(
        "supported_major_versions=[9, 10]\n    )\n    return gen_jit_spec(\n        \"trtllm_comm\"",
        "supported_major_versions=[9, 10, 12]\n    )\n    return gen_jit_spec(\n        \"trtllm_comm\"",
    ))


def test_comm_py_widened_by_hand_fails_naming_the_lamport_kernels(cli, checkout):
    widen_comm_by_hand(checkout)
    result = cli("verify", "--build", "--repo", checkout, *ARCHS, "--format", "json")

    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    (module,) = data["modules"]
    assert module["module"] == "trtllm_comm"
    empty = module["empty"]["sm_120"]
    names = {k["name"] for k in empty}
    assert any(n.startswith("lamport_style_one_shot_all_reduce_norm_kernel<") for n in names)
    assert len(empty) >= 400, "0.6.3's trtllm_allreduce.cu builds 480 of its kernels empty on sm_120a"
    sm120 = next(a for a in module["archs"] if a["arch"] == "sm_120")
    assert sm120["base"]["built"] is False and sm120["work"]["built"] is True
    allreduce = next(s for s in sm120["work"]["sources"] if s["source"] == "csrc/trtllm_allreduce.cu")
    assert (allreduce["kernels"], allreduce["empty"], allreduce["griddepcontrol.wait"]) == (921, 480, 0), "the issue's figures"


def test_after_run_sm120_enable_it_passes_with_griddepcontrol_and_sm_90_equal_to_the_base(cli, checkout):
    assert cli("run", "sm120-enable", "--repo", checkout).exit_code == 0
    result = cli("verify", "--build", "--repo", checkout, *ARCHS, "--format", "json")

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["base_label"] == "recipe sm120-enable"
    (module,) = data["modules"]
    assert module["ok"] and module["empty"] == {} and module["missing"] == {}
    assert {p["instruction"] for p in module["promised"]} == {"griddepcontrol.wait", "griddepcontrol.launch_dependents"}
    lamport = [k for k in module["kernels"] if "lamport_style_one_shot_all_reduce_norm_kernel" in k["kernel"]]
    assert lamport and all(not k["empty"] and k["opcodes"].get("griddepcontrol.wait") for k in lamport)
    sm90 = next(a for a in module["archs"] if a["arch"] == "sm_90")
    assert sm90["same_as_base"] is True


def test_a_tampered_guard_that_changes_sm_90_code_fails(cli, checkout):
    assert cli("run", "sm120-enable", "--repo", checkout).exit_code == 0
    header = checkout / HEADER
    text = header.read_text()
    widened = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))"
    assert widened in text
    header.write_text(text.replace(widened, "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1000))", 1))
    result = cli("verify", "--build", "--repo", checkout, *ARCHS)

    assert result.exit_code == 1, result.output
    assert "FAIL trtllm_comm: sm_90: PTX differs from the base" in result.stdout
