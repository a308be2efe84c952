"""The default test run is the fast set; `--all` (or `-m ""`) adds the tests marked real, slow or exhaustive."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def collect(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests/test_plain_clone.py", *args],
        cwd=ROOT, capture_output=True, text=True,
    )


def ids(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stdout.splitlines() if "::" in line]


def test_the_default_run_leaves_out_the_real_releases_and_all_brings_them_back():
    default = collect()
    assert default.returncode == 5, default.stdout + default.stderr  # pytest's "no tests ran": every test here is real
    assert "deselected" in default.stdout
    everything = collect("--all")
    assert everything.returncode == 0, everything.stdout + everything.stderr
    assert "deselected" not in everything.stdout and "test_plain_clone.py::" in everything.stdout
    assert ids(collect("-m", "")) == ids(everything) != []
