"""`codemod verify` through the CLI: nvcc -E per arch, base vs work tree."""

from __future__ import annotations

import json
import shutil

import pytest


pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA 13) is installed here and in CI")

HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"


def test_verify_after_recipe(cli, example_repo):
    repo = example_repo("flashinfer")
    assert cli("run", "sm120-enable", "--repo", repo).exit_code == 0
    result = cli("verify", "--repo", repo, "--archs", "sm_80,sm_90,sm_100,sm_120", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] and data["method"] == "nvcc" and data["files"] == [HEADER]
    by_arch = {a["arch"]: a for a in data["archs"]}
    assert [by_arch[a]["status"] for a in ("sm_80", "sm_90", "sm_100")] == ["identical"] * 3
    gained = by_arch["sm_120"]["gained"]
    assert len(gained) == 4 and by_arch["sm_120"]["expected"] == 4
    assert {g["text"].strip() for g in gained} == {"cudaGridDependencySynchronize();", "cudaTriggerProgrammaticLaunchCompletion();"}
    assert "sm_121" not in by_arch, "--archs sets the columns"


def test_verify_catches_a_change_to_other_archs(cli, example_repo):
    repo = example_repo("flashinfer")
    assert cli("run", "sm120-enable", "--repo", repo).exit_code == 0
    text = (repo / HEADER).read_text()
    (repo / HEADER).write_text(text.replace("  __threadfence_system();\n", "  __threadfence_system();\n  __threadfence();\n"))
    result = cli("verify", "--repo", repo, "--archs", "sm_80,sm_90,sm_120")
    assert result.exit_code == 0, "an edit in the #else of `>= 700` is compiled by no arch here"
    broken = text.replace("    out[idx] = in[idx];\n", "    out[idx] = in[idx] * 2;\n")
    (repo / HEADER).write_text(broken)
    result = cli("verify", "--repo", repo, "--archs", "sm_80,sm_90,sm_120")
    assert result.exit_code == 1 and "FAIL sm_80" in result.stdout and "FAIL sm_90" in result.stdout


def test_verify_with_base_and_arch(cli, example_repo):
    repo = example_repo("flashinfer")
    text = (repo / HEADER).read_text()
    old = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"
    (repo / HEADER).write_text(text.replace(old, "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))", 1))
    result = cli("verify", "--repo", repo, "--base", "main", "--arch", "12.0", "--archs", "sm_90,sm_120")
    assert result.exit_code == 0, result.output
    assert "sm_120   changed (target: expected 1 region(s), gained 1, lost 0)" in result.stdout


def test_verify_without_recipe_or_base(cli, example_repo):
    repo = example_repo("flashinfer")
    result = cli("verify", "--repo", repo)
    assert result.exit_code == 5 and "no applied recipe to verify" in result.stderr


@pytest.mark.real
def test_verify_real_flashinfer(cli, real_unpacked, tmp_path):
    from test_real_releases import flashinfer_tree

    repo = tmp_path / "fi"
    repo.mkdir()
    paths = flashinfer_tree(real_unpacked["flashinfer"], repo, "wheel")
    assert cli("run", "sm120-enable", "--repo", repo).exit_code == 0
    result = cli("verify", "--repo", repo, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    by_arch = {a["arch"]: a for a in data["archs"]}
    for arch in ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103", "sm_110"):
        assert by_arch[arch]["status"] == "identical", arch
    for arch in ("sm_120", "sm_121"):
        assert by_arch[arch]["expected"] == 13 and len(by_arch[arch]["gained"]) == 13 and not by_arch[arch]["lost"]
    bodies = " ".join(g["text"] for g in by_arch["sm_120"]["gained"])
    assert "cudaGridDependencySynchronize" in bodies and "cudaTriggerProgrammaticLaunchCompletion" in bodies
    print(f"verify on FlashInfer 0.6.3, 9 archs: {data['seconds']} s ({data['preprocessed']} nvcc runs)")
    assert paths["header"] in data["files"]


def test_verify_of_a_change_without_cuda_files_says_there_was_nothing_to_prove(cli, example_repo):
    import jsonschema

    repo = example_repo("sglang")
    assert cli("run", "sm120-enable", "--repo", repo).exit_code == 0
    result = cli("verify", "--repo", repo)
    assert result.exit_code == 15, result.output
    assert "verified" not in result.stdout and "byte-identical" not in result.stdout
    assert result.stdout.splitlines()[-1].startswith("nothing to prove: no CUDA file changed since the base")
    data = json.loads(cli("verify", "--repo", repo, "--format", "json").stdout)
    assert (data["status"], data["ok"], data["files"]) == ("nothing-to-prove", False, [])
    jsonschema.validate(data, json.loads(cli("schema", "verify").stdout))


def test_verify_build_of_sglang_says_what_is_true(cli, example_repo, tmp_path):
    repo = example_repo("sglang")
    result = cli("verify", "--build", "--repo", repo, "--arch", "sm_120")
    assert result.exit_code == 15, result.output
    assert "point --repo at a FlashInfer or SGLang" not in result.stderr
    assert result.stderr.startswith(f"error[nothing-to-prove]: {repo}: SGLang has no CUDA kernels for verify --build to compile")
    (tmp_path / "empty").mkdir()
    elsewhere = cli("verify", "--build", "--repo", tmp_path / "empty", "--arch", "sm_120")
    assert elsewhere.exit_code == 6, "a folder that is no project at all is still not recognised"
