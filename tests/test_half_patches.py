"""Changes that must go together (`needs`): a JIT spec is never widened without its kernels' guards unless forced."""

from __future__ import annotations

import json

import pytest

from conftest import git, tree_digest

HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"
COMM = "flashinfer/jit/comm.py"
JIT = "flashinfer.trtllm-comm-jit"
GUARDS = "flashinfer.trtllm-allreduce-guards"


def refs(repo) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


@pytest.mark.parametrize(
    "args, answers",
    [
        pytest.param(["--only", JIT], None, id="only-the-jit-gate"),
        pytest.param(["--only", JIT, "--dry-run"], None, id="only-the-jit-gate-dry-run"),
        pytest.param(["--skip", GUARDS], None, id="skip-the-guards"),
        pytest.param(["--interactive"], "y\nn\nn\n", id="interactive-yes-then-no"),
        pytest.param(["--interactive"], "y\nq\n", id="interactive-yes-then-quit"),
    ],
)
def test_half_patch_is_refused_before_anything_is_written(cli, example_repo, args, answers):
    repo = example_repo("flashinfer")
    before, before_refs = tree_digest(repo), refs(repo)
    result = cli("run", "sm120-enable", "--repo", repo, *args, input=answers)
    assert result.exit_code == 3, result.output
    assert f"{JIT} needs {GUARDS}, which is left out" in result.stderr
    assert "--force" in result.stderr and "Traceback" not in result.output
    assert tree_digest(repo) == before and refs(repo) == before_refs
    assert git(repo, "branch", "--show-current").strip() == "main"


def test_forced_half_patch_is_applied_and_recorded_in_the_trailer(cli, example_repo):
    repo = example_repo("flashinfer")
    result = cli("run", "sm120-enable", "--repo", repo, "--only", JIT, "--force")
    assert result.exit_code == 0, result.output
    assert "half-patch applied with --force" in result.stderr
    assert git(repo, "diff", "--name-only", "main", "HEAD").split() == [COMM]
    trailers = git(repo, "log", "-1", "--format=%(trailers:key=Codemod-Forced,valueonly)").strip()
    assert trailers == f"{JIT} needs {GUARDS}, which is left out"
    assert cli("revert", "sm120-enable", "--repo", repo).exit_code == 0


def test_selecting_both_or_the_guards_alone_is_no_half_patch(cli, example_repo):
    repo = example_repo("flashinfer")
    both = cli("run", "sm120-enable", "--repo", repo, "--only", JIT, "--only", GUARDS, "--dry-run")
    assert both.exit_code == 0, both.output
    guards = cli("run", "sm120-enable", "--repo", repo, "--only", GUARDS)
    assert guards.exit_code == 0, guards.output
    assert git(repo, "diff", "--name-only", "main", "HEAD").split() == [HEADER]


def test_jit_gate_alone_is_fine_when_the_guards_already_admit_the_arch(cli, example_repo):
    repo = example_repo("flashinfer")
    header = repo / HEADER
    header.write_text(header.read_text().replace("&& (__CUDA_ARCH__ < 1200)", ""))
    git(repo, "commit", "-qam", "guards fixed by hand")
    result = cli("run", "sm120-enable", "--repo", repo, "--only", JIT)
    assert result.exit_code == 0, result.output
    assert git(repo, "diff", "--name-only", "main", "HEAD").split() == [COMM]


def test_summary_and_matrix_show_only_what_was_applied(cli, example_repo):
    repo = example_repo("flashinfer")
    result = cli("run", "sm120-enable", "--repo", repo, "--interactive", input="n\ny\nn\n")
    assert result.exit_code == 0, result.output
    assert f"skipped   {JIT}" in result.stderr and f"changed   {GUARDS}" in result.stderr
    matrix = result.stderr.split("arch matrix", 1)[1]
    assert "comm.py" not in matrix and "trtllm_allreduce.cuh" in matrix
    assert git(repo, "diff", "--name-only", "main", "HEAD").split() == [HEADER]


def test_needs_must_name_another_change(cli, tmp_path, example_repo):
    recipe = tmp_path / "bad.toml"
    recipe.write_text(
        'id = "bad"\nsummary = "s"\narch = "sm_120"\n\n'
        '[[change]]\nid = "a.jit"\nproject = "flashinfer"\nfile = "{python}/jit/comm.py"\n'
        'kind = "python_arch_list"\nfunction = "gen_trtllm_comm_module"\nneeds = ["a.nothing"]\n'
    )
    result = cli("run", recipe, "--repo", example_repo("flashinfer"), "--dry-run")
    assert result.exit_code == 8, result.output
    assert "needs 'a.nothing'" in result.stderr and "bad.toml:" in result.stderr


def test_dry_run_says_the_real_run_will_refuse_a_dirty_target(cli, example_repo):
    repo = example_repo("flashinfer")
    (repo / COMM).write_text((repo / COMM).read_text() + "# my local tweak\n")
    before = tree_digest(repo)
    dry = cli("run", "sm120-enable", "--repo", repo, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "the real run will refuse (exit 4)" in dry.stderr and COMM in dry.stderr
    data = json.loads(cli("run", "sm120-enable", "--repo", repo, "--dry-run", "--format", "json").stdout)["results"][0]
    assert data["would_refuse"]["exit_code"] == 4 and data["would_refuse"]["kind"] == "dirty-tree"
    real = cli("run", "sm120-enable", "--repo", repo)
    assert real.exit_code == 4
    assert tree_digest(repo) == before


def test_clean_dry_run_predicts_no_refusal(cli, example_repo):
    repo = example_repo("flashinfer")
    data = json.loads(cli("run", "sm120-enable", "--repo", repo, "--dry-run", "--format", "json").stdout)["results"][0]
    assert data["would_refuse"] is None
