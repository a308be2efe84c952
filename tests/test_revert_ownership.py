"""revert removes only what it can prove is codemod's (issue 37), and status says what --keep-commits did (issue 32).

Each attack is played with real git on a real repository: the user's work must
survive the refused revert, and `revert --keep-commits` must still undo
codemod's changes without deleting any branch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema
import pytest

from conftest import IDENTITY, git, tree_digest

COMM = "flashinfer/jit/comm.py"
HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"
BRANCH = "codemod/sm120-enable"


def applied(cli, example_repo):
    repo = example_repo("flashinfer")
    pristine = tree_digest(repo)
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0, result.output
    return repo, pristine


def branches(repo) -> list[str]:
    return git(repo, "branch", "--format=%(refname:short)").split()


def codemod_files_are_back(repo, pristine) -> None:
    digest = tree_digest(repo)
    assert digest[COMM] == pristine[COMM] and digest[HEADER] == pristine[HEADER]


def test_normal_revert_deletes_the_branch_and_every_byte_is_back(cli, example_repo):
    repo, pristine = applied(cli, example_repo)
    message = git(repo, "log", "-1", "--format=%B", BRANCH)
    assert f"Codemod-Branch: {BRANCH}" in message and "Codemod-File: " in message and HEADER in message
    back = cli("revert", "sm120-enable", "--repo", repo)
    assert back.exit_code == 0, back.output
    assert branches(repo) == ["main"] and tree_digest(repo) == pristine


def test_amended_commit_is_refused_and_keep_commits_keeps_the_amend(cli, example_repo):
    repo, pristine = applied(cli, example_repo)
    init = repo / "flashinfer" / "_build_meta.py"
    init.write_bytes(init.read_bytes() + b"MY_TUNING = 1\n")
    git(repo, "commit", "-qa", "--amend", "--no-edit")
    amended = git(repo, "rev-parse", "HEAD").strip()
    refused = cli("revert", "sm120-enable", "--repo", repo)
    assert refused.exit_code == 7, refused.output
    assert amended[:10] in refused.stderr and "flashinfer/_build_meta.py" in refused.stderr
    assert "codemod revert sm120-enable --keep-commits --repo" in refused.stderr
    assert BRANCH in branches(repo) and b"MY_TUNING = 1\n" in init.read_bytes()
    assert git(repo, "rev-parse", "HEAD").strip() == amended

    kept = cli("revert", "sm120-enable", "--repo", repo, "--keep-commits")
    assert kept.exit_code == 0, kept.output
    assert BRANCH in branches(repo)
    codemod_files_are_back(repo, pristine)
    assert init.read_bytes().endswith(b"MY_TUNING = 1\n"), "the user's amended line stays in the tree"
    assert git(repo, "merge-base", "--is-ancestor", amended, "HEAD") == ""


def _reorder_editor(tmp_path):
    """A GIT_SEQUENCE_EDITOR that moves the last pick line (the user's commit) to the top of the todo list."""
    script = tmp_path / "reorder.py"
    script.write_text(
        "import sys\n"
        "path = sys.argv[1]\n"
        "lines = open(path).read().splitlines(True)\n"
        "picks = [l for l in lines if l.startswith('pick ')]\n"
        "rest = [l for l in lines if not l.startswith('pick ')]\n"
        "open(path, 'w').write(''.join([picks[-1]] + picks[:-1] + rest))\n"
    )
    return f"{sys.executable} {script}"


def test_user_commit_moved_below_codemods_is_refused_and_kept(cli, example_repo, tmp_path):
    repo, pristine = applied(cli, example_repo)
    (repo / "mywork.txt").write_text("my work\n")
    git(repo, "add", "mywork.txt")
    git(repo, "commit", "-qm", "my work")
    env = {**os.environ, **IDENTITY, "GIT_SEQUENCE_EDITOR": _reorder_editor(tmp_path)}
    subprocess.run(["git", "rebase", "-q", "-i", "main"], cwd=repo, env=env, check=True, capture_output=True)
    subjects = git(repo, "log", "--format=%s", "main..HEAD").splitlines()
    assert subjects[-1] == "my work", "the user's commit now sits right on main, under codemod's"
    mine = git(repo, "rev-parse", "HEAD~2").strip()

    refused = cli("revert", "sm120-enable", "--repo", repo)
    assert refused.exit_code == 7, refused.output
    assert mine[:10] in refused.stderr and "'my work'" in refused.stderr and "--keep-commits" in refused.stderr
    assert BRANCH in branches(repo) and (repo / "mywork.txt").read_text() == "my work\n"
    status = cli("status", "--repo", repo)
    assert "(not codemod: under its commits)" in status.stdout and "my work" in status.stdout

    kept = cli("revert", "sm120-enable", "--repo", repo, "--keep-commits")
    assert kept.exit_code == 0, kept.output
    codemod_files_are_back(repo, pristine)
    assert (repo / "mywork.txt").read_text() == "my work\n"
    assert git(repo, "merge-base", "--is-ancestor", mine, "HEAD") == ""


@pytest.mark.parametrize("on", ["feature", "main"])
def test_codemods_commits_on_users_branches_are_never_deleted(cli, example_repo, on):
    """main fast-forwarded to codemod's branch, that branch deleted, `feature` made: neither is codemod's to delete."""
    repo, pristine = applied(cli, example_repo)
    tip = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--ff-only", BRANCH)
    git(repo, "branch", "-D", BRANCH)
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "checkout", "-q", on)

    refused = cli("revert", "sm120-enable", "--repo", repo)
    assert refused.exit_code == 7, refused.output
    assert f"branch {on} is not the branch codemod made ({BRANCH})" in refused.stderr
    assert "--keep-commits" in refused.stderr
    dry = cli("revert", "sm120-enable", "--repo", repo, "--dry-run")
    assert dry.exit_code == 7 and "delete branch" not in dry.output
    assert branches(repo) == ["feature", "main"]
    assert git(repo, "rev-parse", "main", "feature").split() == [tip, tip]
    assert f"(codemod made it on {BRANCH}, not on {on})" in cli("status", "--repo", repo).stdout

    kept = cli("revert", "sm120-enable", "--repo", repo, "--keep-commits")
    assert kept.exit_code == 0, kept.output
    assert branches(repo) == ["feature", "main"] and git(repo, "branch", "--show-current").strip() == on
    other = "main" if on == "feature" else "feature"
    assert git(repo, "rev-parse", other).strip() == tip, "the other branch is not touched"
    codemod_files_are_back(repo, pristine)


def test_branch_deleted_and_made_again_is_not_codemods(cli, example_repo):
    repo, _ = applied(cli, example_repo)
    tip = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-D", BRANCH)
    git(repo, "branch", BRANCH, tip)
    refused = cli("revert", "sm120-enable", "--repo", repo)
    assert refused.exit_code == 7 and "not the branch codemod made" in refused.stderr
    assert BRANCH in branches(repo)


def test_branch_of_an_older_codemod_is_refused_with_the_way_out(cli, example_repo):
    """Commits without Codemod-Branch/Codemod-File trailers cannot be proven; --keep-commits still works."""
    repo = example_repo("flashinfer")
    pristine = tree_digest(repo)
    base = git(repo, "rev-parse", "main").strip()
    git(repo, "checkout", "-q", "-b", BRANCH)
    comm = repo / COMM
    comm.write_text(comm.read_text().replace("supported_major_versions=[9, 10]", "supported_major_versions=[9, 10, 12]", 1))
    git(repo, "commit", "-qam", "codemod(sm120-enable): widen\n\nCodemod-Recipe: sm120-enable\n"
        f"Codemod-Change: flashinfer.trtllm-comm-jit\nCodemod-Base: main@{base}")
    refused = cli("revert", "sm120-enable", "--repo", repo)
    assert refused.exit_code == 7 and "older codemod" in refused.stderr and "--keep-commits" in refused.stderr
    assert BRANCH in branches(repo)
    kept = cli("revert", "sm120-enable", "--repo", repo, "--keep-commits")
    assert kept.exit_code == 0, kept.output
    assert tree_digest(repo) == pristine


def test_status_and_run_after_keep_commits_say_one_true_thing(cli, example_repo):
    repo, pristine = applied(cli, example_repo)
    kept = cli("revert", "sm120-enable", "--repo", repo, "--keep-commits")
    assert kept.exit_code == 0, kept.output
    assert tree_digest(repo) == pristine

    status = cli("status", "--repo", repo)
    assert status.stdout.startswith(f"sm120-enable: reverted (commits kept) in {repo} on {BRANCH}"), status.stdout
    assert "your commit on top" not in status.stdout and status.stdout.count("(revert of codemod commit)") == 2
    data = json.loads(cli("status", "--repo", repo, "--format", "json").stdout)
    jsonschema.validate(data, json.loads(cli("schema", "status").stdout))
    (one,) = data["results"]
    assert one["state"] == "reverted" and one["applied"][0]["state"] == "reverted (commits kept)"
    assert one["applied"][0]["commits_on_top"] == [] and len(one["applied"][0]["reverts"]) == 2

    for dry in (["--dry-run"], []):
        again = cli("run", "sm120-enable", "--repo", repo, *dry)
        said = again.stderr
        assert "already applied" not in said and "HEAD is on" not in said, said
        assert "was reverted on codemod/sm120-enable with its commits kept" in said
        assert f"codemod run sm120-enable --branch {BRANCH}-2 --repo {repo}" in said
    assert cli("run", "sm120-enable", "--repo", repo).exit_code == 5
    fresh = cli("run", "sm120-enable", "--branch", f"{BRANCH}-2", "--repo", repo)
    assert fresh.exit_code == 0, fresh.output
    assert "sm120-enable: applied" in cli("status", "--repo", repo).stdout
    assert cli("revert", "sm120-enable", "--repo", repo).exit_code == 0
    assert tree_digest(repo) == pristine

    not_again = cli("revert", "sm120-enable", "--repo", repo)
    assert not_again.exit_code == 7 and "already reverted with --keep-commits" in not_again.stderr


def test_keep_commits_takes_only_codemods_edit_out_of_a_file_the_user_amended(cli, example_repo):
    repo, pristine = applied(cli, example_repo)
    header = repo / HEADER
    original = (repo / HEADER).read_bytes()
    header.write_bytes(header.read_bytes() + b"// my note\n")
    git(repo, "commit", "-qa", "--amend", "--no-edit")
    refused = cli("revert", "sm120-enable", "--repo", repo)
    assert refused.exit_code == 7 and HEADER in refused.stderr
    kept = cli("revert", "sm120-enable", "--repo", repo, "--keep-commits")
    assert kept.exit_code == 0, kept.output
    git_header = git(repo, "show", f"main:{HEADER}").encode()
    assert header.read_bytes() == git_header + b"// my note\n", "codemod's guards are back, the user's line stays"
    assert (repo / COMM).read_bytes() == git(repo, "show", f"main:{COMM}").encode()
    assert git(repo, "status", "--porcelain") == ""
    assert original != header.read_bytes()


def test_keep_commits_conflicting_with_the_users_amend_changes_nothing(cli, example_repo):
    repo, _ = applied(cli, example_repo)
    comm = repo / COMM
    git(repo, "checkout", "-q", "HEAD~1")  # the JIT gate commit is the first one: amend it, then put the guards back on
    git(repo, "checkout", "-q", "-B", "tmp")
    comm.write_text(comm.read_text().replace("[9, 10, 12]", "[9, 10, 12, 13]", 1))
    git(repo, "commit", "-qa", "--amend", "--no-edit")
    git(repo, "cherry-pick", BRANCH)
    git(repo, "branch", "-f", BRANCH, "tmp")
    git(repo, "checkout", "-q", BRANCH)
    git(repo, "branch", "-D", "tmp")
    before, head = tree_digest(repo), git(repo, "rev-parse", "HEAD").strip()
    refused = cli("revert", "sm120-enable", "--repo", repo, "--keep-commits")
    assert refused.exit_code == 7, refused.output
    assert f"conflicts with a later commit in {COMM}" in refused.stderr
    assert tree_digest(repo) == before and git(repo, "rev-parse", "HEAD").strip() == head
    assert git(repo, "status", "--porcelain") == ""


def test_a_revert_commit_with_more_than_the_undo_is_not_deleted(cli, example_repo):
    """The user's `git revert` of one codemod commit, amended with their own file: revert must not delete it."""
    repo, _ = applied(cli, example_repo)
    git(repo, "revert", "--no-edit", "HEAD")
    (repo / "notes.txt").write_text("why I reverted the guards\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-q", "--amend", "--no-edit")
    mine = git(repo, "rev-parse", "HEAD").strip()
    refused = cli("revert", "sm120-enable", "--repo", repo)
    assert refused.exit_code == 7 and mine[:10] in refused.stderr and "exact undo" in refused.stderr
    assert BRANCH in branches(repo) and (repo / "notes.txt").exists()


def test_a_plain_git_revert_of_one_codemod_commit_still_reverts_cleanly(cli, example_repo):
    repo, pristine = applied(cli, example_repo)
    git(repo, "revert", "--no-edit", "HEAD")
    assert "(revert of codemod commit)" in cli("status", "--repo", repo).stdout
    back = cli("revert", "sm120-enable", "--repo", repo)
    assert back.exit_code == 0, back.output
    assert branches(repo) == ["main"] and tree_digest(repo) == pristine


def test_keep_commits_after_a_git_revert_of_one_commit_reverts_only_the_other(cli, example_repo):
    repo, pristine = applied(cli, example_repo)
    git(repo, "revert", "--no-edit", "HEAD")
    kept = cli("revert", "sm120-enable", "--repo", repo, "--keep-commits")
    assert kept.exit_code == 0, kept.output
    assert "reverted 1 codemod commit(s)" in kept.stderr
    assert len(git(repo, "log", "--format=%H", "main..HEAD").split()) == 4
    codemod_files_are_back(repo, pristine)
    assert "reverted (commits kept)" in cli("status", "--repo", repo).stdout


def test_verify_after_keep_commits_does_not_claim_the_reverted_recipe(cli, example_repo):
    repo, _ = applied(cli, example_repo)
    assert cli("revert", "sm120-enable", "--repo", repo, "--keep-commits").exit_code == 0
    result = cli("verify", "--repo", repo)
    assert result.exit_code == 5 and "no applied recipe to verify" in result.stderr, result.output


def test_renamed_branch_is_not_deleted(cli, example_repo):
    repo, pristine = applied(cli, example_repo)
    git(repo, "branch", "-m", BRANCH, "my-experiment")
    refused = cli("revert", "sm120-enable", "--repo", repo)
    assert refused.exit_code == 7 and f"branch my-experiment is not the branch codemod made ({BRANCH})" in refused.stderr
    assert branches(repo) == ["main", "my-experiment"]
    kept = cli("revert", "sm120-enable", "--repo", repo, "--keep-commits")
    assert kept.exit_code == 0, kept.output
    assert branches(repo) == ["main", "my-experiment"]
    codemod_files_are_back(repo, pristine)


def test_crlf_file_committed_before_autocrlf_still_reverts(cli, tmp_path):
    """A file git holds with CRLF, under core.autocrlf=true: git add keeps its CRLF, and so must the recorded blob."""
    import shutil

    from conftest import EXAMPLES, init_repo

    repo = tmp_path / "fi"
    shutil.copytree(EXAMPLES / "flashinfer", repo)
    comm = repo / COMM
    comm.write_bytes(comm.read_bytes().replace(b"\n", b"\r\n"))
    init_repo(repo)
    git(repo, "config", "core.autocrlf", "true")
    pristine = comm.read_bytes()
    ran = cli("run", "sm120-enable", "--repo", repo)
    assert ran.exit_code == 0, ran.output
    back = cli("revert", "sm120-enable", "--repo", repo)
    assert back.exit_code == 0, back.output
    assert comm.read_bytes() == pristine and branches(repo) == ["main"]
