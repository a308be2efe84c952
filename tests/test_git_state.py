"""Other processes and git's own state: codemod never loses a byte or a piece of git state it did not make."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import IDENTITY, ROOT, git, tree_digest

COMM = "flashinfer/jit/comm.py"
HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"


def refs(repo) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


def branches(repo) -> list[str]:
    return git(repo, "branch", "--format=%(refname:short)").split()


# ------------------------------------------------------------------ another process edits a target


@pytest.mark.parametrize(
    "step",
    [
        pytest.param("branch-created", id="edit-before-codemod-writes"),
        pytest.param("written", id="edit-between-write-and-commit"),
        pytest.param("committed", id="edit-after-commit-before-next-change"),
    ],
)
def test_concurrent_edit_is_kept_and_the_run_stops(example_repo, tmp_path, step):
    repo = example_repo("flashinfer")
    base = (repo / COMM).read_text()
    gate = tmp_path / "go"
    env = {**os.environ, **IDENTITY, "PYTHONPATH": str(ROOT), "CODEMOD_TEST_PAUSE_AT": f"{step}:{gate}"}
    run = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "fault_runner.py"), "run", "sm120-enable", "--repo", str(repo), "--only",
         "flashinfer.trtllm-allreduce-guards", "--only", "flashinfer.trtllm-comm-jit"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 60
    while not Path(str(gate) + ".reached").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert Path(str(gate) + ".reached").exists(), run.communicate()
    target = repo / (COMM if step == "branch-created" else COMM)
    with open(target, "a") as handle:  # an editor's save or a formatter, in another terminal
        handle.write("# saved by another process\n")
    gate.write_text("go")
    out, err = run.communicate(timeout=120)
    assert run.returncode == 5, out + err
    assert "changed while codemod was working on it" in err and COMM in err
    assert "internal error" not in err
    text = target.read_text()
    assert text == base + "# saved by another process\n", "codemod's edit is taken out, the other process's bytes kept"
    assert "no byte of it was lost" in err
    assert git(repo, "branch", "--show-current").strip() == "main"
    assert branches(repo) == ["main"]
    assert not (repo / ".git" / "codemod" / "journal.json").exists()
    assert git(repo, "log", "--format=%s").strip() == "base", "nothing committed on main"


# ------------------------------------------------------------------ git mid-operation


def _start_conflicting(repo: Path, op: str) -> None:
    """Leave the repo in the middle of `op` with a conflict in an unrelated file."""
    (repo / "notes.txt").write_text("base\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "notes")
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "notes.txt").write_text("other\n")
    git(repo, "commit", "-qam", "other notes")
    git(repo, "checkout", "-q", "main")
    (repo / "notes.txt").write_text("main\n")
    git(repo, "commit", "-qam", "main notes")
    args = {"merge": ["merge", "other"], "cherry-pick": ["cherry-pick", "other"], "revert": ["revert", "--no-edit", "HEAD"],
            "rebase": ["rebase", "other"]}[op]
    if op == "revert":
        (repo / "notes.txt").write_text("main again\n")
        git(repo, "commit", "-qam", "main again")
        args = ["revert", "--no-edit", "HEAD~1"]
    proc = subprocess.run(["git", *args], cwd=repo, env={**os.environ, **IDENTITY}, capture_output=True, text=True)
    assert proc.returncode != 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "op, marker, advice",
    [
        pytest.param("merge", "MERGE_HEAD", "git merge --abort", id="merge"),
        pytest.param("cherry-pick", "CHERRY_PICK_HEAD", "git cherry-pick --abort", id="cherry-pick"),
        pytest.param("revert", "REVERT_HEAD", "git revert --abort", id="revert"),
        pytest.param("rebase", "rebase-merge", "git rebase --abort", id="rebase"),
    ],
)
def test_operation_in_progress_is_refused_and_kept(cli, example_repo, op, marker, advice):
    repo = example_repo("flashinfer")
    _start_conflicting(repo, op)
    assert (repo / ".git" / marker).exists()
    before, before_refs = tree_digest(repo), refs(repo)
    for args in (["run", "sm120-enable", "--repo", repo], ["run", "sm120-enable", "--repo", repo, "--dry-run"]):
        result = cli(*args)
        if "--dry-run" in args:
            assert result.exit_code == 0 and "the real run will refuse (exit 5)" in result.stderr
        else:
            assert result.exit_code == 5, result.output
            assert advice in result.stderr
    assert (repo / ".git" / marker).exists(), "the user's operation state is kept"
    assert tree_digest(repo) == before and refs(repo) == before_refs


def test_revert_refuses_during_a_merge(cli, example_repo):
    repo = example_repo("flashinfer")
    assert cli("run", "sm120-enable", "--repo", repo).exit_code == 0
    (repo / "notes.txt").write_text("one\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "notes on the codemod branch")
    git(repo, "checkout", "-q", "-b", "side", "main")
    (repo / "notes.txt").write_text("two\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "side notes")
    git(repo, "checkout", "-q", "codemod/sm120-enable")
    subprocess.run(["git", "merge", "side"], cwd=repo, env={**os.environ, **IDENTITY}, capture_output=True)
    assert (repo / ".git" / "MERGE_HEAD").exists()
    result = cli("revert", "sm120-enable", "--repo", repo, "--keep-commits")
    assert result.exit_code == 5 and "git merge --abort" in result.stderr, result.output
    assert (repo / ".git" / "MERGE_HEAD").exists()


# ------------------------------------------------------------------ git's locks


def test_stale_index_lock_from_before_is_refused_with_gits_advice(cli, example_repo):
    repo = example_repo("flashinfer")
    (repo / ".git" / "index.lock").write_text("")
    before, before_refs = tree_digest(repo), refs(repo)
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 5, result.output
    assert "index.lock" in result.stderr and "another git process seems to be running" in result.stderr
    assert tree_digest(repo) == before and refs(repo) == before_refs
    assert not (repo / ".git" / "codemod" / "journal.json").exists()
    status = cli("status", "--repo", repo)
    assert status.exit_code == 0 and "internal error" not in status.output


def test_lock_left_by_codemods_own_dead_git_is_recovered(cli, example_repo):
    """A killed process group leaves index.lock after the journal was written: the next run takes it back."""
    repo = example_repo("flashinfer")
    base = git(repo, "rev-parse", "HEAD").strip()
    state = repo / ".git" / "codemod"
    state.mkdir(parents=True)
    git(repo, "checkout", "-q", "-b", "codemod/sm120-enable")
    entry = {"op": "run", "recipe": "sm120-enable", "branch": "codemod/sm120-enable", "base_ref": "main",
             "base_sha": base, "files": {}, "step": "branch-created", "pid": 999999, "started_ns": time.time_ns()}
    (state / "journal.json").write_text(json.dumps(entry))
    time.sleep(0.01)
    (repo / ".git" / "index.lock").write_text("")
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0, result.output
    assert "left by a git that the interrupted codemod started" in result.stderr
    assert git(repo, "branch", "--show-current").strip() == "codemod/sm120-enable"
    assert len(git(repo, "log", "--format=%H", "main..HEAD").split()) == 2


@pytest.mark.parametrize(
    "journal_text",
    [
        pytest.param("{not json", id="invalid-json"),
        pytest.param('"a string"', id="a-string"),
        pytest.param('{"op": "run"}', id="no-steps"),
        pytest.param('{"op": "run", "branch": "x", "base_sha": "y", "step": "z", "files": []}', id="files-not-a-map"),
    ],
)
def test_garbled_journal_is_reported_with_the_way_out(cli, example_repo, journal_text):
    repo = example_repo("flashinfer")
    state = repo / ".git" / "codemod"
    state.mkdir(parents=True)
    (state / "journal.json").write_text(journal_text)
    before = tree_digest(repo)
    status = cli("status", "--repo", repo)
    assert status.exit_code == 0 and "cannot be read" in status.stdout and "None" not in status.stdout
    for args in (["run", "sm120-enable", "--repo", repo], ["revert", "sm120-enable", "--repo", repo]):
        result = cli(*args)
        assert result.exit_code == 5, result.output
        assert "journal cannot be read" in result.stderr and "delete" in result.stderr
    assert tree_digest(repo) == before


# ------------------------------------------------------------------ hooks and signing


@pytest.mark.parametrize("hook", ["post-checkout", "post-commit", "reference-transaction", "pre-commit", "commit-msg"])
def test_users_hooks_do_not_run_for_codemods_git(cli, example_repo, tmp_path, hook):
    repo = example_repo("flashinfer")
    witness = tmp_path / "hook-ran"
    script = repo / ".git" / "hooks" / hook
    script.write_text(f"#!/bin/sh\necho ran >> '{witness}'\nexit 1\n")
    script.chmod(0o755)
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0, result.output
    revert = cli("revert", "sm120-enable", "--repo", repo)
    assert revert.exit_code == 0, revert.output
    assert not witness.exists()
    assert branches(repo) == ["main"] and not (repo / ".git" / "codemod" / "journal.json").exists()


# signing: codemod's commits are not signed, so gpg.program never runs (tests/test_git_safety.py)


# ------------------------------------------------------------------ names


@pytest.mark.parametrize("name", ["bad..name", "x y", "-D", "--orphan=x", "refs/heads/main", "x.lock", "a/", "HEAD", "x~1", "x:y"])
def test_bad_branch_is_bad_usage_and_writes_nothing(cli, example_repo, name):
    repo = example_repo("flashinfer")
    before, before_refs = tree_digest(repo), refs(repo)
    result = cli("run", "sm120-enable", "--repo", repo, f"--branch={name}")
    assert result.exit_code == 2, result.output
    assert "--branch" in result.stderr and "internal error" not in result.output
    assert tree_digest(repo) == before and refs(repo) == before_refs
    assert not (repo / ".git" / "codemod" / "journal.json").exists()


def test_recipe_id_that_is_no_branch_name_is_an_invalid_recipe(cli, example_repo, tmp_path):
    repo = example_repo("flashinfer")
    recipe = (ROOT / "examples" / "recipes" / "sm110-enable.toml").read_text().replace('id = "sm110-enable"', 'id = "x.lock"', 1)
    (tmp_path / "x.toml").write_text(recipe)
    before, before_refs = tree_digest(repo), refs(repo)
    result = cli("run", tmp_path / "x.toml", "--repo", repo)
    assert result.exit_code == 8, result.output
    assert "x.lock" in result.stderr and "internal error" not in result.output
    assert tree_digest(repo) == before and refs(repo) == before_refs


# ------------------------------------------------------------------ --patch


@pytest.mark.parametrize(
    "where",
    [pytest.param("missing/out.patch", id="missing-folder"), pytest.param("adir", id="a-directory"),
     pytest.param("/dev/full", id="dev-full")],
)
def test_unwritable_patch_is_refused_before_anything_is_applied(cli, example_repo, tmp_path, where):
    repo = example_repo("flashinfer")
    (tmp_path / "adir").mkdir()
    target = Path(where) if where.startswith("/") else tmp_path / where
    before, before_refs = tree_digest(repo), refs(repo)
    result = cli("run", "sm120-enable", "--repo", repo, "--patch", target)
    assert result.exit_code == 9, result.output
    assert "internal error" not in result.output
    assert tree_digest(repo) == before and refs(repo) == before_refs


# ------------------------------------------------------------------ revert --keep-commits conflicts


def test_keep_commits_conflict_is_refused_and_undone(cli, example_repo):
    repo = example_repo("flashinfer")
    assert cli("run", "sm120-enable", "--repo", repo).exit_code == 0
    comm = repo / COMM
    comm.write_text(comm.read_text().replace("[9, 10, 12]", "[9, 10, 12, 13]"))
    git(repo, "commit", "-qam", "my own widening on top")
    head = git(repo, "rev-parse", "HEAD").strip()
    before = tree_digest(repo)
    result = cli("revert", "sm120-enable", "--repo", repo, "--keep-commits")
    assert result.exit_code == 7, result.output
    assert COMM in result.stderr and "conflicts" in result.stderr
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert not (repo / ".git" / "REVERT_HEAD").exists()
    assert git(repo, "status", "--porcelain").strip() == ""
    assert tree_digest(repo) == before


# ------------------------------------------------------------------ shadow records and packages


def test_shadow_record_survives_a_git_repository_made_around_the_folder(cli, tmp_path):
    """Dotfiles-style: a patched folder outside git later ends up inside a new git repository."""
    import shutil

    from conftest import EXAMPLES

    home = tmp_path / "home"
    folder = home / "envs" / "flashinfer"
    shutil.copytree(EXAMPLES / "flashinfer", folder)
    pristine = tree_digest(folder)
    assert cli("run", "sm120-enable", "--repo", folder).exit_code == 0
    git(home, "init", "-q", "-b", "main")
    git(home, "add", "-A")
    git(home, "commit", "-qm", "my dotfiles")
    status = cli("status", "--repo", folder)
    assert status.exit_code == 0 and status.stdout.startswith("sm120-enable: applied"), status.output
    back = cli("revert", "sm120-enable", "--repo", folder)
    assert back.exit_code == 0, back.output
    assert tree_digest(folder) == pristine


def test_each_package_is_revertible_on_its_own(cli, tmp_path, monkeypatch):
    """FlashInfer reinstalled behind codemod's back does not block reverting SGLang, and --forget drops only FlashInfer's record."""
    from conftest import fake_site

    site = fake_site(tmp_path, ("flashinfer", "sglang"))
    monkeypatch.setenv("PYTHONPATH", str(site))
    both = ("--package", "flashinfer", "--package", "sglang", "--python", sys.executable)
    pristine_sglang = tree_digest(site / "sglang")
    assert cli("run", "sm120-enable", *both).exit_code == 0
    comm = site / "flashinfer" / "jit" / "comm.py"
    comm.write_text(comm.read_text() + "# reinstalled\n")  # pip reinstalled FlashInfer behind codemod's back
    sglang_only = ("--package", "sglang", "--python", sys.executable)
    fi_only = ("--package", "flashinfer", "--python", sys.executable)
    assert cli("revert", "sm120-enable", *fi_only).exit_code == 7
    forget = cli("revert", "sm120-enable", *fi_only, "--forget")
    assert forget.exit_code == 0, forget.output
    gone = cli("status", *fi_only)
    assert gone.exit_code == 5 and "no record" in gone.stderr
    assert cli("status", *sglang_only).stdout.startswith("sm120-enable: applied"), "SGLang's record is its own"
    back = cli("revert", "sm120-enable", *sglang_only)
    assert back.exit_code == 0, back.output
    assert tree_digest(site / "sglang") == pristine_sglang
    assert comm.read_text().endswith("# reinstalled\n")


def test_multi_repo_run_with_a_stale_lock_in_the_second_is_all_or_nothing(cli, example_repo):
    first, second = example_repo("flashinfer"), example_repo("sglang")
    (second / ".git" / "index.lock").write_text("")
    before = (tree_digest(first), refs(first), tree_digest(second), refs(second))
    result = cli("run", "sm120-enable", "--repo", first, "--repo", second)
    assert result.exit_code == 5, result.output
    assert (tree_digest(first), refs(first), tree_digest(second), refs(second)) == before
    assert branches(first) == ["main"] and branches(second) == ["main"]
