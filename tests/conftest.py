"""Shared fixtures: real git repos made from the example trees, the CLI runner, real wheels."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from typer.testing import CliRunner

# Property tests check behaviour, not speed (speed is bench/'s): no per-example deadline on a loaded CI machine.
settings.register_profile("codemod", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("codemod")


def pytest_addoption(parser):
    parser.addoption(
        "--all", action="store_true", help="run every test: also those marked real, slow or exhaustive, which the default run leaves out"
    )


def pytest_configure(config):
    if config.getoption("--all"):
        config.option.markexpr = ""  # pyproject's addopts sets the fast set's -m; --all clears it


ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

IDENTITY = {
    "GIT_AUTHOR_NAME": "Test User",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test User",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **IDENTITY}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def init_repo(path: Path, branch: str = "main") -> Path:
    git(path, "init", "-q", "-b", branch)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    return path


def crlf(text: str) -> str:
    """Dedented text with CRLF line endings."""
    return textwrap.dedent(text).replace("\n", "\r\n")


def rewrite(kind, source: bytes, targets, **selector) -> bytes:
    """Widen every gate a kind finds (with selectors); a gate that cannot be widened stays as it is."""
    from codemods.gates import CannotWiden, apply_edits

    edits = []
    for gate in kind.find(source, **selector):
        try:
            edits += kind.widen(source, gate, targets)
        except CannotWiden:
            pass
    return apply_edits(source, edits)


def tree_digest(path: Path) -> dict[str, str]:
    """sha256 of every file under path, .git excluded.

    .git is never entered: git's background auto-gc may be removing loose-object
    folders while we walk, which made rglob fail on large repos.
    """
    digest = {}
    for folder, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in names:
            if name == ".git":  # a worktree's or submodule's pointer file
                continue
            file = Path(folder) / name
            if file.is_file():
                digest[file.relative_to(path).as_posix()] = hashlib.sha256(file.read_bytes()).hexdigest()
    return dict(sorted(digest.items()))


@pytest.fixture(autouse=True)
def isolated_homes(tmp_path_factory, monkeypatch):
    """Shadow repos and FlashInfer's JIT cache live in per-test folders, never in ~."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("CODEMOD_HOME", str(home / "codemod"))
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(home / "fi-workspace"))
    monkeypatch.delenv("CODEMOD_RECIPES", raising=False)
    return home


@pytest.fixture
def example_repo(tmp_path):
    """A fresh git repo holding a copy of examples/<project>."""

    def make(project: str) -> Path:
        dest = tmp_path / project
        shutil.copytree(EXAMPLES / project, dest)
        return init_repo(dest)

    return make


@pytest.fixture
def cli():
    """Invoke the real typer app; returns the click Result (exit_code, stdout, stderr)."""
    from codemods.cli.app import app

    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(app, [str(a) for a in args], input=input)

    return invoke


# ------------------------------------------------------------------ real releases

REAL_RELEASES = {
    "flashinfer": ("flashinfer-python", "0.6.3", "flashinfer_python-0.6.3-py3-none-any.whl"),
    "sglang": ("sglang", "0.5.8", "sglang-0.5.8-py3-none-any.whl"),
}


def wheel_cache() -> Path:
    base = os.environ.get("CODEMOD_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "codemod-tests"
    )
    path = Path(base) / "wheels"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def cache_lock():
    """One test process at a time in the wheel cache: pytest-xdist workers share it."""
    with open(wheel_cache() / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def fetch_wheel(dist: str, version: str) -> Path:
    """Download one release (no deps) into the cache once; return the wheel path."""
    cache = wheel_cache()
    prefix = dist.replace("-", "_") + f"-{version}-"
    with cache_lock():
        found = [p for p in cache.glob("*.whl") if p.name.startswith(prefix)]
        if not found:
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(cache), f"{dist}=={version}"],
                capture_output=True, text=True,
            )
            if proc.returncode != 0:
                pytest.fail(f"could not download {dist}=={version}: {proc.stderr.strip()[-500:]}")
            found = [p for p in cache.glob("*.whl") if p.name.startswith(prefix)]
    return found[0]


def unpack_wheel(dist: str, version: str) -> Path:
    """The wheel unpacked once in the cache (site-packages layout); treat as read-only."""
    wheel = fetch_wheel(dist, version)
    dest = wheel_cache() / "unpacked" / wheel.stem
    with cache_lock():
        if not (dest / ".complete").exists():
            shutil.rmtree(dest, ignore_errors=True)
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(dest)
            (dest / ".complete").write_text("ok")
    return dest


@pytest.fixture(scope="session")
def real_unpacked():
    return {name: unpack_wheel(dist, version) for name, (dist, version, _) in REAL_RELEASES.items()}


@pytest.fixture(scope="session")
def ptx_cache(tmp_path_factory) -> Path:
    """One PTX cache ($CODEMOD_BUILD_CACHE) for the real build-proof tests of a session: they compile the same
    0.6.3 sources, and a key is of the preprocessed text and the code flags, so what preprocesses the same is
    compiled once."""
    return tmp_path_factory.mktemp("ptx-cache")


# ------------------------------------------------------------------ plain clones


def plain_clone(
    tmp_path: Path, tree: Path, submodules: dict[str, Path | None], *, initialise: bool = False, tag: str = "v0.6.3"
) -> Path:
    """A real `git clone` of a superproject holding `tree`, with `submodules` registered as gitlinks.

    Each submodule path maps to a folder whose files become that submodule's
    repository (None: one placeholder file). The superproject is committed,
    tagged, pushed to a bare repository and cloned from there the way users
    clone FlashInfer: without `--recurse-submodules` (so the submodule folders
    are empty) unless `initialise`.
    """
    work = tmp_path / "upstream"
    shutil.copytree(tree, work, symlinks=True)
    for rel, content in submodules.items():
        source = tmp_path / "subs" / rel.replace("/", "_")
        if content is None:
            source.mkdir(parents=True)
            (source / "README.md").write_text(f"{rel}\n")
        else:
            shutil.copytree(content, source, symlinks=True)
        init_repo(source)
        bare = tmp_path / "bare" / (rel.replace("/", "_") + ".git")
        git(tmp_path, "clone", "-q", "--bare", str(source), str(bare))
        shutil.rmtree(work / rel, ignore_errors=True)
        if not (work / ".git").exists():
            git(work, "init", "-q", "-b", "main")
        git(work, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(bare), rel)
    if not (work / ".git").exists():
        git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "release")
    git(work, "tag", tag)
    bare = tmp_path / "bare" / "superproject.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    if initialise:
        git(clone, "-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init")
    return clone


# ------------------------------------------------------------------ installed packages


def fake_site(tmp_path: Path, projects: tuple[str, ...] = ("flashinfer",)) -> Path:
    """A site-packages folder holding the example trees as their wheels would install them (with dist-info)."""
    site = tmp_path / "site"
    if "flashinfer" in projects:
        shutil.copytree(EXAMPLES / "flashinfer" / "flashinfer", site / "flashinfer")
        shutil.copytree(EXAMPLES / "flashinfer" / "include", site / "flashinfer" / "data" / "include")
    if "sglang" in projects:
        shutil.copytree(EXAMPLES / "sglang" / "python" / "sglang", site / "sglang")
        (site / "sglang" / "__init__.py").write_text("")
    versions = {"flashinfer": ("flashinfer_python", "flashinfer-python", "0.6.3"), "sglang": ("sglang", "sglang", "0.5.8")}
    for project in projects:
        stem, name, version = versions[project]
        dist = site / f"{stem}-{version}.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (dist / "RECORD").write_text("")
    return site


def flashinfer_checkout(wheel: Path, root: Path, *, third_party: bool = False) -> Path:
    """FlashInfer's upstream checkout layout made from an unpacked wheel (flashinfer/, include/, csrc/).

    With `third_party`, 3rdparty/cutlass and 3rdparty/spdlog link to the wheel's bundled copies and
    build_backend.py comes along (what a build needs); without, they are absent (a plain clone's files).
    """
    pkg = wheel / "flashinfer"
    shutil.copytree(pkg, root / "flashinfer", ignore=shutil.ignore_patterns("data", "__pycache__"))
    shutil.copytree(pkg / "data" / "include", root / "include")
    shutil.copytree(pkg / "data" / "csrc", root / "csrc")
    if third_party:
        (root / "3rdparty").mkdir()
        for name in ("cutlass", "spdlog"):
            (root / "3rdparty" / name).symlink_to(pkg / "data" / name, target_is_directory=True)
        shutil.copy(wheel / "build_backend.py", root / "build_backend.py")
    return root
