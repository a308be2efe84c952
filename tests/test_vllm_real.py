"""vLLM from PyPI beside FlashInfer 0.6.3, installed (site-packages: `sm120-enable --package vllm --package flashinfer`)
and as git trees of the unpacked wheels (`--repo`): dry-run, run, status and revert, byte for byte, on four releases:
one without the capability tables (0.11.0), one with the tables and no auto-enable (0.13.0), two with both (0.20.0,
0.34.0); and scan finding the tables in a release."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import fetch_wheel, git, init_repo, tree_digest

FUSION = "vllm/compilation/passes/fusion/allreduce_rms_fusion.py"
OLD_FUSION = "vllm/compilation/collective_fusion.py"
CONFIG = "vllm/config/vllm.py"
FLASHINFER = {"flashinfer/jit/comm.py", "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"}

# release -> the vLLM files the run changes (none: every vLLM change is absent, "not in this version")
RELEASES = {
    "0.11.0": set(),
    "0.13.0": {OLD_FUSION},
    "0.20.0": {FUSION, CONFIG},
    "0.34.0": {FUSION, CONFIG},
}


def site_with(tmp_path: Path, version: str) -> Path:
    """vLLM's Python files and dist-info (no compiled libraries: they hold no gate), and FlashInfer 0.6.3, as pip
    would install them."""
    site = tmp_path / "site"
    with zipfile.ZipFile(fetch_wheel("vllm", version)) as wheel:
        wheel.extractall(site, [n for n in wheel.namelist() if n.endswith((".py", "METADATA"))])
    with zipfile.ZipFile(fetch_wheel("flashinfer-python", "0.6.3")) as wheel:
        wheel.extractall(site)
    return site


@pytest.mark.real
@pytest.mark.parametrize("version", list(RELEASES))
def test_sm120_enable_on_installed_vllm_and_flashinfer(cli, tmp_path, monkeypatch, version):
    site = site_with(tmp_path, version)
    monkeypatch.setenv("PYTHONPATH", str(site))
    pristine = tree_digest(site)
    args = ("--package", "vllm", "--package", "flashinfer", "--python", sys.executable)

    dry = cli("run", "sm120-enable", *args, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert tree_digest(site) == pristine
    if RELEASES[version]:
        assert "row(s) 120, 121 copied from row 100, not measured" in dry.output
    else:
        assert "not in this version" in dry.output

    result = cli("run", "sm120-enable", *args)
    assert result.exit_code == 0, result.output
    changed = {k for k, v in tree_digest(site).items() if pristine.get(k) != v}
    assert changed == RELEASES[version] | FLASHINFER
    if CONFIG in changed:
        assert "or current_platform.is_device_capability_family(120)\n" in (site / CONFIG).read_text()
    for table in RELEASES[version] - {CONFIG}:
        text = (site / table).read_text()
        assert text.count("\n    120: {") == 2 and text.count("\n    121: {") == 2  # both tables
    assert not list(site.rglob(".git"))

    # where no vLLM file changed, codemod keeps no record of vLLM: status and revert name FlashInfer alone
    recorded = args if RELEASES[version] else args[2:]
    status = cli("status", *recorded)
    assert status.exit_code == 0, status.output
    assert "sm120-enable: applied in" in status.output and "flashinfer.trtllm-comm-jit" in status.output
    again = cli("run", "sm120-enable", *args)
    assert again.exit_code == 0 and "already applied" in again.output, again.output

    back = cli("revert", "sm120-enable", *recorded)
    assert back.exit_code == 0, back.output
    assert tree_digest(site) == pristine and not list(site.rglob(".git"))


@pytest.mark.real
def test_vllm_without_flashinfer_is_a_half_patch(cli, tmp_path, monkeypatch):
    """The fusion turned on in vLLM while FlashInfer's JIT still refuses SM12x: refused, exit 3, nothing written."""
    site = site_with(tmp_path, "0.34.0")
    monkeypatch.setenv("PYTHONPATH", str(site))
    pristine = tree_digest(site)
    result = cli("run", "sm120-enable", "--package", "vllm", "--python", sys.executable)
    assert result.exit_code == 3, result.output
    assert "vllm.allreduce-fusion-max-size needs flashinfer.trtllm-comm-jit, which is in flashinfer" in result.stderr
    assert tree_digest(site) == pristine and not list(site.rglob(".git"))
    left_out = cli("run", "sm120-enable", "--package", "vllm", "--package", "flashinfer", "--python", sys.executable,
                   "--skip", "flashinfer.trtllm-allreduce-guards")
    assert left_out.exit_code == 3, left_out.output
    assert "needs flashinfer.trtllm-allreduce-guards, which is left out" in left_out.stderr
    assert tree_digest(site) == pristine


@pytest.mark.real
@pytest.mark.parametrize("version", list(RELEASES))
def test_sm120_enable_on_git_trees_of_the_wheels(cli, tmp_path, version):
    site = site_with(tmp_path, version)
    vllm, flashinfer = tmp_path / "vllm-tree", tmp_path / "flashinfer-tree"
    (vllm).mkdir()
    (site / "vllm").rename(vllm / "vllm")
    (flashinfer).mkdir()
    (site / "flashinfer").rename(flashinfer / "flashinfer")
    init_repo(vllm), init_repo(flashinfer)
    before = tree_digest(vllm), tree_digest(flashinfer)
    repos = ("--repo", vllm, "--repo", flashinfer)
    dry = cli("run", "sm120-enable", *repos, "--dry-run")
    assert dry.exit_code == 0, dry.output
    result = cli("run", "sm120-enable", *repos)
    assert result.exit_code == 0, result.output
    assert set(git(vllm, "diff", "--name-only", "main", "HEAD").split()) == RELEASES[version]
    assert set(git(flashinfer, "diff", "--name-only", "main", "HEAD").split()) == FLASHINFER
    recorded = repos if RELEASES[version] else repos[2:]
    status = cli("status", *recorded)
    assert status.exit_code == 0, status.output
    back = cli("revert", "sm120-enable", *recorded)
    assert back.exit_code == 0, back.output
    assert (tree_digest(vllm), tree_digest(flashinfer)) == before
    assert git(vllm, "branch", "--show-current").strip() == "main"


@pytest.mark.real
def test_scan_finds_the_size_tables_and_the_auto_enable_gate_in_a_release(cli, tmp_path):
    site = site_with(tmp_path, "0.34.0")
    result = cli("scan", "--repo", site / "vllm", "--arch", "sm_120", "--format", "json")
    assert result.exit_code == 0, result.output
    gates = json.loads(result.stdout)["gates"]
    found = {(g["file"], g["kind"], g["symbol"]) for g in gates if g["excludes_arch"]}
    assert ("compilation/passes/fusion/allreduce_rms_fusion.py", "python_arch_map", "FI_ALLREDUCE_FUSION_MAX_SIZE_MB") in found
    assert ("compilation/passes/fusion/allreduce_rms_fusion.py", "python_arch_map", "_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB") in found
    assert ("config/vllm.py", "python_arch_call", "enable_allreduce_rms_fusion") in found
