"""Kill run and revert at every step boundary (SIGKILL), then recover both ways; never lose a byte.

codemod runs under tests/fault_runner.py, which SIGKILLs it at the step named
by CODEMOD_TEST_KILL_AT=<step>[#n]. Each case hashes the tree before, after
recovery by a second `run`, and after `revert`. One case per (layout, step,
recovery): they are marked `slow` and run in CI.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import EXAMPLES, IDENTITY, ROOT, git, init_repo, tree_digest

RUN_STEPS_GIT = [
    "repo-ready", "journal-written", "branch-created",
    "written#1", "committed#1", "written#2", "committed#2", "journal-cleared",
]
RUN_STEPS_SHADOW = ["shadow-ready", "base-recorded"] + RUN_STEPS_GIT[1:]
FAULT_RUNNER = ROOT / "tests" / "fault_runner.py"
RUN_CASES = [(False, step) for step in RUN_STEPS_GIT] + [(True, step) for step in RUN_STEPS_SHADOW]
REVERT_STEPS = ["revert-journal-written", "base-checked-out", "branch-deleted", "revert-journal-cleared"]


def codemod(*args, kill_at=None, pause_at=None, env_extra=None):
    env = {**os.environ, **IDENTITY, "PYTHONPATH": str(ROOT)}
    env.pop("CODEMOD_TEST_KILL_AT", None)
    if kill_at:
        env["CODEMOD_TEST_KILL_AT"] = kill_at
    if pause_at:
        env["CODEMOD_TEST_PAUSE_AT"] = pause_at
    env.update(env_extra or {})
    return subprocess.run([sys.executable, str(FAULT_RUNNER), *map(str, args)], env=env, capture_output=True, text=True, timeout=120)


def make_tree(tmp_path, shadow: bool):
    tree = tmp_path / ("site" if shadow else "repo")
    shutil.copytree(EXAMPLES / "flashinfer", tree)
    if not shadow:
        init_repo(tree)
    return tree


@pytest.fixture(scope="session")
def patched_digest(tmp_path_factory):
    """The tree digest after an uninterrupted run (the target of every recovery)."""
    tree = make_tree(tmp_path_factory.mktemp("reference"), shadow=True)
    assert codemod("run", "sm120-enable", "--repo", tree).returncode == 0
    return tree_digest(tree)


@pytest.mark.slow
@pytest.mark.parametrize(
    "shadow, step", RUN_CASES, ids=[f"{'installed-package' if sh else 'git-checkout'}-{st}" for sh, st in RUN_CASES]
)
@pytest.mark.parametrize("then", ["run-again", "revert"])
def test_run_killed_at_every_step(tmp_path, patched_digest, shadow, step, then):
    tree = make_tree(tmp_path, shadow)
    pristine = tree_digest(tree)
    killed = codemod("run", "sm120-enable", "--repo", tree, kill_at=step)
    assert killed.returncode == -signal.SIGKILL, (step, killed.stderr)

    status = codemod("status", "--repo", tree)
    if step not in ("repo-ready", "shadow-ready", "base-recorded", "journal-cleared"):
        assert "interrupted: `run sm120-enable`" in status.stdout, (step, status.stdout, status.stderr)

    if then == "run-again":
        again = codemod("run", "sm120-enable", "--repo", tree)
        assert again.returncode == 0, (step, again.stderr)
        assert tree_digest(tree) == patched_digest, step
        assert codemod("status", "--repo", tree).stdout.startswith("sm120-enable: applied"), step
    back = codemod("revert", "sm120-enable", "--repo", tree)
    if then == "revert" and step in ("repo-ready", "shadow-ready", "base-recorded"):
        assert back.returncode == 7 and "is not applied" in back.stderr, (step, back.stderr)
    else:
        assert back.returncode == 0, (step, back.stderr)
    assert tree_digest(tree) == pristine, step
    assert "codemod/" not in codemod("status", "--repo", tree).stdout
    if not shadow:
        assert git(tree, "branch", "--format=%(refname:short)").split() == ["main"], step
        assert git(tree, "status", "--porcelain") == "", step
    else:
        assert not (tree / ".git").exists()
    assert not list(tree.rglob("*.codemod-tmp")), step


@pytest.mark.slow
@pytest.mark.parametrize("step", REVERT_STEPS)
@pytest.mark.parametrize("shadow", [False, True], ids=["git-checkout", "installed-package"])
def test_revert_killed_at_every_step(tmp_path, shadow, step):
    tree = make_tree(tmp_path, shadow)
    pristine = tree_digest(tree)
    assert codemod("run", "sm120-enable", "--repo", tree).returncode == 0
    killed = codemod("revert", "sm120-enable", "--repo", tree, kill_at=step)
    assert killed.returncode == -signal.SIGKILL, (step, killed.stderr)
    finish = codemod("revert", "sm120-enable", "--repo", tree)
    if step == "revert-journal-cleared":
        assert finish.returncode == 7, (step, finish.stderr)  # it had finished
    else:
        assert finish.returncode == 0, (step, finish.stderr)
    assert tree_digest(tree) == pristine, step
    again = codemod("run", "sm120-enable", "--repo", tree)
    assert again.returncode == 0, (step, again.stderr)


def test_second_concurrent_run_refused_and_first_completes(tmp_path):
    tree = make_tree(tmp_path, shadow=False)
    gate = tmp_path / "release"
    env = {**os.environ, **IDENTITY, "PYTHONPATH": str(ROOT), "CODEMOD_TEST_PAUSE_AT": f"branch-created:{gate}"}
    first = subprocess.Popen([sys.executable, str(FAULT_RUNNER), "run", "sm120-enable", "--repo", str(tree)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "release.reached").exists():
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.05)
    second = codemod("run", "sm120-enable", "--repo", tree)
    assert second.returncode == 10
    assert f"another codemod is working on this repository (pid {first.pid}: run sm120-enable" in second.stderr
    assert codemod("revert", "sm120-enable", "--repo", tree).returncode == 10
    gate.write_text("go")
    out, errs = first.communicate(timeout=60)
    assert first.returncode == 0, errs
    assert len(git(tree, "log", "--format=%H", "main..codemod/sm120-enable").split()) == 2


def test_stale_lock_is_taken_over_with_a_message(tmp_path):
    tree = make_tree(tmp_path, shadow=False)
    killed = codemod("run", "sm120-enable", "--repo", tree, kill_at="written#1")
    assert killed.returncode == -signal.SIGKILL
    again = codemod("run", "sm120-enable", "--repo", tree)
    assert again.returncode == 0, again.stderr
    assert "took over the lock of an interrupted codemod" in again.stderr
    assert "recovered from an interrupted `run sm120-enable` (stopped after step written:flashinfer.trtllm-comm-jit)" in again.stderr


def test_user_edit_after_crash_is_never_overwritten(tmp_path):
    tree = make_tree(tmp_path, shadow=False)
    assert codemod("run", "sm120-enable", "--repo", tree, kill_at="written#1").returncode == -signal.SIGKILL
    comm = tree / "flashinfer/jit/comm.py"
    mine = comm.read_bytes() + b"# my edit after the crash\n"
    comm.write_bytes(mine)
    for args in (("run", "sm120-enable"), ("revert", "sm120-enable")):
        refused = codemod(*args, "--repo", tree)
        assert refused.returncode == 5 and "changed after codemod's interrupted run" in refused.stderr
        assert comm.read_bytes() == mine
