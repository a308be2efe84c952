"""The sm120-enable workflow through the real CLI, on real git repos made from examples/."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import git, tree_digest

HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"
COMM = "flashinfer/jit/comm.py"
OLD_GUARD = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"
NEW_GUARD = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))"
COMMUNICATOR = "python/sglang/srt/layers/communicator.py"
SERVER_ARGS = "python/sglang/srt/server_args.py"


def refs(repo) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


def test_list_shows_recipe(cli):
    result = cli("list")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("sm120-enable")
    assert "flashinfer, sglang" in result.stdout


def test_dry_run_prints_applicable_diff_and_writes_nothing(cli, example_repo, tmp_path):
    repo = example_repo("flashinfer")
    before, before_refs = tree_digest(repo), refs(repo)
    result = cli("run", "sm120-enable", "--repo", repo, "--dry-run", "--patch", tmp_path / "out.patch")
    assert result.exit_code == 0, result.output
    assert tree_digest(repo) == before and refs(repo) == before_refs
    assert "PR #3903" in result.stderr and "#15650" in result.stderr and "#18758" in result.stderr
    assert "flashinfer.trtllm-comm-jit" in result.stderr and "flashinfer.trtllm-allreduce-guards" in result.stderr
    diff = result.stdout
    assert diff == (tmp_path / "out.patch").read_text()
    assert f"-{OLD_GUARD}\n" in diff and f"+{NEW_GUARD}\n" in diff
    assert "-        supported_major_versions=[9, 10]\n+        supported_major_versions=[9, 10, 12]\n" in diff
    subprocess.run(["git", "apply", "--check", str(tmp_path / "out.patch")], cwd=repo, check=True)
    subprocess.run(["git", "apply", str(tmp_path / "out.patch")], cwd=repo, check=True)
    header = (repo / HEADER).read_text()
    assert header.count(NEW_GUARD) == 4 and OLD_GUARD + "\n  cudaGrid" not in header


def test_run_commits_each_change_on_branch_and_revert_restores_bytes(cli, example_repo):
    repo = example_repo("flashinfer")
    before = tree_digest(repo)
    base_sha = git(repo, "rev-parse", "main").strip()

    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0, result.output
    assert git(repo, "branch", "--show-current").strip() == "codemod/sm120-enable"
    assert git(repo, "rev-parse", "main").strip() == base_sha, "the base branch never moves"
    log = git(repo, "log", "--format=%s%n%b%n--END--", "main..HEAD")
    commits = [c for c in log.split("--END--") if c.strip()]
    assert len(commits) == 2
    assert "Codemod-Recipe: sm120-enable" in log and f"Codemod-Base: main@{base_sha}" in log
    assert "Codemod-Change: flashinfer.trtllm-comm-jit" in log and "PR #3903" in log
    changed = git(repo, "diff", "--name-only", "main", "HEAD").split()
    assert changed == [COMM, HEADER]
    comm = (repo / COMM).read_text()
    assert comm.count("supported_major_versions=[9, 10, 12]") == 1, "only gen_trtllm_comm_module is widened"
    assert comm.count("supported_major_versions=[9, 10]\n") == 1, "the MNNVL spec is left alone"
    assert (repo / HEADER).read_text().count(NEW_GUARD) == 4

    again = cli("run", "sm120-enable", "--repo", repo)
    assert again.exit_code == 0 and "already applied" in again.stderr
    assert len(git(repo, "log", "--format=%H", "main..HEAD").split()) == 2

    status = cli("status", "--repo", repo, "--format", "json")
    applied = json.loads(status.stdout)["results"][0]["applied"]
    assert [a["recipe"] for a in applied] == ["sm120-enable"] and applied[0]["base"]["sha"] == base_sha
    assert [c["change"] for c in applied[0]["commits"]] == ["flashinfer.trtllm-comm-jit", "flashinfer.trtllm-allreduce-guards"]

    back = cli("revert", "sm120-enable", "--repo", repo)
    assert back.exit_code == 0, back.output
    assert git(repo, "branch", "--show-current").strip() == "main"
    assert "codemod/sm120-enable" not in git(repo, "branch")
    assert tree_digest(repo) == before
    assert cli("status", "--repo", repo).stdout.startswith("no recipe applied")


def test_sglang_edits(cli, example_repo):
    repo = example_repo("sglang")
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0, result.output
    diff = git(repo, "diff", "main", "HEAD", "--", COMMUNICATOR)
    assert "+    is_sm120_supported,\n" in diff
    assert "+_is_sm120_supported = _is_cuda and is_sm120_supported()\n" in diff
    assert "+        (_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)\n" in diff
    text = (repo / COMMUNICATOR).read_text()
    assert "    return _is_sm90_supported or _is_sm100_supported\n" in text, "other features keep their gate"
    args = git(repo, "diff", "main", "HEAD", "--", SERVER_ARGS)
    assert "+            and (is_sm90_supported() or is_sm100_supported() or is_sm120_supported())\n" in args
    assert args.count("\n+") == 1 + 1  # the +++ header and one added line
    for rel in (COMMUNICATOR, SERVER_ARGS):
        compile((repo / rel).read_text(), rel, "exec")


def test_dirty_file_is_refused_and_edit_kept(cli, example_repo):
    repo = example_repo("flashinfer")
    (repo / COMM).write_text((repo / COMM).read_text() + "# my local edit\n")
    before, before_refs = tree_digest(repo), refs(repo)
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 4
    assert f"uncommitted changes in files this recipe edits: {COMM}" in result.stderr
    assert "commit or stash them" in result.stderr
    assert tree_digest(repo) == before and refs(repo) == before_refs


def test_dirty_unrelated_file_is_carried_untouched(cli, example_repo):
    repo = example_repo("flashinfer")
    (repo / "notes.txt").write_text("scratch\n")
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0, result.output
    assert (repo / "notes.txt").read_text() == "scratch\n"
    assert "notes.txt" not in git(repo, "show", "--name-only", "HEAD")


def test_detached_head_needs_branch(cli, example_repo):
    repo = example_repo("flashinfer")
    git(repo, "checkout", "-q", "--detach")
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 5 and "HEAD is detached" in result.stderr and "--branch" in result.stderr
    ok = cli("run", "sm120-enable", "--repo", repo, "--branch", "try/sm120")
    assert ok.exit_code == 0, ok.output
    assert git(repo, "branch", "--show-current").strip() == "try/sm120"
    back = cli("revert", "sm120-enable", "--repo", repo)
    assert back.exit_code == 0, back.output
    assert git(repo, "rev-parse", "HEAD").strip() == git(repo, "rev-parse", "main").strip()


def test_missing_gate_fails_whole_plan_and_writes_nothing(cli, example_repo):
    repo = example_repo("flashinfer")
    comm = repo / COMM
    comm.write_text(comm.read_text().replace("def gen_trtllm_comm_module", "def gen_renamed_module"))
    git(repo, "commit", "-qam", "rename")
    before, before_refs = tree_digest(repo), refs(repo)
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 3
    assert "flashinfer.trtllm-comm-jit" in result.stderr
    assert "function=gen_trtllm_comm_module" in result.stderr and COMM in result.stderr
    assert tree_digest(repo) == before and refs(repo) == before_refs


def test_already_enabled_project_makes_no_branch(cli, example_repo):
    repo = example_repo("flashinfer")
    for rel, old, new in ((COMM, "[9, 10]\n    )\n    return gen_jit_spec(\n        \"trtllm_comm\"", "[9, 10, 12]\n    )\n    return gen_jit_spec(\n        \"trtllm_comm\""), (HEADER, OLD_GUARD, NEW_GUARD)):
        text = (repo / rel).read_text()
        assert old in text
        (repo / rel).write_text(text.replace(old, new))
    git(repo, "commit", "-qam", "upstream fix")
    before_refs = refs(repo)
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0, result.output
    assert "already enabled" in result.stderr
    assert refs(repo) == before_refs
    one_line = f"already enabled: FlashInfer 0.6.3+example at {repo} already admits sm_120, sm_121; nothing to do, no branch made\n"
    for args in ((), ("--dry-run",)):  # no upstream notes, no upgrade advice, no per-gate list: the one line
        again = cli("run", "sm120-enable", "--repo", repo, *args)
        assert again.exit_code == 0 and again.stdout == "" and again.stderr == one_line, again.stderr


def test_only_and_skip_select_changes(cli, example_repo):
    repo = example_repo("flashinfer")
    result = cli("run", "sm120-enable", "--repo", repo, "--only", "flashinfer.trtllm-allreduce-guards")
    assert result.exit_code == 0, result.output
    assert git(repo, "diff", "--name-only", "main", "HEAD").split() == [HEADER]
    repo2 = example_repo("sglang")
    result = cli("run", "sm120-enable", "--repo", repo2, "--skip", "sglang.allreduce-fusion-auto-enable")
    assert result.exit_code == 0, result.output
    assert git(repo2, "diff", "--name-only", "main", "HEAD").split() == [COMMUNICATOR]
    bad = cli("run", "sm120-enable", "--repo", repo2, "--only", "no.such-change", "--dry-run")
    assert bad.exit_code == 8 and "no change 'no.such-change'" in bad.stderr


def test_interactive_quit_keeps_accepted(cli, example_repo):
    # SGLang's two gates stand alone; FlashInfer's JIT gate needs its guards (tests/test_half_patches.py).
    repo = example_repo("sglang")
    result = cli("run", "sm120-enable", "--repo", repo, "--interactive", input="y\nq\n")
    assert result.exit_code == 0, result.output
    assert git(repo, "diff", "--name-only", "main", "HEAD").split() == [COMMUNICATOR]


def test_revert_refuses_user_commits_on_top_unless_keep_commits(cli, example_repo):
    repo = example_repo("flashinfer")
    assert cli("run", "sm120-enable", "--repo", repo).exit_code == 0
    (repo / "tuning.txt").write_text("my tuning\n")
    git(repo, "add", "tuning.txt")
    git(repo, "commit", "-qm", "my tuning notes")
    refused = cli("revert", "sm120-enable", "--repo", repo)
    assert refused.exit_code == 7 and "my tuning notes" in refused.stderr and "--keep-commits" in refused.stderr
    kept = cli("revert", "sm120-enable", "--repo", repo, "--keep-commits")
    assert kept.exit_code == 0, kept.output
    assert (repo / "tuning.txt").read_text() == "my tuning\n"
    assert git(repo, "diff", "--name-only", "main", "HEAD").split() == ["tuning.txt"]


def test_json_output(cli, example_repo):
    repo = example_repo("flashinfer")
    result = cli("run", "sm120-enable", "--repo", repo, "--dry-run", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)["results"][0]
    assert data["status"] == "dry-run" and data["targets"] == ["sm_120", "sm_121"]
    guards = [g for c in data["changes"] for g in c["gates"] if g["gate_kind"] == "cuda_guard" and g["outcome"] == "changed"]
    assert len(guards) == 4
    assert guards[0]["admits_before"] == ["sm_90", "sm_100", "sm_103", "sm_110"]
    assert guards[0]["admits_after"] == ["sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"]
    assert guards[0]["unknown"] == [] and guards[0]["line"] > 1
    assert guards[0]["before"] == "(defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"
    assert guards[0]["after"] == "(defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))"


@pytest.mark.parametrize(
    "args, code, message",
    [
        pytest.param(["run", "sm120-enable", "--repo", "{tmp}/nope"], 6, "no tree at --repo", id="missing-path"),
        pytest.param(["run", "sm120-enable", "--repo", "{tmp}"], 6, "no FlashInfer, SGLang or vLLM tree found", id="not-a-project"),
        pytest.param(["run", "no-such-recipe", "--repo", "{tmp}"], 8, "no recipe named 'no-such-recipe'", id="unknown-recipe"),
        pytest.param(["revert", "sm120-enable", "--repo", "{repo}"], 7, "is not applied here", id="revert-not-applied"),
    ],
)
def test_errors_are_one_line_with_exit_code(cli, example_repo, tmp_path, args, code, message):
    repo = example_repo("flashinfer")
    (tmp_path / "empty").mkdir()
    args = [a.format(tmp=tmp_path / "empty", repo=repo) for a in args]
    result = cli(*args)
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_folder_outside_git_uses_shadow_repo(cli, tmp_path, isolated_homes):
    import shutil

    from conftest import EXAMPLES

    tree = tmp_path / "site-packages"
    shutil.copytree(EXAMPLES / "flashinfer", tree)
    pristine = tree_digest(tree)
    assert cli("run", "sm120-enable", "--repo", tree, "--dry-run").exit_code == 0
    assert not (isolated_homes / "codemod").exists(), "a dry run creates no shadow record"

    result = cli("run", "sm120-enable", "--repo", tree)
    assert result.exit_code == 0, result.output
    assert not (tree / ".git").exists()
    patched = tree_digest(tree)
    assert set(k for k in patched if patched[k] != pristine[k]) == {COMM, HEADER}
    assert set(patched) == set(pristine), "nothing but the patched files is written into the folder"

    status = cli("status", "--repo", tree, "--format", "json")
    data = json.loads(status.stdout)["results"][0]
    assert data["shadow"] is True and data["applied"][0]["recipe"] == "sm120-enable"

    assert cli("run", "sm120-enable", "--repo", tree).exit_code == 0
    back = cli("revert", "sm120-enable", "--repo", tree)
    assert back.exit_code == 0, back.output
    assert tree_digest(tree) == pristine and not (tree / ".git").exists()


def test_shadow_refuses_after_reinstall(cli, tmp_path):
    import shutil

    from conftest import EXAMPLES

    tree = tmp_path / "site-packages"
    shutil.copytree(EXAMPLES / "flashinfer", tree)
    assert cli("run", "sm120-enable", "--repo", tree).exit_code == 0
    reinstalled = (EXAMPLES / "flashinfer" / COMM).read_bytes() + b"# 0.6.4\n"
    (tree / COMM).write_bytes(reinstalled)
    status = cli("status", "--repo", tree)
    assert "changed outside codemod" in status.stdout and COMM in status.stdout
    refused = cli("revert", "sm120-enable", "--repo", tree)
    assert refused.exit_code == 7 and "reinstalled or upgraded" in refused.stderr
    assert (tree / COMM).read_bytes() == reinstalled
    again = cli("run", "sm120-enable", "--repo", tree)
    assert again.exit_code == 4 and "changed since codemod recorded them" in again.stderr
    forgot = cli("revert", "sm120-enable", "--repo", tree, "--forget")
    assert forgot.exit_code == 0, forgot.output
    assert (tree / COMM).read_bytes() == reinstalled
    fresh = cli("run", "sm120-enable", "--repo", tree)
    assert fresh.exit_code == 0, fresh.output
    assert b"supported_major_versions=[9, 10, 12]" in (tree / COMM).read_bytes()


def test_several_repos_plan_all_then_apply(cli, example_repo, tmp_path):
    fi, sg = example_repo("flashinfer"), example_repo("sglang")
    result = cli("run", "sm120-enable", "--repo", fi, "--repo", sg)
    assert result.exit_code == 0, result.output
    for repo in (fi, sg):
        assert git(repo, "branch", "--show-current").strip() == "codemod/sm120-enable"
    back = cli("revert", "sm120-enable", "--repo", fi, "--repo", sg)
    assert back.exit_code == 0, back.output


def test_several_repos_one_failing_plan_writes_nothing(cli, example_repo):
    fi, sg = example_repo("flashinfer"), example_repo("sglang")
    comm = sg / COMMUNICATOR
    comm.write_text(comm.read_text().replace("def apply_flashinfer_allreduce_fusion", "def renamed"))
    git(sg, "commit", "-qam", "rename")
    before = {r: (tree_digest(r), refs(r)) for r in (fi, sg)}
    result = cli("run", "sm120-enable", "--repo", fi, "--repo", sg)
    assert result.exit_code == 3 and "sglang.allreduce-fusion-gate" in result.stderr
    assert {r: (tree_digest(r), refs(r)) for r in (fi, sg)} == before


def test_several_repos_second_check_fails_first_not_applied(cli, example_repo):
    fi, sg = example_repo("flashinfer"), example_repo("sglang")
    (sg / SERVER_ARGS).write_text((sg / SERVER_ARGS).read_text() + "# local\n")
    before = {r: (tree_digest(r), refs(r)) for r in (fi, sg)}
    result = cli("run", "sm120-enable", "--repo", fi, "--repo", sg)
    assert result.exit_code == 4
    assert {r: (tree_digest(r), refs(r)) for r in (fi, sg)} == before


def test_clear_jit_cache_removes_only_module_builds(cli, example_repo, isolated_homes):
    repo = example_repo("flashinfer")
    cache = isolated_homes / "fi-workspace" / ".cache" / "flashinfer"
    version = "0.6.3+example"
    keep = [
        cache / version / "90a_100a" / "cached_ops" / "trtllm_mnnvl_comm" / "x.so",
        cache / version / "90a_100a" / "generated" / "trtllm_comm" / "gen.cu",
        cache / "0.6.2" / "90a" / "cached_ops" / "trtllm_comm" / "old.so",
        isolated_homes / "outside" / "trtllm_comm" / "keep.so",
    ]
    gone = [
        cache / version / "90a_100a" / "cached_ops" / "trtllm_comm" / "trtllm_comm.so",
        cache / version / "120f" / "cached_ops" / "trtllm_comm" / "build.ninja",
    ]
    for f in keep + gone:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x")
    (cache / version / "120f" / "cached_ops" / "escape").symlink_to(isolated_homes / "outside")

    dry = cli("run", "sm120-enable", "--repo", repo, "--dry-run", "--clear-jit-cache")
    assert dry.exit_code == 0, dry.output
    assert all(f.exists() for f in keep + gone)
    assert dry.stderr.count("would remove stale JIT build") == 2

    result = cli("run", "sm120-enable", "--repo", repo, "--clear-jit-cache")
    assert result.exit_code == 0, result.output
    assert all(f.exists() for f in keep) and not any(f.parent.exists() for f in gone)
    assert result.stderr.count("removed stale JIT build") == 2


def test_a_recipe_whose_every_change_is_absent_says_so_not_already_enabled(cli, example_repo, tmp_path):
    """Round 12 bug 7: nothing was read, so "already admits sm_120" is a claim codemod cannot make (and a script
    reading the JSON status would believe the feature runs there)."""
    repo = example_repo("sglang")
    recipe = tmp_path / "absent.toml"
    recipe.write_text(
        'id = "absent"\nsummary = "x"\narch = "sm_120"\n\n[[change]]\nid = "sglang.absent"\nproject = "sglang"\n'
        'file = "{python}/srt/layers/attention/no_such_backend.py"\nkind = "python_arch_test"\nfunction = "f"\n'
        'optional = "absent"\ntitle = "x"\n'
    )
    before_refs = refs(repo)
    result = cli("run", recipe, "--repo", repo)
    assert result.exit_code == 0, result.output
    assert "not in this version: every change of absent is absent from SGLang" in result.stderr
    assert "already" not in result.stderr and refs(repo) == before_refs
    data = json.loads(cli("run", recipe, "--repo", repo, "--format", "json").stdout)["results"][0]
    assert data["status"] == "not-in-this-version"
