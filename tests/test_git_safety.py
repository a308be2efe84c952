"""codemod never runs a program that the inspected tree, its .git or a git config key names, and never adopts a
repository that is not the target's own. Every case plants a marker command and asserts it never ran."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import fake_site, git, tree_digest

COMM = "flashinfer/jit/comm.py"
HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"


def marker(tmp_path: Path) -> tuple[Path, Path]:
    """A script that logs its first argument and passes stdin through (so a filter that runs still works), and its log."""
    log = tmp_path / "MARKER"
    script = tmp_path / "bin" / "mark"
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"#!/bin/sh\necho \"$1\" >> '{log}'\nexec cat\n")
    script.chmod(0o755)
    return script, log


def plant_program_keys(repo: Path, mark: Path) -> None:
    """Every config key that makes git start a program, in the repository's own .git (which a tarball ships)."""
    keys = {
        "core.fsmonitor": f"{mark} fsmonitor",
        "core.pager": f"{mark} pager",
        "pager.status": f"{mark} pager.status",
        "diff.external": f"{mark} diff.external",
        "diff.evil.textconv": f"{mark} textconv",
        "diff.evil.command": f"{mark} diff.command",
        "filter.evil.clean": f"{mark} clean",
        "filter.evil.smudge": f"{mark} smudge",
        "filter.evil.process": f"{mark} process",
        "filter.evil.required": "true",
        "merge.evil.driver": f"{mark} merge",
        "core.sshCommand": f"{mark} ssh",
        "core.editor": f"{mark} editor",
        "sequence.editor": f"{mark} sequence.editor",
        "credential.helper": f"!{mark} credential",
        "gpg.program": f"{mark} gpg",
        "commit.gpgSign": "true",
        "core.alternateRefsCommand": f"{mark} alternateRefs",
        "filter.x=y.clean": f"{mark} clean-x=y",  # a driver name a `-c key=value` could not carry
        "filter.x=y.smudge": f"{mark} smudge-x=y",
    }
    for key, value in keys.items():
        git(repo, "config", key, value)
    # attributes in .git/info (no change to the tree) select the drivers for every file
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("* filter=evil diff=evil merge=evil\n*.cuh filter=x=y\n")


def plant_environment(monkeypatch, mark: Path, elsewhere: Path) -> None:
    """GIT_* variables a user's shell may carry: none may redirect codemod's git or run a program."""
    for name in ("GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_SSH_COMMAND", "GIT_EDITOR", "GIT_ASKPASS"):
        monkeypatch.setenv(name, f"{mark} env-{name}")
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='{mark} env-parameters'")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", f"{mark} env-count")
    monkeypatch.setenv("GIT_DIR", str(elsewhere / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(elsewhere))
    monkeypatch.setenv("GIT_INDEX_FILE", str(elsewhere / ".git" / "index"))


def test_the_planted_keys_do_run_for_plain_git(example_repo, tmp_path):
    """The control: the same planted config runs the marker for a plain `git status` and `git diff`."""
    repo = example_repo("flashinfer")
    mark, log = marker(tmp_path)
    plant_program_keys(repo, mark)
    (repo / COMM).write_bytes((repo / COMM).read_bytes() + b"# edit\n")
    subprocess.run(["git", "status"], cwd=repo, capture_output=True)
    subprocess.run(["git", "diff"], cwd=repo, capture_output=True)
    ran = set(log.read_text().split())
    assert "fsmonitor" in ran and ran & {"clean", "process"}, ran


def test_no_command_runs_a_program_the_repository_names(cli, example_repo, tmp_path, monkeypatch):
    repo = example_repo("flashinfer")
    elsewhere = example_repo("sglang")
    mark, log = marker(tmp_path)
    plant_program_keys(repo, mark)
    plant_environment(monkeypatch, mark, elsewhere)
    other_refs = git(elsewhere, "for-each-ref")
    steps = [
        (("scan", "--repo", repo, "--arch", "sm_120"), {0, 1}),  # 1: --check not asked; any finding exit is fine
        (("run", "sm120-enable", "--repo", repo, "--dry-run"), {0}),
        (("run", "sm120-enable", "--repo", repo), {0}),
        (("status", "--repo", repo), {0}),
        (("verify", "--repo", repo), {0}),
        (("verify", "--build", "--repo", repo, "--arch", "sm_120", "--archs", "sm_90,sm_120"), {0, 1, 11, 13}),  # git is read before the build refuses
        (("revert", "sm120-enable", "--repo", repo, "--dry-run"), {0}),
        (("revert", "sm120-enable", "--repo", repo), {0}),
    ]
    for args, codes in steps:
        result = cli(*args)
        assert result.exit_code in codes, (args, result.output)
        assert "internal error" not in result.output, (args, result.output)
        assert not log.exists(), (args, log.read_text())
    assert git(elsewhere, "for-each-ref") == other_refs  # GIT_DIR from the environment was not followed
    assert "codemod/sm120-enable" not in git(repo, "branch")


def test_run_makes_unsigned_commits_without_running_gpg_program(cli, example_repo, tmp_path):
    """commit.gpgsign makes git start gpg.program, a key of the repository's config: codemod's commits are not signed."""
    repo = example_repo("flashinfer")
    mark, log = marker(tmp_path)
    git(repo, "config", "commit.gpgsign", "true")
    git(repo, "config", "gpg.program", str(mark))
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0, result.output
    assert not log.exists()
    assert git(repo, "log", "-1", "--format=%G?", "codemod/sm120-enable").strip() == "N"
    assert cli("revert", "sm120-enable", "--repo", repo).exit_code == 0
    assert not log.exists()


# ------------------------------------------------------------------ installed packages keep their bytes (shadow repo)

SITE_COMM = "flashinfer/jit/comm.py"
SITE_HEADER = "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"


def _global_config(tmp_path: Path, monkeypatch, text: str) -> None:
    config = tmp_path / "global.gitconfig"
    config.write_text(text)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))


@pytest.mark.parametrize(
    "setup",
    [
        pytest.param("autocrlf", id="global-core.autocrlf=true"),
        pytest.param("eol-crlf", id="gitattributes-eol=crlf-in-the-folder"),
        pytest.param("global-filter", id="global-attributes-and-filter"),
    ],
)
def test_shadow_run_and_revert_keep_lf_bytes(cli, tmp_path, monkeypatch, setup):
    site = fake_site(tmp_path)
    mark, log = marker(tmp_path)
    if setup == "autocrlf":
        _global_config(tmp_path, monkeypatch, "[core]\n\tautocrlf = true\n")
    elif setup == "eol-crlf":
        (site / "flashinfer" / ".gitattributes").write_text("* text eol=crlf\n")
    else:
        (tmp_path / "attributes").write_text("* filter=mine\n")
        _global_config(tmp_path, monkeypatch, f"[core]\n\tattributesFile = {tmp_path / 'attributes'}\n"
                       f"[filter \"mine\"]\n\tclean = {mark} clean\n\tsmudge = {mark} smudge\n")
    pristine = tree_digest(site)
    result = cli("run", "sm120-enable", "--repo", site)
    assert result.exit_code == 0, result.output
    for rel in (SITE_COMM, SITE_HEADER):
        data = (site / rel).read_bytes()
        assert b"\r" not in data, rel
    assert b"[9, 10, 12]" in (site / SITE_COMM).read_bytes()
    assert cli("status", "--repo", site).stdout.startswith("sm120-enable: applied")
    back = cli("revert", "sm120-enable", "--repo", site)
    assert back.exit_code == 0, back.output
    assert tree_digest(site) == pristine
    assert not log.exists()


def test_shadow_ignores_the_folders_gitignore(cli, tmp_path):
    site = fake_site(tmp_path)
    (site / ".gitignore").write_text("*.py\n*.cuh\n")
    (site / "flashinfer" / ".gitignore").write_text("*\n")
    pristine = tree_digest(site)
    result = cli("run", "sm120-enable", "--repo", site)
    assert result.exit_code == 0, result.output
    assert "internal error" not in result.output
    assert b"[9, 10, 12]" in (site / SITE_COMM).read_bytes()
    back = cli("revert", "sm120-enable", "--repo", site)
    assert back.exit_code == 0, back.output
    assert tree_digest(site) == pristine


def test_a_git_repository_shipped_inside_the_installed_files_is_refused(cli, tmp_path):
    site = fake_site(tmp_path)
    mark, log = marker(tmp_path)
    subprocess.run(["git", "init", "-q", str(site / "flashinfer")], check=True)
    git(site / "flashinfer", "config", "core.fsmonitor", f"{mark} fsmonitor")
    pristine = tree_digest(site)
    result = cli("run", "sm120-enable", "--repo", site)
    assert result.exit_code == 5, result.output
    assert "hold a git repository of their own" in result.stderr and "rm -rf" in result.stderr
    assert "internal error" not in result.output
    assert tree_digest(site) == pristine
    assert not log.exists()


# ------------------------------------------------------------------ a .git that is not the target's repository


def _unrelated_repo(example_repo, tmp_path) -> tuple[Path, Path]:
    other = example_repo("sglang")
    mark, log = marker(tmp_path)
    git(other, "config", "core.fsmonitor", f"{mark} fsmonitor")
    return other, log


def _unpacked(tmp_path: Path) -> Path:
    """An unpacked release of the example FlashInfer tree: no repository of its own."""
    import shutil

    from conftest import EXAMPLES

    dest = tmp_path / "unpacked" / "flashinfer-0.6.3"
    shutil.copytree(EXAMPLES / "flashinfer", dest)
    return dest


COMMANDS = [
    pytest.param(("scan", "--arch", "sm_120"), id="scan"),
    pytest.param(("run", "sm120-enable", "--dry-run"), id="run-dry-run"),
    pytest.param(("run", "sm120-enable"), id="run"),
    pytest.param(("status",), id="status"),
]


@pytest.mark.parametrize("args", COMMANDS)
def test_gitfile_to_an_unrelated_repository_is_refused(cli, example_repo, tmp_path, args):
    other, log = _unrelated_repo(example_repo, tmp_path)
    tree = _unpacked(tmp_path)
    (tree / ".git").write_text(f"gitdir: {other / '.git'}\n")
    before_refs, before_head = git(other, "for-each-ref"), (other / ".git" / "HEAD").read_bytes()
    result = cli(*args, "--repo", tree)
    assert result.exit_code == 5, result.output
    assert "is not this folder's repository" in result.stderr and f"the repository of {other}" in result.stderr
    assert "codemod scan --all" in result.stderr and "internal error" not in result.output
    assert not log.exists()
    assert git(other, "for-each-ref") == before_refs and (other / ".git" / "HEAD").read_bytes() == before_head


def test_symlinked_dot_git_to_an_unrelated_repository_is_refused(cli, example_repo, tmp_path):
    other, log = _unrelated_repo(example_repo, tmp_path)
    tree = _unpacked(tmp_path)
    (tree / ".git").symlink_to(other / ".git")
    result = cli("scan", "--repo", tree, "--arch", "sm_120")
    assert result.exit_code == 5, result.output
    assert f"the repository of {other}" in result.stderr
    assert not log.exists()


@pytest.mark.parametrize("pointer", ["gitdir: .evil\n", "gitdir: /nonexistent/place\n", "not a pointer\n", "FIFO"])
def test_gitfile_to_no_repository_is_refused(cli, tmp_path, pointer):
    tree = _unpacked(tmp_path)
    (tree / ".evil").mkdir()
    if pointer == "FIFO":
        os.mkfifo(tree / ".git")  # opening it would wait forever
    else:
        (tree / ".git").write_text(pointer)
    for args in (("scan", "--arch", "sm_120"), ("run", "sm120-enable", "--dry-run"), ("status",)):
        result = cli(*args, "--repo", tree)
        assert result.exit_code == 5, (args, result.output)
        assert "is not this folder's repository" in result.stderr, (args, result.output)


def test_core_worktree_naming_another_folder_is_refused(cli, example_repo, tmp_path):
    other, log = _unrelated_repo(example_repo, tmp_path)
    tree = _unpacked(tmp_path)
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    git(tree, "config", "core.worktree", str(other))
    git(tree, "config", "core.fsmonitor", f"{tmp_path / 'bin' / 'mark'} fsmonitor")
    for args in (("scan", "--arch", "sm_120"), ("run", "sm120-enable", "--dry-run"), ("status",)):
        result = cli(*args, "--repo", tree)
        assert result.exit_code == 5, (args, result.output)
        assert f"its config names {other} as the work tree" in result.stderr, (args, result.output)
    assert not log.exists()


def test_a_separate_git_dir_is_used_once_it_names_the_folder(cli, tmp_path):
    tree = _unpacked(tmp_path)
    store = tmp_path / "store.git"
    subprocess.run(["git", "init", "-q", f"--separate-git-dir={store}", str(tree)], check=True)
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "base")
    refused = cli("run", "sm120-enable", "--dry-run", "--repo", tree)
    assert refused.exit_code == 5, refused.output
    assert "a repository that names no work tree" in refused.stderr and "core.worktree" in refused.stderr
    git(tree, "config", "core.worktree", str(tree))  # the user says so, in a repository the tree cannot write
    assert cli("run", "sm120-enable", "--dry-run", "--repo", tree).exit_code == 0
    assert cli("scan", "--repo", tree, "--arch", "sm_120").exit_code in (0, 1)


def test_linked_worktree_and_submodule_are_the_folders_own(cli, example_repo, tmp_path):
    repo = example_repo("flashinfer")
    second = tmp_path / "second"
    git(repo, "worktree", "add", "-q", "-b", "other", str(second))
    assert cli("run", "sm120-enable", "--dry-run", "--repo", second).exit_code == 0
    assert cli("status", "--repo", second).exit_code == 0
    outer = tmp_path / "outer"
    outer.mkdir()
    (outer / "README").write_text("outer\n")
    git(outer, "init", "-q", "-b", "main")
    git(outer, "add", "-A")
    git(outer, "commit", "-q", "-m", "outer")
    git(outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(repo), "fi")
    assert (outer / "fi" / ".git").is_file()
    assert cli("run", "sm120-enable", "--dry-run", "--repo", outer / "fi").exit_code == 0
    assert cli("scan", "--repo", outer, "--arch", "sm_120").exit_code in (0, 1)


def test_a_symlink_into_dot_git_is_never_read_or_written(cli, example_repo):
    repo = example_repo("flashinfer")
    hidden = repo / ".git" / "info" / "comm.py"
    hidden.write_bytes((repo / COMM).read_bytes())
    (repo / COMM).unlink()
    (repo / COMM).symlink_to(os.path.relpath(hidden, (repo / COMM).parent))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "comm.py is a symlink into .git")
    before = hidden.read_bytes()
    for args in (("run", "sm120-enable", "--dry-run"), ("run", "sm120-enable")):
        result = cli(*args, "--repo", repo)
        assert result.exit_code == 9, (args, result.output)
        assert "inside git's own folder" in result.stderr and "internal error" not in result.output
    assert hidden.read_bytes() == before


# ------------------------------------------------------------------ a second worktree of the same repository


def test_second_worktree_status_revert_and_run_say_what_git_allows(cli, example_repo, tmp_path):
    repo = example_repo("flashinfer")
    assert cli("run", "sm120-enable", "--repo", repo).exit_code == 0
    second = tmp_path / "second"
    git(repo, "worktree", "add", "-q", str(second), "main")
    branch = "codemod/sm120-enable"

    status = cli("status", "--repo", second)
    assert status.exit_code == 0, status.output
    assert f"applied on {branch}, checked out in the worktree {repo}, not in {second}" in status.stdout
    assert f"applied in {second}" not in status.stdout
    data = json.loads(cli("status", "--repo", second, "--format", "json").stdout)
    (record,) = data["results"][0]["applied"]
    assert (record["current"], record["worktree"]) == (False, str(repo))
    assert cli("status", "--repo", repo).stdout.startswith(f"sm120-enable: applied in {repo} on {branch} (checked out)")

    for args in (("revert", "sm120-enable", "--dry-run"), ("revert", "sm120-enable")):
        refused = cli(*args, "--repo", second)
        assert refused.exit_code == 7, (args, refused.output)
        assert f"checked out in the worktree {repo}" in refused.stderr
        assert f"codemod revert sm120-enable --repo {repo}" in refused.stderr
        assert "delete branch" not in refused.stdout
    assert branch in git(repo, "branch")

    again = cli("run", "sm120-enable", "--repo", second)
    assert again.exit_code == 5, again.output
    assert f"checked out in the worktree {repo}" in again.stderr and "git checkout" not in again.stderr

    for args in (("revert", "sm120-enable", "--dry-run"), ("revert", "sm120-enable")):
        refused = cli(*args, "--repo", repo)  # back to main, which the second worktree has checked out
        assert refused.exit_code == 7, (args, refused.output)
        assert f"the base branch main is checked out in the worktree {second}" in refused.stderr
        assert "switch --detach" in refused.stderr and "internal error" not in refused.output
    git(second, "switch", "-q", "--detach")
    assert cli("revert", "sm120-enable", "--repo", repo).exit_code == 0
    assert branch not in git(repo, "branch")


def test_a_submodules_own_config_runs_nothing(cli, example_repo, tmp_path):
    """git looks into submodules (status, diff against the work tree) with a git of their own config: none of it runs."""
    repo = example_repo("flashinfer")
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "kernel.cuh").write_text("// inner\n")
    git(inner, "init", "-q", "-b", "main")
    git(inner, "add", "-A")
    git(inner, "commit", "-q", "-m", "inner")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "3rdparty/inner")
    git(repo, "commit", "-q", "-m", "submodule")
    mark, log = marker(tmp_path)
    module_git = repo / ".git" / "modules" / "3rdparty" / "inner"
    for key, value in {"filter.evil.clean": f"{mark} sub-clean", "filter.evil.process": f"{mark} sub-process",
                       "diff.evil.textconv": f"{mark} sub-textconv", "core.fsmonitor": f"{mark} sub-fsmonitor"}.items():
        subprocess.run(["git", "--git-dir", str(module_git), "config", key, value], check=True)
    (module_git / "info").mkdir(exist_ok=True)
    (module_git / "info" / "attributes").write_text("* filter=evil diff=evil\n")
    edited = repo / "3rdparty" / "inner" / "kernel.cuh"
    edited.write_text("// inner, edited\n")  # a dirty submodule: git must read it to say so
    subprocess.run(["git", "diff", "--name-only", "HEAD", "--"], cwd=repo, capture_output=True)
    assert "sub-fsmonitor" in log.read_text()  # the control: plain git runs the submodule's own
    log.unlink()
    for args in (("scan", "--arch", "sm_120"), ("run", "sm120-enable", "--dry-run"), ("run", "sm120-enable"),
                 ("status",), ("verify",), ("revert", "sm120-enable")):
        result = cli(*args, "--repo", repo)
        assert result.exit_code in (0, 1), (args, result.output)
        assert not log.exists(), (args, log.read_text())
