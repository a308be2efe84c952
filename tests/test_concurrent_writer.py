"""A real second process appends numbered lines to a target while run, revert or a rollback works on it.

Every line it appended must be in the file afterwards, whatever the timing,
and the exit code and message must say what happened. The appender waits for
the moment codemod starts changing the repository (HEAD names the codemod
branch for `run`, the journal appears for `revert`), then appends `# edit N` lines,
each with its own open/append/close, at a given delay and interval.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import IDENTITY, ROOT, git

pytestmark = pytest.mark.slow  # 63 cases of 2-6 s: two real processes each

COMM = "flashinfer/jit/comm.py"
HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"
FAULT_RUNNER = ROOT / "tests" / "fault_runner.py"

# Waits until `sign` holds ("codemod/" in the file, or the file exists), sleeps `delay`, then appends for `duration`.
APPENDER = r"""
import os, sys, time
path, sign, want, delay, interval, duration = sys.argv[1], sys.argv[2], sys.argv[3], *map(float, sys.argv[4:7])
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        if want == "exists" and os.path.exists(sign) or want == "on" and "codemod/" in open(sign).read():
            break
    except OSError:
        pass
    time.sleep(0.0002)
time.sleep(delay)
end = time.monotonic() + duration
n = 0
while time.monotonic() < end:
    with open(path, "a") as handle:
        handle.write(f"# edit {n}\n")
    n += 1
    if interval:
        time.sleep(interval)
print(n)
"""

# (delay s, interval s): from "as the branch appears" to after codemod is done, dense to sparse.
TIMINGS = [
    (0.0, 0.0), (0.0, 0.0005), (0.0, 0.001), (0.0, 0.003), (0.001, 0.0), (0.002, 0.001), (0.003, 0.0002),
    (0.005, 0.002), (0.008, 0.0), (0.010, 0.001), (0.015, 0.0005), (0.020, 0.003), (0.030, 0.0), (0.040, 0.001),
    (0.060, 0.002), (0.080, 0.0005), (0.100, 0.001), (0.150, 0.0), (0.200, 0.002), (0.300, 0.001), (0.500, 0.003),
]
IDS = [f"delay{d * 1000:g}ms-every{i * 1000:g}ms" for d, i in TIMINGS]


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, **IDENTITY, "PYTHONPATH": str(ROOT)}
    env.pop("CODEMOD_TEST_KILL_AT", None)
    env.pop("CODEMOD_TEST_PAUSE_AT", None)
    return {**env, **extra}


def _appender(target: Path, sign: Path, want: str, delay: float, interval: float, duration: float = 0.6):
    return subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(target), str(sign), want, str(delay), str(interval), str(duration)],
        stdout=subprocess.PIPE, text=True,
    )


def _codemod(*args, **env: str):
    return subprocess.Popen([sys.executable, str(FAULT_RUNNER), *map(str, args)], env=_env(**env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _every_line_kept(text: str, appended: int) -> None:
    found = [int(n) for n in re.findall(r"^# edit (\d+)$", text, re.M)]
    missing = sorted(set(range(appended)) - set(found))
    assert not missing, f"lines lost: {missing[:20]} ({len(missing)} of {appended})"
    assert len(found) == appended, "no line is duplicated"


def _base_plus_lines(text: str, base: str) -> None:
    assert text.startswith(base), "the file is its base bytes, then the other process's lines"
    assert re.fullmatch(r"(# edit \d+\n)*", text[len(base):]), text[len(base):][:300]


@pytest.mark.parametrize("delay, interval", TIMINGS, ids=IDS)
def test_run_with_an_appender_loses_no_line(example_repo, delay, interval):
    repo = example_repo("flashinfer")
    base = (repo / COMM).read_text()
    writer = _appender(repo / COMM, repo / ".git" / "HEAD", "on", delay, interval)
    run = _codemod("run", "sm120-enable", "--repo", repo)
    out, err = run.communicate(timeout=60)
    appended = int(writer.communicate(timeout=60)[0])
    text = (repo / COMM).read_text()
    _every_line_kept(text, appended)
    assert "internal error" not in err
    if run.returncode == 5:
        assert f"{COMM} changed while codemod was working on it" in err, err
        assert "no byte of it was lost" in err, err
        _base_plus_lines(text, base)
        assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]
        assert git(repo, "log", "--format=%s").strip() == "base"
        assert git(repo, "diff", "--name-only").split() == [COMM], "only the other process's lines are uncommitted"
        assert not (repo / ".git" / "codemod" / "journal.json").exists()
    else:
        assert run.returncode == 0, err
        committed = git(repo, "show", f"codemod/sm120-enable:{COMM}")
        assert "[9, 10, 12]" in committed and "# edit" not in committed, "codemod commits only its own bytes"
        _base_plus_lines(text, committed)


@pytest.mark.parametrize("delay, interval", TIMINGS, ids=IDS)
def test_revert_with_an_appender_loses_no_line(example_repo, delay, interval):
    repo = example_repo("flashinfer")
    base = (repo / COMM).read_text()
    first = _codemod("run", "sm120-enable", "--repo", repo)
    assert first.communicate(timeout=60) and first.returncode == 0
    writer = _appender(repo / COMM, repo / ".git" / "codemod" / "journal.json", "exists", delay, interval)
    back = _codemod("revert", "sm120-enable", "--repo", repo)
    out, err = back.communicate(timeout=60)
    appended = int(writer.communicate(timeout=60)[0])
    text = (repo / COMM).read_text()
    _every_line_kept(text, appended)
    assert "internal error" not in err
    assert back.returncode == 0, err
    _base_plus_lines(text, base)
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]


@pytest.mark.parametrize("delay, interval", TIMINGS, ids=IDS)
def test_rollback_with_an_appender_loses_no_line(example_repo, tmp_path, delay, interval):
    """The run stops for another reason (the header changed) while comm.py, already written, is being appended to."""
    repo = example_repo("flashinfer")
    base = (repo / COMM).read_text()
    gate = tmp_path / "go"
    run = _codemod("run", "sm120-enable", "--repo", repo, CODEMOD_TEST_PAUSE_AT=f"committed:{gate}")
    deadline = time.monotonic() + 60
    while not Path(f"{gate}.reached").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    with open(repo / HEADER, "a") as handle:
        handle.write("// saved by an editor\n")
    writer = _appender(repo / COMM, repo / ".git" / "HEAD", "on", delay, interval)
    time.sleep(0.005)
    gate.write_text("go")
    out, err = run.communicate(timeout=60)
    appended = int(writer.communicate(timeout=60)[0])
    text = (repo / COMM).read_text()
    _every_line_kept(text, appended)
    assert run.returncode == 5, err
    assert f"{HEADER} changed while codemod was working on it" in err, err
    _base_plus_lines(text, base)
    assert (repo / HEADER).read_text().endswith("// saved by an editor\n")
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]
    assert git(repo, "log", "--format=%s").strip() == "base"


def test_a_file_held_open_for_writing_is_never_replaced(example_repo):
    """A program that keeps comm.py open for writing (a logger, an editor's swap) stops the run before it writes."""
    repo = example_repo("flashinfer")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; f = open(sys.argv[1], 'a'); print('open', flush=True); time.sleep(60)", str(repo / COMM)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        before = (repo / COMM).read_bytes()
        run = _codemod("run", "sm120-enable", "--repo", repo)
        out, err = run.communicate(timeout=60)
    finally:
        holder.kill()
        holder.wait()
    assert run.returncode == 5, err
    assert f"is open for writing in pid {holder.pid} (python" in err and "internal error" not in err, err
    assert "put back every file it had changed" in err
    assert (repo / COMM).read_bytes() == before
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]
    assert git(repo, "status", "--porcelain") == ""
