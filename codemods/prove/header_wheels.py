"""A project's released wheel of one version, downloaded from PyPI and unpacked once into codemod's cache.

FlashInfer's wheel bundles the third-party headers its release pins
(`flashinfer/data/cutlass`, `flashinfer/data/spdlog`: the 3rdparty/
submodules at the release's commit), so a plain clone of that release builds
with them. `pip download --no-deps` fetches it with codemod's own Python (pip
reads its usual configuration: index, proxy, certificates); it is unpacked in
site-packages layout under $CODEMOD_HOME/third-party/<dist>-<version>/ and
used from there on every later run without asking PyPI again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from codemods.apply.repo import codemod_home
from codemods.core import errors

_DONE = ".complete"  # written last; holds the wheel's file name
_TIMEOUT_SECONDS = 900


def cache_root() -> Path:
    return codemod_home() / "third-party"


def unpacked(dist: str, version: str) -> tuple[Path, str] | None:
    """(the unpacked site folder, the wheel's file name) when this release is in the cache."""
    folder = cache_root() / f"{dist}-{version}"
    try:
        return folder, (folder / _DONE).read_text().strip()
    except OSError:
        return None


def fetch(dist: str, version: str, hint: str) -> tuple[Path, str]:
    """Download `dist==version` (no dependencies) and unpack it into the cache; (site folder, wheel file name)."""
    found = unpacked(dist, version)
    if found is not None:
        return found
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet", "--dest"]
    with tempfile.TemporaryDirectory(prefix=".download-", dir=root) as temp:
        wheels = Path(temp) / "wheels"
        try:
            proc = subprocess.run(
                [*command, str(wheels), f"{dist}=={version}"], capture_output=True, text=True, errors="replace",
                timeout=_TIMEOUT_SECONDS,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise errors.BuildNeeds(f"{dist}=={version}, which bundles them, could not be downloaded from PyPI: {exc}", where="verify --build", hint=hint) from None
        found_wheels = sorted(wheels.glob("*.whl")) if proc.returncode == 0 else []
        if not found_wheels:
            lines = [line for line in proc.stderr.splitlines() if line.strip() and "WARNING" not in line]
            why = lines[-1].strip() if lines else f"pip exited {proc.returncode}"
            raise errors.BuildNeeds(
                f"{dist}=={version}, which bundles them, could not be downloaded from PyPI: {why}",
                where="verify --build", hint=hint,
            )
        wheel = found_wheels[0]
        site = Path(temp) / "site"
        try:
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(site)
        except (OSError, zipfile.BadZipFile) as exc:
            raise errors.BuildNeeds(f"cannot unpack {wheel.name}: {exc}", where="verify --build", hint=hint) from None
        (site / _DONE).write_text(wheel.name + "\n")
        folder = root / f"{dist}-{version}"
        try:
            os.rename(site, folder)
        except OSError:  # another codemod unpacked it first
            if unpacked(dist, version) is None:
                shutil.rmtree(folder, ignore_errors=True)
                os.rename(site, folder)
    found = unpacked(dist, version)
    assert found is not None  # just renamed into place
    return found
