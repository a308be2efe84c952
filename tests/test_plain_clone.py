"""A new user's first hour: a plain `git clone` of FlashInfer 0.6.3, submodules not initialised.

The clone is real: the wheel's files rearranged as the upstream checkout,
committed with `3rdparty/cutlass` and `3rdparty/spdlog` as gitlinks to local
repositories, pushed to a bare repository and cloned without
`--recurse-submodules`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import git, plain_clone, tree_digest

pytestmark = pytest.mark.real

JIT = "flashinfer.trtllm-comm-jit"
NEW_GUARD = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))"


def _checkout_tree(unpacked: Path, dest: Path) -> Path:
    pkg = unpacked / "flashinfer"
    shutil.copytree(
        pkg, dest / "flashinfer",
        ignore=lambda d, n: [x for x in n if x == "__pycache__" or (Path(d) == pkg and x == "data")],
    )
    shutil.copytree(pkg / "data" / "include", dest / "include")
    shutil.copytree(pkg / "data" / "csrc", dest / "csrc")
    return dest


@pytest.fixture
def clone(real_unpacked, tmp_path) -> Path:
    tree = _checkout_tree(real_unpacked["flashinfer"], tmp_path / "tree")
    return plain_clone(tmp_path / "git", tree, {"3rdparty/cutlass": None, "3rdparty/spdlog": None})


def test_scan_lists_the_uninitialised_submodules(cli, clone):
    result = cli("scan", "--repo", clone, "--arch", "sm_120", "--format", "json")
    assert result.exit_code in (0, 1), result.output
    assert "internal error" not in result.output
    data = json.loads(result.stdout)
    skipped = json.dumps(data.get("skipped", data))
    assert "3rdparty/cutlass" in skipped and "3rdparty/spdlog" in skipped
    assert "git submodule update --init" in skipped


def test_run_verify_revert_on_a_plain_clone(cli, clone):
    before = tree_digest(clone)
    run = cli("run", "sm120-enable", "--repo", clone)
    assert run.exit_code == 0, run.output
    header = (clone / "include/flashinfer/comm/trtllm_allreduce.cuh").read_text()
    assert header.count(NEW_GUARD) == 13
    verify = cli("verify", "--repo", clone)
    assert verify.exit_code == 0, verify.output
    assert "stand-in" in verify.output and verify.output.count("submodule update --init") == 1
    revert = cli("revert", "sm120-enable", "--repo", clone)
    assert revert.exit_code == 0, revert.output
    assert tree_digest(clone) == before
    assert git(clone, "branch", "--show-current").strip() == "main"


def test_half_patch_refused_then_rejected_by_verify_when_forced(cli, clone):
    before = tree_digest(clone)
    refused = cli("run", "sm120-enable", "--repo", clone, "--only", JIT)
    assert refused.exit_code == 3, refused.output
    assert tree_digest(clone) == before
    forced = cli("run", "sm120-enable", "--repo", clone, "--only", JIT, "--force")
    assert forced.exit_code == 0, forced.output
    verify = cli("verify", "--repo", clone)
    assert verify.exit_code != 0, verify.output
    assert "trtllm_comm" in verify.output and "trtllm_allreduce.cuh" in verify.output
