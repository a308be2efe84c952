"""--package: installed distributions found with importlib.metadata, patched through a shadow repo."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import fake_site, fetch_wheel, tree_digest

COMM = "flashinfer/jit/comm.py"
HEADER = "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"


def test_package_via_python(cli, tmp_path, monkeypatch):
    site = fake_site(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(site))
    pristine = tree_digest(site)
    args = ("--package", "flashinfer", "--python", sys.executable)
    result = cli("run", "sm120-enable", *args)
    assert result.exit_code == 0, result.output
    assert b"[9, 10, 12]" in (site / COMM).read_bytes()
    assert (site / HEADER).read_text().count("__CUDA_ARCH__ >= 900))\n") == 4
    assert not (site / ".git").exists() and not list(site.rglob("*.orig"))
    assert cli("status", *args).stdout.startswith("sm120-enable: applied")
    back = cli("revert", "sm120-enable", *args)
    assert back.exit_code == 0, back.output
    assert tree_digest(site) == pristine


def test_missing_package_is_clear(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    result = cli("run", "sm120-enable", "--package", "flashinfer", "--python", sys.executable)
    assert result.exit_code == 6
    assert "no installed distribution flashinfer-python or flashinfer" in result.stderr


@pytest.mark.real
def test_real_wheels_installed_with_pip(cli, tmp_path, monkeypatch):
    """pip-installed 0.6.3/0.5.8 (no deps): run --package both, revert, every byte back, no .git."""
    site = tmp_path / "site"
    wheels = [fetch_wheel("flashinfer-python", "0.6.3"), fetch_wheel("sglang", "0.5.8")]
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--no-index", "--target", str(site), *map(str, wheels)],
        check=True,
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    pristine = tree_digest(site)
    args = ("--package", "flashinfer", "--package", "sglang", "--python", sys.executable)
    result = cli("run", "sm120-enable", *args)
    assert result.exit_code == 0, result.output
    changed = {k for k, v in tree_digest(site).items() if pristine.get(k) != v}
    assert changed == {
        COMM, HEADER, "sglang/srt/layers/communicator.py", "sglang/srt/server_args.py",
    }
    assert not list(site.rglob(".git"))
    back = cli("revert", "sm120-enable", *args)
    assert back.exit_code == 0, back.output
    assert tree_digest(site) == pristine and not list(site.rglob(".git"))
