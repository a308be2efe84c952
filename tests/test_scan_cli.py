"""`codemod scan` and blockers through the CLI, on the example trees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import git

COMM = "flashinfer/jit/comm.py"
HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"
SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"


def partial_patch(repo):
    """Widen only the JIT gate, as the upstream PR warns against."""
    text = (repo / COMM).read_text()
    head, tail = text.split("def gen_trtllm_comm_module")
    (repo / COMM).write_text(head + "def gen_trtllm_comm_module" + tail.replace("[9, 10]", "[9, 10, 12]", 1))


def test_check_catches_partial_patch_and_passes_after_recipe(cli, example_repo):
    repo = example_repo("flashinfer")
    clean = cli("scan", "--repo", repo, "--arch", "sm_120", "--check")
    assert clean.exit_code == 0, clean.output
    partial_patch(repo)
    caught = cli("scan", "--repo", repo, "--arch", "sm_120", "--check", "--format", "json")
    assert caught.exit_code == 1
    hazards = json.loads(caught.stdout)["hazards"]
    assert {h["kind"] for h in hazards} == {"empty-kernel"}
    assert {h["module"] for h in hazards} == {"trtllm_comm"}
    assert sorted(h["line"] for h in hazards) == [23, 29, 39, 45] and {h["file"] for h in hazards} == {HEADER}
    git(repo, "checkout", "-q", "--", COMM)
    assert cli("run", "sm120-enable", "--repo", repo).exit_code == 0
    fixed = cli("scan", "--repo", repo, "--arch", "sm_120", "--check", "--format", "json")
    assert fixed.exit_code == 0, fixed.output
    assert json.loads(fixed.stdout)["hazards"] == []


def test_json_shape(cli, example_repo):
    repo = example_repo("flashinfer")
    data = json.loads(cli("scan", "--repo", repo, "--format", "json").stdout)
    assert set(data) == {"schema_version", "gates", "skipped", "hazards"}
    gate = next(g for g in data["gates"] if g["kind"] == "cuda_guard" and g["excludes_arch"])
    assert {"file", "line", "kind", "text", "admits", "unknown", "excludes_arch", "widenable", "blockers"} <= set(gate)
    assert gate["admits"] == ["sm_90", "sm_100", "sm_103", "sm_110"] and gate["widenable"] is True


def test_sarif_validates(cli, example_repo):
    jsonschema = pytest.importorskip("jsonschema")
    repo = example_repo("flashinfer")
    partial_patch(repo)
    sarif = json.loads(cli("scan", "--repo", repo, "--format", "sarif").stdout)
    jsonschema.validate(sarif, json.loads(SCHEMA.read_text()))
    rules = {r["ruleId"] for r in sarif["runs"][0]["results"]}
    assert {"empty-kernel", "gate-excludes-arch"} <= rules


TCGEN05 = """\
#pragma once
__device__ void alloc_tmem(unsigned* dst) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000 && __CUDA_ARCH__ < 1200
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(dst));
#endif
}
"""

RECIPE = """\
id = "tmem-enable"
summary = "widen a TMEM guard (must be refused on sm_120)"
arch = "sm_120"

[[change]]
id = "flashinfer.tmem"
project = "flashinfer"
file = "{include}/flashinfer/tmem.cuh"
kind = "cuda_guard"
"""


def test_guard_around_tcgen05_is_not_widenable_and_run_refuses(cli, example_repo, tmp_path):
    repo = example_repo("flashinfer")
    (repo / "include/flashinfer/tmem.cuh").write_text(TCGEN05)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "tmem")
    data = json.loads(cli("scan", "--repo", repo, "--format", "json").stdout)
    gate = next(g for g in data["gates"] if g["file"] == "include/flashinfer/tmem.cuh")
    assert gate["widenable"] is False and any("tcgen05" in b for b in gate["blockers"])

    recipe = tmp_path / "tmem-enable.toml"
    recipe.write_text(RECIPE)
    refused = cli("run", recipe, "--repo", repo)
    assert refused.exit_code == 3
    assert "not widenable" in refused.stderr and "tcgen05" in refused.stderr and "--force" in refused.stderr
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]

    forced = cli("run", recipe, "--repo", repo, "--force")
    assert forced.exit_code == 0, forced.output
    message = git(repo, "log", "-1", "--format=%B")
    assert "Widened with --force despite these blockers:" in message and "tcgen05" in message
