"""`codemod verify --build` on a plain clone of FlashInfer 0.6.3, no --include (issue 32, item 5).

The clone is real: the 0.6.3 wheel's files in the upstream checkout layout
(build_backend.py and version.txt included), committed with 3rdparty/cutlass
and 3rdparty/spdlog as gitlinks, cloned without `--recurse-submodules`, so
both folders are empty. The build takes CUTLASS 4.2.1 and spdlog 1.14.1 from
flashinfer-python 0.6.3's wheel, downloaded from PyPI into codemod's cache by
the first test and taken from there by the second. trtllm_comm on sm_90 and
sm_120 only (minutes cold); the PTX cache is the session's (tests/test_build_proof_real.py builds the
same sources).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import flashinfer_checkout, plain_clone

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA 13) is installed here and in CI"),
]

ARCHS = ("--arch", "sm_120", "--archs", "sm_90,sm_120")
WHEEL = "flashinfer_python-0.6.3-py3-none-any.whl"


@pytest.fixture(scope="module")
def homes(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("homes")


@pytest.fixture
def clone(real_unpacked, tmp_path, homes, ptx_cache, monkeypatch) -> Path:
    monkeypatch.setenv("CODEMOD_HOME", str(homes / "codemod"))
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(ptx_cache))
    wheel = real_unpacked["flashinfer"]
    tree = flashinfer_checkout(wheel, tmp_path / "tree")
    shutil.copy(wheel / "build_backend.py", tree / "build_backend.py")
    (tree / "version.txt").write_text("0.6.3\n")
    clone = plain_clone(tmp_path / "git", tree, {"3rdparty/cutlass": None, "3rdparty/spdlog": None})
    assert not any((clone / "3rdparty/cutlass").iterdir())
    return clone


def test_run_then_build_passes_with_the_release_headers_downloaded_from_pypi(cli, clone, homes):
    assert cli("run", "sm120-enable", "--repo", clone).exit_code == 0
    result = cli("verify", "--build", "--repo", clone, *ARCHS, "--format", "json")

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    cached = homes / "codemod" / "third-party" / "flashinfer-python-0.6.3" / "flashinfer" / "data"
    assert data["headers"] == {
        "source": "downloaded", "wheel": WHEEL, "installed": None, "versions": "CUTLASS 4.2.1, spdlog 1.14.1",
        "folders": [str(cached / "cutlass/include"), str(cached / "cutlass/tools/util/include"), str(cached / "spdlog/include")],
    }  # fmt: skip
    (module,) = data["modules"]
    assert module["module"] == "trtllm_comm" and module["ok"] and module["empty"] == {}
    lamport = [k for k in module["kernels"] if "lamport_style_one_shot_all_reduce_norm_kernel" in k["kernel"]]
    assert lamport and all(not k["empty"] and k["opcodes"].get("griddepcontrol.wait") for k in lamport)
    assert not any((clone / "3rdparty/cutlass").iterdir()) and not any((clone / "3rdparty/spdlog").iterdir())


def test_the_jit_gate_widened_alone_still_fails_with_them(cli, clone):
    forced = cli("run", "sm120-enable", "--repo", clone, "--only", "flashinfer.trtllm-comm-jit", "--force")
    assert forced.exit_code == 0, forced.output
    result = cli("verify", "--build", "--repo", clone, *ARCHS)

    assert result.exit_code == 1, result.output
    assert f"third-party headers from {WHEEL}, downloaded from PyPI into codemod's cache (CUTLASS 4.2.1, spdlog 1.14.1)" in result.stdout
    assert "FAIL trtllm_comm: sm_120: 480 kernel(s) compile empty (`ret;` only) but have a body on sm_90" in result.stdout
    assert "lamport_style_one_shot_all_reduce_norm_kernel<" in result.stdout
