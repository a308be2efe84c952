"""`scan` on what users really have: a plain `git clone` whose submodules are not initialised, and special files.

A superproject in FlashInfer's shape (examples/flashinfer) gets a small
CUTLASS-shaped repository as the submodule `3rdparty/cutlass`; the
superproject is pushed to a bare repository and cloned from it without
`--recurse-submodules`, so the submodule folder is empty (issue 11). Variants:
the submodule initialised, and its folder holding files without being a
repository. A FIFO in the tree must not hang the scan (issue 13): those runs
go through a subprocess with a timeout, so a regression fails instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from codemods.core.arch import Arch
from codemods.audit.scan import scan
from codemods.render.scan_json import to_json
from conftest import EXAMPLES, ROOT, git, init_repo

SM120 = Arch.parse("sm_120")
SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
FILE_PROTOCOL = ("-c", "protocol.file.allow=always")  # git refuses file:// submodules by default since 2.38.1
CUTLASS_CONFIG = """\
// Arch switches of the submodule, in the shape of CUTLASS's include/cutlass/arch/config.h.
#pragma once
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1000)
#define CUTLASS_ARCH_MMA_SM90_ENABLED 1
#endif
"""
NOT_INITIALISED = "submodule not initialised; run `git submodule update --init 3rdparty/cutlass` to scan it"
SUPER_GATES = {"flashinfer/jit/comm.py", "include/flashinfer/comm/trtllm_allreduce.cuh"}


def old(path: Path) -> None:
    """Files written well before the scan, so the cache trusts their stat (its racy-mtime rule)."""
    for file in [path, *path.rglob("*")] if path.is_dir() else [path]:
        if ".git" not in file.parts and not file.is_symlink():
            os.utime(file, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))


def submodule_repo(tmp_path: Path) -> Path:
    """A bare repository holding a CUTLASS-shaped header: what `3rdparty/cutlass` points at."""
    work = tmp_path / "cutlass-src"
    (work / "include" / "cutlass" / "arch").mkdir(parents=True)
    (work / "include" / "cutlass" / "arch" / "config.h").write_text(CUTLASS_CONFIG)
    init_repo(work)
    bare = tmp_path / "cutlass.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    return bare


def publish(tmp_path: Path, superproject: Path, submodules: list[str]) -> Path:
    """Add each submodule to `superproject`, commit, and push it all to a bare repository."""
    cutlass = submodule_repo(tmp_path)
    for path in submodules:
        git(superproject, *FILE_PROTOCOL, "submodule", "add", "-q", str(cutlass), path)
    git(superproject, "commit", "-q", "-m", "submodules")
    bare = tmp_path / "super.git"
    git(tmp_path, "clone", "-q", "--bare", str(superproject), str(bare))
    return bare


def clone(tmp_path: Path, bare: Path, name: str) -> Path:
    """`git clone` without --recurse-submodules: every submodule folder is there, empty."""
    git(tmp_path, "clone", "-q", str(bare), name)
    return tmp_path / name


@pytest.fixture
def published(tmp_path):
    """A bare FlashInfer-shaped superproject with `3rdparty/cutlass` as a submodule."""
    superproject = tmp_path / "super-src"
    shutil.copytree(EXAMPLES / "flashinfer", superproject)
    init_repo(superproject)
    return publish(tmp_path, superproject, ["3rdparty/cutlass"])


def gate_files(result_json: dict) -> set[str]:
    return {gate["file"] for gate in result_json["gates"]}


# ---------------------------------------------------------------- submodules


def test_plain_clone_skips_the_submodule_with_the_command_to_run(cli, tmp_path, published):
    root = clone(tmp_path, published, "clone")
    assert list((root / "3rdparty" / "cutlass").iterdir()) == []

    text = cli("scan", "--repo", root)
    assert text.exit_code == 0, text.output
    assert "internal error" not in text.output
    assert f"  3rdparty/cutlass: {NOT_INITIALISED}\n" in text.stdout
    assert "1 skipped\n" in text.stdout
    assert "flashinfer/jit/comm.py:" in text.stdout and "include/flashinfer/comm/trtllm_allreduce.cuh:" in text.stdout

    data = json.loads(cli("scan", "--repo", root, "--format", "json", "--no-cache").stdout)
    assert gate_files(data) == SUPER_GATES
    assert data["skipped"] == [{"file": "3rdparty/cutlass", "reason": NOT_INITIALISED}]


def test_sarif_names_the_skipped_submodule(cli, tmp_path, published):
    root = clone(tmp_path, published, "clone")
    result = cli("scan", "--repo", root, "--format", "sarif")
    assert result.exit_code == 0, result.output
    sarif = json.loads(result.stdout)
    jsonschema.validate(sarif, json.loads(SCHEMA.read_text()))
    [invocation] = sarif["runs"][0]["invocations"]
    [notice] = invocation["toolExecutionNotifications"]
    assert notice["message"]["text"] == f"skipped: {NOT_INITIALISED}"
    assert notice["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "3rdparty/cutlass"


def test_initialised_submodule_is_scanned(cli, tmp_path, published):
    root = clone(tmp_path, published, "clone")
    git(root, *FILE_PROTOCOL, "submodule", "update", "--init", "-q")
    result = cli("scan", "--repo", root, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert gate_files(data) == SUPER_GATES | {"3rdparty/cutlass/include/cutlass/arch/config.h"}
    assert data["skipped"] == []


def test_submodule_folder_with_files_but_no_repository_is_not_listed_through_the_superproject(cli, tmp_path, published):
    root = clone(tmp_path, published, "clone")
    copied = root / "3rdparty" / "cutlass" / "include" / "cutlass" / "arch"
    copied.mkdir(parents=True)
    (copied / "config.h").write_text(CUTLASS_CONFIG)  # e.g. unpacked from a tarball
    result = cli("scan", "--repo", root, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert gate_files(data) == SUPER_GATES
    [skipped] = data["skipped"]
    assert skipped["file"] == "3rdparty/cutlass"
    assert skipped["reason"].startswith("submodule not initialised (its folder holds files but no repository)")
    assert "`git submodule update --init 3rdparty/cutlass`" in skipped["reason"]
    assert "`codemod scan --all`" in skipped["reason"]

    # what the hint says: --all walks the folder as it is
    walked = json.loads(cli("scan", "--repo", root, "--format", "json", "--all").stdout)
    assert "3rdparty/cutlass/include/cutlass/arch/config.h" in gate_files(walked)


@pytest.mark.parametrize("filled", [False, True], ids=["empty", "files-without-repository"])
def test_scanning_the_submodule_folder_itself(cli, tmp_path, published, filled):
    root = clone(tmp_path, published, "clone")
    folder = root / "3rdparty" / "cutlass"
    if filled:
        (folder / "config.h").write_text(CUTLASS_CONFIG)
    result = cli("scan", "--repo", folder, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["gates"] == []
    [skipped] = data["skipped"]
    assert skipped["file"] == "."
    assert "`git submodule update --init .`" in skipped["reason"]


def test_subfolder_of_the_clone_names_the_submodule_from_there(cli, tmp_path, published):
    root = clone(tmp_path, published, "clone")
    data = json.loads(cli("scan", "--repo", root / "3rdparty", "--format", "json").stdout)
    assert data["skipped"] == [
        {"file": "cutlass", "reason": "submodule not initialised; run `git submodule update --init cutlass` to scan it"}
    ]


def test_skipped_submodule_survives_the_cache_and_initialising_it_voids_the_snapshot(tmp_path, published):
    root = clone(tmp_path, published, "clone")
    old(root)
    cache = tmp_path / "cache"
    cold = scan(root, SM120, jobs=1, cache=cache)
    cached = scan(root, SM120, jobs=1, cache=cache)
    assert (cold.stats["snapshot"], cached.stats["snapshot"]) == (False, True)
    assert cold.skipped == cached.skipped == [{"file": "3rdparty/cutlass", "reason": NOT_INITIALISED}]
    assert to_json(cached) == to_json(cold)

    git(root, *FILE_PROTOCOL, "submodule", "update", "--init", "-q")
    old(root)
    initialised = scan(root, SM120, jobs=1, cache=cache)
    assert initialised.stats["snapshot"] is False
    assert initialised.skipped == []
    assert "3rdparty/cutlass/include/cutlass/arch/config.h" in {gate["file"] for gate in initialised.gates}
    again = scan(root, SM120, jobs=1, cache=cache)
    assert again.stats["snapshot"] is True and to_json(again) == to_json(initialised)

    # deinitialised: empty again, and skipped again
    git(root, "submodule", "deinit", "-q", "-f", "3rdparty/cutlass")
    after = scan(root, SM120, jobs=1, cache=cache)
    assert after.stats["snapshot"] is False and to_json(after) == to_json(cold)

    # the empty folder removed: no file changed, but the snapshot's skipped entry is stale
    scan(root, SM120, jobs=1, cache=cache)
    (root / "3rdparty" / "cutlass").rmdir()
    removed = scan(root, SM120, jobs=1, cache=cache)
    assert removed.stats["snapshot"] is False and removed.skipped == []


# ---------------------------------------------------------------- special files


def run_scan(root: Path, *args: str) -> subprocess.CompletedProcess:
    """The CLI in a subprocess: a scan that blocks on a FIFO fails the test after 60 s instead of hanging it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-c", "from codemods.cli.app import main; main()", "scan", "--repo", str(root), *args],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
@pytest.mark.parametrize("include_all", [False, True], ids=["listed-by-git", "all"])
def test_fifos_are_skipped_not_read(example_repo, include_all):
    root = example_repo("flashinfer")
    # tracked, then replaced by a FIFO: git still lists it
    (root / "csrc" / "trtllm_allreduce.cu").unlink()
    os.mkfifo(root / "csrc" / "trtllm_allreduce.cu")
    # untracked FIFOs, one where the scan reads FlashInfer's compilation context outside the listing
    os.mkfifo(root / "csrc" / "pipe.cuh")
    os.mkfifo(root / "flashinfer" / "compilation_context.py")
    args = ["--format", "json"] + (["--all"] if include_all else [])
    for _ in range(2):  # cold, then from the cache
        proc = run_scan(root, *args)
        assert proc.returncode == 0, proc.stderr
        assert "internal error" not in proc.stderr
        data = json.loads(proc.stdout)
        assert "include/flashinfer/comm/trtllm_allreduce.cuh" in gate_files(data)
        skipped = {item["file"]: item["reason"] for item in data["skipped"]}
        assert skipped["csrc/trtllm_allreduce.cu"] == "not a regular file"
        assert set(skipped.values()) == {"not a regular file"}
        if include_all:  # git's own listing leaves untracked FIFOs out; the walk finds them
            assert set(skipped) == {"csrc/trtllm_allreduce.cu", "csrc/pipe.cuh", "flashinfer/compilation_context.py"}


# ---------------------------------------------------------------- the real layout


@pytest.mark.real
def test_clone_of_the_real_flashinfer_063_layout(cli, real_unpacked, tmp_path):
    from test_real_releases import flashinfer_tree

    superproject = tmp_path / "flashinfer-src"
    flashinfer_tree(real_unpacked["flashinfer"], superproject, "checkout")
    bare = publish(tmp_path, superproject, ["3rdparty/cutlass", "3rdparty/spdlog"])
    root = clone(tmp_path, bare, "flashinfer")
    result = cli("scan", "--repo", root, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert "include/flashinfer/comm/trtllm_allreduce.cuh" in gate_files(data)
    assert "flashinfer/jit/comm.py" in gate_files(data)
    assert [item for item in data["skipped"] if item["file"].startswith("3rdparty/")] == [
        {"file": f"3rdparty/{name}", "reason": f"submodule not initialised; run `git submodule update --init 3rdparty/{name}` to scan it"}
        for name in ("cutlass", "spdlog")
    ]  # fmt: skip
