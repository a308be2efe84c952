"""Where `codemod verify --build` takes third-party headers from when the tree lacks them (issue 32, item 5).

The tiny tree of test_build_proof (one JIT module whose kernel includes
<spdlog/version.h> from 3rdparty/spdlog/include) without that folder, as a
plain clone has it. The headers then come from --include, from a FlashInfer
of the same version installed in --python, or from the release's wheel,
downloaded with pip once into codemod's cache. Pip is pointed at a local
folder (PIP_NO_INDEX, PIP_FIND_LINKS) holding a wheel made here, so the
download is real and needs no network. The build never stands headers in:
every run here still catches the kernel the widened JIT gate builds empty.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import git, init_repo
from test_build_proof import ARCHS, GUARD, WIDE, edit, widen_jit_gate, write_tree

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA 13) is installed here and in CI")

SPDLOG_VERSION_H = "#pragma once\n#define SPDLOG_VER_MAJOR 1\n#define SPDLOG_VER_MINOR 14\n#define SPDLOG_VER_PATCH 1\n"
WHEEL = "flashinfer_python-0.0.1-py3-none-any.whl"
EMPTY = "  empty on sm_120 (1):\n    lamport_demo_kernel<float>  [csrc/pdl_demo.cu]"


@pytest.fixture(scope="module")
def build_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("build-cache")


@pytest.fixture
def offline_pip(tmp_path, monkeypatch) -> Path:
    """Pip reads only this folder (empty unless a test puts a wheel in it): no index, no network."""
    links = tmp_path / "find-links"
    links.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    return links


@pytest.fixture
def clone(tmp_path, build_cache, monkeypatch, offline_pip) -> Path:
    """The tiny tree, committed, with the JIT gate widened alone and 3rdparty/spdlog empty (a plain clone's)."""
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(build_cache))
    tree = write_tree(tmp_path / "fi")
    shutil.rmtree(tree / "3rdparty/spdlog/include")
    init_repo(tree)
    widen_jit_gate(tree)
    return tree


def site_with_flashinfer(site: Path, version: str, built_from: str = "") -> Path:
    """A site-packages folder holding FlashInfer `version` as its wheel installs it, bundled spdlog included
    (`built_from`: the commit its _build_meta.py names)."""
    (site / "flashinfer/jit").mkdir(parents=True)
    (site / "flashinfer/jit/__init__.py").write_text("")
    if built_from:
        (site / "flashinfer/_build_meta.py").write_text(f'__version__ = "{version}"\n__git_version__ = "{built_from}"\n')
    (site / "flashinfer/data/include/flashinfer").mkdir(parents=True)
    (site / "flashinfer/data/include/flashinfer/version.h").write_text("#pragma once\n")
    (site / "flashinfer/data/spdlog/include/spdlog").mkdir(parents=True)
    (site / "flashinfer/data/spdlog/include/spdlog/version.h").write_text(SPDLOG_VERSION_H)
    info = site / f"flashinfer_python-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: flashinfer-python\nVersion: {version}\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    (info / "RECORD").write_text("")
    return site


def _wheel_in(folder: Path, built_from: str = "") -> None:
    """flashinfer-python 0.0.1's wheel in `folder` (where pip looks), made from a site folder as it installs."""
    site = site_with_flashinfer(folder.parent / "wheel-files", "0.0.1", built_from)
    with zipfile.ZipFile(folder / WHEEL, "w") as wheel:
        for path in sorted(site.rglob("*")):
            if path.is_file():
                wheel.write(path, path.relative_to(site).as_posix())


def python_seeing(site: Path, folder: Path) -> Path:
    """An interpreter (this one, with `site` first on its path): what --python names."""
    script = folder / "python"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_help_says_where_the_build_takes_third_party_headers_from(cli):
    result = cli("verify", "--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "used by --build too" in text
    assert "a same-version FlashInfer lends its bundled third-party headers" in text
    assert "that release's wheel (flashinfer-python==VERSION) from PyPI, which --build downloads once into codemod's cache" in text
    assert "--build never stands them in (exit 11)" in text


def test_include_is_honoured_by_the_build(cli, clone, tmp_path):
    spdlog = tmp_path / "spdlog-include"
    (spdlog / "spdlog").mkdir(parents=True)
    (spdlog / "spdlog/version.h").write_text(SPDLOG_VERSION_H)
    result = cli("verify", "--build", "--repo", clone, *ARCHS, "--include", spdlog)

    assert result.exit_code == 1, result.output
    assert f"third-party headers from --include (spdlog 1.14.1): {spdlog}\n" in result.stdout
    assert EMPTY in result.stdout, "the real header, and the half-patch still caught"
    data = json.loads(cli("verify", "--build", "--repo", clone, *ARCHS, "--include", spdlog, "--format", "json").stdout)
    assert data["headers"] == {"source": "include", "folders": [str(spdlog)], "installed": None, "wheel": None, "versions": "spdlog 1.14.1"}


def test_a_header_the_include_folders_lack_is_named_never_stood_in(cli, clone, tmp_path):
    (tmp_path / "unrelated").mkdir()
    result = cli("verify", "--build", "--repo", clone, *ARCHS, "--include", tmp_path / "unrelated")
    assert result.exit_code == 11, result.output
    message = " ".join(result.stderr.split())
    assert "missing header(s): spdlog/version.h; a build needs the real headers (no stand-ins)" in message
    assert "pass --include DIR of the folder that holds them" in message


@pytest.mark.parametrize("version, used", [("0.0.1", True), ("0.0.2", False)], ids=["same-version", "other-version"])
def test_flashinfer_installed_in_python_lends_its_headers(cli, clone, tmp_path, version, used):
    site = site_with_flashinfer(tmp_path / "site", version)
    python = python_seeing(site, tmp_path)
    result = cli("verify", "--build", "--repo", clone, *ARCHS, "--python", python)

    if used:
        assert result.exit_code == 1, result.output
        folder = site / "flashinfer/data/spdlog/include"
        assert f"third-party headers from the installed flashinfer-python 0.0.1 at {site} (spdlog 1.14.1): {folder}" in result.stdout
        assert EMPTY in result.stdout
    else:  # the tree is 0.0.1: another version's headers are not used, and PyPI (here: an empty folder) has no 0.0.1
        assert result.exit_code == 11, result.output
        message = " ".join(result.stderr.split())
        assert "third-party headers missing: 3rdparty/spdlog/include (absent or empty)" in message
        assert "flashinfer-python==0.0.1, which bundles them, could not be downloaded from PyPI" in message
        assert "pass --python of an environment with flashinfer-python 0.0.1 installed" in message


def test_the_release_wheel_is_downloaded_once_then_taken_from_the_cache(cli, clone, tmp_path, offline_pip, isolated_homes):
    _wheel_in(offline_pip)
    cached = isolated_homes / "codemod" / "third-party" / "flashinfer-python-0.0.1"

    first = cli("verify", "--build", "--repo", clone, *ARCHS)
    assert first.exit_code == 1, first.output
    folder = cached / "flashinfer/data/spdlog/include"
    assert f"third-party headers from {WHEEL}, downloaded from PyPI into codemod's cache (spdlog 1.14.1): {folder}\n" in first.stdout
    assert EMPTY in first.stdout
    assert (folder / "spdlog/version.h").read_text() == SPDLOG_VERSION_H

    shutil.rmtree(offline_pip)  # a second download would fail now
    second = cli("verify", "--build", "--repo", clone, *ARCHS, "--format", "json")
    assert second.exit_code == 1, second.output
    headers = json.loads(second.stdout)["headers"]
    assert (headers["source"], headers["wheel"], headers["folders"]) == ("downloaded", WHEEL, [str(folder)])


def test_the_preprocessor_proof_takes_the_cached_wheel_before_stand_ins(cli, clone, offline_pip):
    edit(clone / "include/flashinfer/pdl_demo.cuh", GUARD, WIDE)
    before = json.loads(cli("verify", "--repo", clone, "--base", "HEAD", *ARCHS, "--format", "json").stdout)["headers"]
    assert (before["source"], before["stand_ins"]) == ("none", ["spdlog/version.h"]), "not in the cache: stood in, no download"

    _wheel_in(offline_pip)
    build = cli("verify", "--build", "--repo", clone, *ARCHS)  # downloads it into the cache
    assert build.exit_code == 0, build.output  # the guard widened with the JIT gate: every kernel has its body
    result = cli("verify", "--repo", clone, "--base", "HEAD", *ARCHS, "--format", "json")
    headers = json.loads(result.stdout)["headers"]
    assert (headers["source"], headers["wheel"], headers["versions"], headers["stand_ins"]) == ("downloaded", WHEEL, "spdlog 1.14.1", [])
    assert f"note: third-party headers from {WHEEL}, downloaded from PyPI into codemod's cache" in result.stderr


def test_without_any_source_the_build_refuses_and_says_what_to_do(cli, clone):
    result = cli("verify", "--build", "--repo", clone, *ARCHS)
    assert result.exit_code == 11, result.output
    message = " ".join(result.stderr.split())
    assert "third-party headers missing: 3rdparty/spdlog/include (absent or empty); a build needs the real headers, no stand-ins" in message
    assert f"git -C {clone} submodule update --init 3rdparty/spdlog" in message
    assert "pass --include DIR for each missing include folder" in message
    assert "internal error" not in result.output and not os.listdir(clone / "3rdparty/spdlog")


def _pin_spdlog(clone: Path, commit: str) -> str:
    """Commit 3rdparty/spdlog as a submodule pinned at `commit` (the work tree's own edits left alone); the new HEAD."""
    (clone / ".gitmodules").write_text('[submodule "3rdparty/spdlog"]\n\tpath = 3rdparty/spdlog\n\turl = https://example.invalid/spdlog.git\n')
    git(clone, "add", ".gitmodules")
    git(clone, "update-index", "--add", "--cacheinfo", f"160000,{commit},3rdparty/spdlog")
    git(clone, "commit", "-q", "-m", f"spdlog at {commit[:7]}")
    return git(clone, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize("moved", [False, True], ids=["same-pins", "pin-moved-since"])
def test_a_wheel_built_from_a_commit_that_pins_other_submodules_is_refused(cli, clone, offline_pip, moved):
    built_from = _pin_spdlog(clone, "a" * 40)
    if moved:
        _pin_spdlog(clone, "b" * 40)
    _wheel_in(offline_pip, built_from)
    result = cli("verify", "--build", "--repo", clone, "--base", built_from, *ARCHS)

    if not moved:
        assert result.exit_code == 1, result.output
        assert f"third-party headers from {WHEEL}, downloaded from PyPI" in result.stdout and EMPTY in result.stdout
    else:
        assert result.exit_code == 11, result.output
        message = " ".join(result.stderr.split())
        assert (
            f"{WHEEL}, downloaded from PyPI, pins 3rdparty/spdlog at aaaaaaaaaaaa, this tree at bbbbbbbbbbbb "
            f"(its build commit {built_from[:12]})"
        ) in message
        assert "git -C" in message and "submodule update --init 3rdparty/spdlog" in message
