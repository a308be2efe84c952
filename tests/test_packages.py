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


# ------------------------------------------------------------------ the folder codemod runs in is not trusted

SHADOWS = ("json", "sysconfig", "site", "zipfile", "csv", "email", "pathlib", "importlib", "tvm_ffi")


def hostile_folder(root, marker):
    """A folder (an inspected tree) whose stdlib-named modules and fake dist-info would answer codemod's probes."""
    root.mkdir()
    for name in SHADOWS:
        (root / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write('{name}\\n')\n")
    fake = root / "flashinfer_python-9.9.9.dist-info"
    fake.mkdir()
    (fake / "METADATA").write_text("Metadata-Version: 2.1\nName: flashinfer-python\nVersion: 9.9.9\n")
    (fake / "RECORD").write_text("")
    return root


def test_python_lookups_never_import_from_the_current_folder(cli, tmp_path, monkeypatch):
    site = fake_site(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(site))
    marker = tmp_path / "marker"
    monkeypatch.chdir(hostile_folder(tmp_path / "tree", marker))
    result = cli("status", "--package", "flashinfer", "--python", sys.executable)
    assert not marker.exists(), f"the folder's modules ran: {marker.read_text()}"
    assert f"{site / 'flashinfer'}: not inside a git work tree, and codemod has no record of it" in result.stderr  # nothing applied yet
    assert "9.9.9" not in result.output and str(tmp_path / "tree") not in result.output
    scanned = cli("scan", "--package", "flashinfer", "--python", sys.executable, "--arch", "sm_120", "--format", "json")
    assert scanned.exit_code == 0, scanned.output
    assert not marker.exists()


def test_a_fake_dist_info_in_the_current_folder_does_not_redirect_package(cli, tmp_path, monkeypatch):
    site = fake_site(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.chdir(hostile_folder(tmp_path / "tree", tmp_path / "marker"))
    monkeypatch.syspath_prepend("")  # `python -m codemods` run in that folder
    from importlib import invalidate_caches

    invalidate_caches()
    result = cli("status", "--package", "flashinfer")
    assert f"{site / 'flashinfer'}: not inside a git work tree" in result.stderr, result.output
    assert "9.9.9" not in result.output and str(tmp_path / "tree") not in result.output


def test_the_tvm_ffi_probe_of_verify_build_never_imports_from_the_current_folder(tmp_path, monkeypatch):
    from codemods.prove.compile import find_tvm_ffi

    marker = tmp_path / "marker"
    monkeypatch.chdir(hostile_folder(tmp_path / "tree", marker))
    for python in (None, sys.executable):
        include, python_include = find_tvm_ffi(python)
        assert include.endswith("/include") and str(tmp_path / "tree") not in include + python_include
    assert not marker.exists(), f"the folder's modules ran: {marker.read_text()}"


def test_run_dry_run_with_python_never_imports_from_the_current_folder(cli, tmp_path, monkeypatch):
    site = fake_site(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(site))
    marker = tmp_path / "marker"
    monkeypatch.chdir(hostile_folder(tmp_path / "tree", marker))
    result = cli("run", "sm120-enable", "--package", "flashinfer", "--python", sys.executable, "--dry-run")
    assert not marker.exists(), f"the folder's modules ran: {marker.read_text()}"
    assert result.exit_code == 0 and "9.9.9" not in result.output, result.output
