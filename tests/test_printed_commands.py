"""Every command codemod prints for the user to paste works when pasted (issue 32 item 3).

The back-out line after `run` carries each --package and --python as given,
and paths are quoted for the shell: it is run here verbatim through a shell.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from conftest import EXAMPLES, fake_site, git, init_repo, tree_digest

BIN = str(Path(sys.executable).parent)  # where this install's `codemod` script is


def printed(stderr: str, head: str) -> str:
    (line,) = [line for line in stderr.splitlines() if head in line]
    return line.split(head, 1)[1].strip()


def paste(command: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True, text=True)


def python_env(tmp_path: Path, name: str, site: Path) -> Path:
    """A virtual environment (at `name`, under tmp_path) whose site-packages sees the fake installed packages."""
    env = tmp_path / name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    purelib = sysconfig.get_path("purelib", vars={"base": str(env), "platbase": str(env)})
    Path(purelib, "fake_site.pth").write_text(str(site) + "\n")
    return env


def test_backout_line_after_a_package_run_pastes_and_works(cli, tmp_path, monkeypatch):
    site = fake_site(tmp_path, ("flashinfer", "sglang"))
    python_env(tmp_path, "my env", site)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    pristine = tree_digest(site)
    result = cli("run", "sm120-enable", "--package", "flashinfer", "--package", "sglang", "--python", "my env/bin/python")
    assert result.exit_code == 0, result.output
    assert tree_digest(site) != pristine
    back = printed(result.stderr, "to back it out:")
    assert back == "codemod revert sm120-enable --package flashinfer --package sglang --python 'my env/bin/python'"
    pasted = paste(back, tmp_path)
    assert pasted.returncode == 0, pasted.stderr
    assert tree_digest(site) == pristine


def test_backout_line_quotes_a_repo_path_with_a_space(cli, tmp_path):
    repo = tmp_path / "my checkout" / "flash infer"
    shutil.copytree(EXAMPLES / "flashinfer", repo)
    init_repo(repo)
    pristine = tree_digest(repo)
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0, result.output
    back = printed(result.stderr, "to back it out:")
    assert back == f"codemod revert sm120-enable --repo '{repo}'"
    pasted = paste(back, tmp_path)
    assert pasted.returncode == 0, pasted.stderr
    assert tree_digest(repo) == pristine and git(repo, "branch", "--show-current").strip() == "main"


def test_hints_in_refusals_are_quoted_commands(cli, tmp_path):
    """`run` on a tree whose recipe sits on another branch names `git checkout` and `codemod revert`, pasteable."""
    repo = tmp_path / "a b"
    shutil.copytree(EXAMPLES / "flashinfer", repo)
    init_repo(repo)
    assert cli("run", "sm120-enable", "--repo", repo).exit_code == 0
    git(repo, "checkout", "-q", "main")
    refused = cli("run", "sm120-enable", "--repo", repo)
    assert refused.exit_code == 5
    commands = re.findall(r"`([^`]+)`", refused.stderr)
    assert commands == ["git checkout codemod/sm120-enable", f"codemod revert sm120-enable --repo '{repo}'"]
    pasted = paste(commands[1], tmp_path)
    assert pasted.returncode == 0, pasted.stderr


def test_status_of_an_interrupted_run_names_the_tree_in_its_way_out(cli, tmp_path):
    repo = tmp_path / "x y"
    shutil.copytree(EXAMPLES / "flashinfer", repo)
    init_repo(repo)
    base = git(repo, "rev-parse", "HEAD").strip()
    state = repo / ".git" / "codemod"
    state.mkdir()
    (state / "journal.json").write_text(
        '{"op": "run", "recipe": "sm120-enable", "branch": "codemod/sm120-enable", "base_ref": "main", '
        f'"base_sha": "{base}", "files": {{}}, "step": "journal-written", "pid": 1}}'
    )
    status = cli("status", "--repo", repo)
    (way_out,) = re.findall(r"`(codemod revert[^`]*)`", status.stdout)
    assert way_out == f"codemod revert sm120-enable --repo '{repo}'"
    pasted = paste(way_out, tmp_path)
    assert pasted.returncode == 0, pasted.stderr
    assert not (state / "journal.json").exists()


def test_backout_line_names_only_the_trees_the_run_changed(cli, tmp_path):
    """One tree already admits the arch: the pasted back-out must not stop on it with "not applied here"."""
    changed, done = tmp_path / "fi", tmp_path / "fi done"
    for repo in (changed, done):
        shutil.copytree(EXAMPLES / "flashinfer", repo)
        init_repo(repo)
    assert cli("run", "sm120-enable", "--repo", done).exit_code == 0
    git(done, "checkout", "-q", "main")
    git(done, "merge", "-q", "--ff-only", "codemod/sm120-enable")
    git(done, "branch", "-D", "codemod/sm120-enable")
    pristine = tree_digest(changed)
    result = cli("run", "sm120-enable", "--repo", changed, "--repo", done)
    assert result.exit_code == 0, result.output
    back = printed(result.stderr, "to back it out:")
    assert back == f"codemod revert sm120-enable --repo {changed}"
    pasted = paste(back, tmp_path)
    assert pasted.returncode == 0, pasted.stderr
    assert tree_digest(changed) == pristine


def test_reinstalled_package_hints_name_the_recipe_and_folder_and_paste(cli, tmp_path):
    tree = tmp_path / "site packages"
    shutil.copytree(EXAMPLES / "flashinfer", tree)
    assert cli("run", "sm120-enable", "--repo", tree).exit_code == 0
    comm = tree / "flashinfer/jit/comm.py"
    reinstalled = (EXAMPLES / "flashinfer/flashinfer/jit/comm.py").read_bytes() + b"# 0.6.4\n"
    comm.write_bytes(reinstalled)
    for args, code in ((["run", "sm120-enable"], 4), (["revert", "sm120-enable"], 7)):
        refused = cli(*args, "--repo", tree)
        assert refused.exit_code == code, refused.output
        forget = [c for c in re.findall(r"`([^`]+)`", refused.stderr) if "--forget" in c]
        assert forget == [f"codemod revert sm120-enable --forget --repo '{tree}'"]
    pasted = paste(forget[0], tmp_path)
    assert pasted.returncode == 0, pasted.stderr
    assert comm.read_bytes() == reinstalled and "codemod has no record of it" in cli("status", "--repo", tree).stderr
