"""audit.pool: the scan's workers default to the CPUs this process may use (its affinity mask, not the machine's
CPU count), and `scan --verbose` says how many (issue 35, decision 4)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from codemods.audit.pool import POOL_MINIMUM, usable_cpus

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this system")

GUARD = "#if __CUDA_ARCH__ >= 900\n__device__ int f{n}() {{ return {n}; }}\n#endif\n"


def _tree(root: Path, files: int) -> Path:
    for n in range(files):
        (root / f"k{n}.cu").parent.mkdir(parents=True, exist_ok=True)
        (root / f"k{n}.cu").write_text(GUARD.format(n=n))
    return root


def _scan_on(cpus: set[int], root: Path) -> subprocess.CompletedProcess:
    """`codemod scan --verbose` in a process that may run only on `cpus`."""
    return subprocess.run(
        [sys.executable, "-m", "codemods", "scan", "--repo", str(root), "--no-cache", "--verbose", "--quiet"],
        capture_output=True, text=True, preexec_fn=lambda: os.sched_setaffinity(0, cpus), check=False,
    )


def test_usable_cpus_is_the_affinity_mask():
    assert usable_cpus() == len(os.sched_getaffinity(0))


def test_verbose_says_how_many_cpus_the_scan_may_use_and_uses_them(tmp_path):
    root = _tree(tmp_path / "t", POOL_MINIMUM + 8)  # enough files for a pool
    mine = os.sched_getaffinity(0)
    proc = _scan_on(mine, root)
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stderr.splitlines() if line.startswith("scanned "))
    assert f"cpus {len(mine)}, jobs {len(mine)}," in line
    assert f"files {POOL_MINIMUM + 8}" in line


def test_one_allowed_cpu_means_one_worker_on_a_machine_with_more(tmp_path):
    root = _tree(tmp_path / "t", POOL_MINIMUM + 8)
    proc = _scan_on({min(os.sched_getaffinity(0))}, root)
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stderr.splitlines() if line.startswith("scanned "))
    assert "cpus 1, jobs 1," in line  # os.cpu_count() would say every CPU of the machine
