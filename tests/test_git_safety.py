"""codemod never runs a program that the inspected tree, its .git or a git config key names, and never adopts a
repository that is not the target's own. Every case plants a marker command and asserts it never ran."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import IDENTITY, git, tree_digest

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
    }
    for key, value in keys.items():
        git(repo, "config", key, value)
    # attributes in .git/info (no change to the tree) select the drivers for every file
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("* filter=evil diff=evil merge=evil\n")


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
