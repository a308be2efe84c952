"""`codemod verify --build --package flashinfer` on the installed FlashInfer 0.6.3 wheel, trtllm_comm on sm_90 and sm_120.

The site-packages folder is the real wheel unpacked (flashinfer/ with its
data/include, data/csrc, data/cutlass and data/spdlog, and the dist-info),
found through --package with --python, as a user's environment is. The base
of a run is the pristine copy in codemod's shadow repository; a package
edited by hand has no record and no base, and builds the work tree alone.
These compile real sources (minutes cold); the PTX cache is shared by the
tests of this file.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from conftest import tree_digest

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA 13) is installed here and in CI"),
]

ARCHS = ("--arch", "sm_120", "--archs", "sm_90,sm_120", "--jobs", "2")
COMM = "flashinfer/jit/comm.py"
HEADER = "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"
TRTLLM_COMM = 'supported_major_versions=[9, 10]\n    )\n    return gen_jit_spec(\n        "trtllm_comm"'


@pytest.fixture(scope="module")
def build_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("build-cache")


@pytest.fixture
def site(real_unpacked, tmp_path, build_cache, monkeypatch) -> Path:
    """site-packages holding FlashInfer 0.6.3 as pip installs the wheel."""
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(build_cache))
    site = tmp_path / "site-packages"
    shutil.copytree(real_unpacked["flashinfer"], site, ignore=shutil.ignore_patterns(".complete"))
    assert (site / "flashinfer_python-0.6.3.dist-info" / "RECORD").is_file()
    monkeypatch.setenv("PYTHONPATH", str(site))
    return site


PACKAGE = ("--package", "flashinfer", "--python", sys.executable)


def test_comm_py_widened_by_hand_fails_naming_the_lamport_kernels(cli, site, isolated_homes):
    path = site / COMM
    text = path.read_text()
    assert text.count(TRTLLM_COMM) == 1
    path.write_text(text.replace(TRTLLM_COMM, TRTLLM_COMM.replace("[9, 10]", "[9, 10, 12]")))
    edited = tree_digest(site)

    unnamed = cli("verify", "--build", *PACKAGE, *ARCHS)
    assert unnamed.exit_code == 2, unnamed.output
    assert "no JIT module to build: there is no base to find changed modules from" in unnamed.stderr
    assert "--module trtllm_comm" in unnamed.stderr

    result = cli("verify", "--build", *PACKAGE, *ARCHS, "--module", "trtllm_comm", "--format", "json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["root"] == str(site / "flashinfer") and data["base"] is None
    assert data["base_label"] == "none (no codemod record: the work tree alone)"
    (module,) = data["modules"]
    assert module["module"] == "trtllm_comm" and module["spec"] == "jit/comm.py:gen_trtllm_comm_module"
    empty = module["empty"]["sm_120"]
    assert any(k["name"].startswith("lamport_style_one_shot_all_reduce_norm_kernel<") for k in empty)
    assert len(empty) == 480 and {k["source"] for k in empty} == {"data/csrc/trtllm_allreduce.cu"}
    sm120 = next(a for a in module["archs"] if a["arch"] == "sm_120")
    assert "base" not in sm120 and sm120["work"]["built"] is True
    allreduce = next(s for s in sm120["work"]["sources"] if s["source"] == "data/csrc/trtllm_allreduce.cu")
    assert (allreduce["kernels"], allreduce["empty"], allreduce["griddepcontrol.wait"]) == (921, 480, 0), "the issue's figures"

    text = cli("verify", "--build", *PACKAGE, *ARCHS, "--module", "trtllm_comm")
    assert text.exit_code == 1, text.output
    assert text.stdout.startswith(f"build proof of {site / 'flashinfer'}: base none (no codemod record: the work tree alone)\n")
    assert "    lamport_style_one_shot_all_reduce_norm_kernel<1, float, 2, true, true, true>  [data/csrc/trtllm_allreduce.cu]\n" in text.stdout
    assert "FAIL trtllm_comm: sm_120: 480 kernel(s) compile empty (`ret;` only) but have a body on sm_90\n" in text.stdout
    assert "0 compiled, 6 from cache" in text.stdout
    assert tree_digest(site) == edited and not list(site.rglob(".git")), "verify writes nothing into the package"
    assert not (isolated_homes / "codemod" / "shadow").exists(), "verify keeps no record of a package codemod never ran on"


def test_after_run_sm120_enable_it_passes_with_griddepcontrol_and_sm_90_equal_to_the_shadow_copy(cli, site):
    run = cli("run", "sm120-enable", *PACKAGE)
    assert run.exit_code == 0, run.output
    assert b"supported_major_versions=[9, 10, 12]" in (site / COMM).read_bytes()
    result = cli("verify", "--build", *PACKAGE, *ARCHS, "--format", "json")

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["base_label"] == "recipe sm120-enable" and data["base"]
    (module,) = data["modules"]
    assert module["ok"] and module["empty"] == {} and module["missing"] == {}
    assert {p["instruction"] for p in module["promised"]} == {"griddepcontrol.wait", "griddepcontrol.launch_dependents"}
    assert {p["file"] for p in module["promised"]} == {"data/include/flashinfer/comm/trtllm_allreduce.cuh"}
    lamport = [k for k in module["kernels"] if "lamport_style_one_shot_all_reduce_norm_kernel" in k["kernel"]]
    assert lamport and all(not k["empty"] and k["opcodes"].get("griddepcontrol.wait") for k in lamport)
    archs = {a["arch"]: a for a in module["archs"]}
    # the base is the pristine copy: 0.6.3's comm.py refuses sm_120, its header builds sm_90
    assert archs["sm_120"]["base"] == {
        "built": False, "reason": "No supported CUDA architectures found for major versions [9, 10].", "gencode": None, "sources": [],
    }
    assert archs["sm_90"]["base"]["built"] and archs["sm_90"]["same_as_base"] is True
    assert not list(site.rglob(".git"))


def test_a_tampered_guard_that_changes_sm_90_code_fails(cli, site):
    assert cli("run", "sm120-enable", *PACKAGE).exit_code == 0
    header = site / HEADER
    text = header.read_text()
    widened = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))"
    assert widened in text
    header.write_text(text.replace(widened, "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1000))", 1))
    result = cli("verify", "--build", *PACKAGE, *ARCHS)

    assert result.exit_code == 1, result.output
    assert "FAIL trtllm_comm: sm_90: PTX differs from the base" in result.stdout
    assert "  differs from the base on sm_90 (" in result.stdout
