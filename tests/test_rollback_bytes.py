"""Whatever stops a run, the tree ends at its base byte for byte: line-ending conversion, git's index bits, full disks.

Real git with a real global config (GIT_CONFIG_GLOBAL), real files; codemod
runs in-process (CliRunner) or as a real process when a pause or a resource
limit is needed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import EXAMPLES, IDENTITY, ROOT, git, init_repo, tree_digest

COMM = "flashinfer/jit/comm.py"
HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"
FAULT_RUNNER = ROOT / "tests" / "fault_runner.py"


def codemod(*args, pause_at: str = "", env: dict | None = None, preexec=None, wait: bool = True):
    full = {**os.environ, **IDENTITY, "PYTHONPATH": str(ROOT), **(env or {})}
    full.pop("CODEMOD_TEST_KILL_AT", None)
    full.pop("CODEMOD_TEST_PAUSE_AT", None)
    if pause_at:
        full["CODEMOD_TEST_PAUSE_AT"] = pause_at
    proc = subprocess.Popen([sys.executable, str(FAULT_RUNNER), *map(str, args)], env=full, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=preexec)
    if not wait:
        return proc
    proc.out, proc.err = proc.communicate(timeout=120)
    return proc


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.exists()


def only_crlf(data: bytes) -> bool:
    return data.count(b"\n") == data.count(b"\r\n") > 0


# ------------------------------------------------------------------ core.autocrlf=true, CRLF work tree


@pytest.fixture
def crlf_clone(tmp_path, monkeypatch):
    """A clone made under a real global `core.autocrlf = true`: LF in git, CRLF in the work tree."""
    config = tmp_path / "gitconfig"
    config.write_text("[core]\n\tautocrlf = true\n[user]\n\tname = Test User\n\temail = test@example.invalid\n")
    source = tmp_path / "source"
    shutil.copytree(EXAMPLES / "flashinfer", source)
    init_repo(source)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    git(tmp_path, "clone", "-q", str(source), "clone")
    clone = tmp_path / "clone"
    assert only_crlf((clone / COMM).read_bytes()) and only_crlf((clone / HEADER).read_bytes())
    return clone


def test_autocrlf_run_keeps_crlf_commits_what_git_would_and_reverts_exactly(cli, crlf_clone):
    pristine = tree_digest(crlf_clone)
    result = cli("run", "sm120-enable", "--repo", crlf_clone)
    assert result.exit_code == 0, result.output
    comm, header = (crlf_clone / COMM).read_bytes(), (crlf_clone / HEADER).read_bytes()
    assert b"[9, 10, 12]" in comm and header.count(b"< 1200") == 1  # the commented-out guard stays
    assert only_crlf(comm) and only_crlf(header), "each file keeps its own line endings"
    assert git(crlf_clone, "status", "--porcelain") == "", "what is on disk is what git committed"
    assert b"\r" not in git(crlf_clone, "show", f"HEAD:{HEADER}").encode(), "git stores LF, as it would for the user"
    assert len(git(crlf_clone, "log", "--format=%s", "main..codemod/sm120-enable").splitlines()) == 2
    back = cli("revert", "sm120-enable", "--repo", crlf_clone)
    assert back.exit_code == 0, back.output
    assert tree_digest(crlf_clone) == pristine
    assert git(crlf_clone, "branch", "--format=%(refname:short)").split() == ["main"]


def test_autocrlf_rollback_puts_every_base_byte_back(crlf_clone, tmp_path):
    """The run stops after comm.py is committed (the header changed): comm.py must not stay widened."""
    pristine = tree_digest(crlf_clone)
    gate = tmp_path / "go"
    run = codemod("run", "sm120-enable", "--repo", crlf_clone, pause_at=f"committed:{gate}", wait=False)
    wait_for(Path(f"{gate}.reached"))
    with open(crlf_clone / HEADER, "ab") as handle:
        handle.write(b"// saved by an editor\r\n")
    gate.write_text("go")
    out, err = run.communicate(timeout=120)
    assert run.returncode == 5, err
    assert f"{HEADER} changed while codemod was working on it" in err and "internal error" not in err
    after = tree_digest(crlf_clone)
    assert after.pop(HEADER) != pristine.pop(HEADER)
    assert after == pristine, "comm.py is back at its CRLF base bytes: no widened JIT gate without its guards"
    assert (crlf_clone / HEADER).read_bytes().endswith(b"// saved by an editor\r\n")
    assert git(crlf_clone, "branch", "--format=%(refname:short)").split() == ["main"]
    assert git(crlf_clone, "status", "--porcelain").split() == ["M", HEADER]


# ------------------------------------------------------------------ git's index bits


@pytest.mark.parametrize("bit", ["assume-unchanged", "skip-worktree"])
@pytest.mark.parametrize("command", ["run", "revert"])
def test_index_bits_that_hide_local_edits_are_refused(cli, example_repo, bit, command):
    repo = example_repo("flashinfer")
    if command == "revert":
        assert cli("run", "sm120-enable", "--repo", repo).exit_code == 0
    git(repo, "update-index", f"--{bit}", COMM)
    with open(repo / COMM, "a") as handle:
        handle.write("# my local edit, hidden from git status\n")
    assert git(repo, "status", "--porcelain") == ""
    before, refs = tree_digest(repo), git(repo, "for-each-ref")
    result = cli(command, "sm120-enable", "--repo", repo)
    assert result.exit_code == 4, result.output
    assert f"{COMM}" in result.stderr and bit in result.stderr and "another process" not in result.stderr
    assert f"--no-{bit}" in result.stderr
    assert tree_digest(repo) == before and git(repo, "for-each-ref") == refs
    assert (repo / COMM).read_text().endswith("# my local edit, hidden from git status\n")


def test_sparse_checkout_target_is_refused_without_blaming_another_process(cli, example_repo):
    repo = example_repo("flashinfer")
    git(repo, "sparse-checkout", "set", "--no-cone", "/*", f"!/{HEADER}")
    git(repo, "config", "sparse.expectFilesOutsideOfPatterns", "true")  # else git 2.35+ clears the bit of a present file
    (repo / HEADER).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLES / "flashinfer" / HEADER, repo / HEADER)  # the file is there, git skips it
    assert git(repo, "ls-files", "-t", HEADER).startswith("S ")
    before = tree_digest(repo)
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 4, result.output
    assert "skip-worktree" in result.stderr and "sparse" in result.stderr and "another process" not in result.stderr
    assert tree_digest(repo) == before
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]


def test_rollback_restores_bytes_when_git_add_refuses_a_path(example_repo, tmp_path):
    """git add refuses the second file (marked skip-worktree mid-run): comm.py goes back, and the message is checked."""
    repo = example_repo("flashinfer")
    pristine = tree_digest(repo)
    gate = tmp_path / "go"
    run = codemod("run", "sm120-enable", "--repo", repo, pause_at=f"committed:{gate}", wait=False)
    wait_for(Path(f"{gate}.reached"))
    git(repo, "update-index", "--skip-worktree", HEADER)
    gate.write_text("go")
    out, err = run.communicate(timeout=120)
    assert run.returncode == 5, err
    assert "internal error" not in err and "another process" not in err
    assert "put back every file it had changed" in err
    git(repo, "update-index", "--no-skip-worktree", HEADER)
    assert tree_digest(repo) == pristine, "comm.py is not left widened"
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]
    assert git(repo, "status", "--porcelain") == ""
    assert not (repo / ".git" / "codemod" / "journal.json").exists()


# ------------------------------------------------------------------ failing filter, file size limit, full disk


def _many_files(repo: Path, count: int) -> None:
    """Enough tracked files that git's index outgrows a small file size limit."""
    folder = repo / "docs"
    folder.mkdir()
    for n in range(count):
        (folder / f"page_{n:04d}_{'x' * 40}.md").write_text(f"page {n}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "docs")


def test_a_failing_clean_filter_never_runs(example_repo, tmp_path):
    """A required clean filter that fails would stop git add; codemod's git runs no filter at all (docs/safety.md)."""
    repo = example_repo("flashinfer")
    marker = tmp_path / "filter-ran"
    (repo / ".gitattributes").write_text("*.cuh filter=broken\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attributes")
    git(repo, "config", "filter.broken.clean", f"touch {marker}; false")
    git(repo, "config", "filter.broken.required", "true")
    result = codemod("run", "sm120-enable", "--repo", repo)
    assert result.returncode == 0, result.err
    assert not marker.exists()
    assert git(repo, "branch", "--show-current").strip() == "codemod/sm120-enable"
    assert codemod("revert", "sm120-enable", "--repo", repo).returncode == 0
    assert not marker.exists()


def test_file_size_limit_while_git_writes_its_index(example_repo):
    """`ulimit -f` smaller than git's index: git dies of SIGXFSZ, codemod says so (exit 9) after a checked rollback."""
    import resource

    repo = example_repo("flashinfer")
    _many_files(repo, 400)
    assert (repo / ".git" / "index").stat().st_size > 24_000
    pristine = tree_digest(repo)

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (16_000, 16_000))

    result = codemod("run", "sm120-enable", "--repo", repo, preexec=limit)
    assert result.returncode == 9, result.err
    assert "internal error" not in result.err and "file size limit" in result.err
    assert tree_digest(repo) == pristine
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]
    assert git(repo, "status", "--porcelain") == ""


def _small_disk(tmp_path: Path) -> Path:
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {proc.stderr.decode().strip()}")
    return mount


@pytest.mark.parametrize("free_kb", [0, 4, 8, 12, 16, 24, 32, 48, 64, 90])
def test_full_disk_ends_in_its_error_after_a_checked_rollback(tmp_path, free_kb):
    mount = _small_disk(tmp_path)
    try:
        repo = mount / "flashinfer"
        shutil.copytree(EXAMPLES / "flashinfer", repo)
        init_repo(repo)
        pristine = tree_digest(repo)
        home = tmp_path / "home"
        filler = mount / "filler"
        with open(filler, "wb", buffering=0) as handle:  # fill the disk, then give back free_kb
            try:
                while True:
                    handle.write(b"\0" * 4096)
            except OSError:
                pass
        with open(filler, "r+b") as handle:
            handle.truncate(max(0, filler.stat().st_size - free_kb * 1024))
        result = codemod("run", "sm120-enable", "--repo", repo, env={"CODEMOD_HOME": str(home)})
        assert "internal error" not in result.err, result.err
        filler.unlink()
        if result.returncode == 0:  # enough room after all
            assert git(repo, "branch", "--show-current").strip() == "codemod/sm120-enable"
            return
        assert result.returncode in (5, 9), result.err
        if (repo / ".git" / "codemod" / "journal.json").exists():
            assert f"`codemod revert sm120-enable --repo {repo}` (or the next `codemod run`) puts the repository back" in result.err
            assert codemod("revert", "sm120-enable", "--repo", repo, env={"CODEMOD_HOME": str(home)}).returncode in (0, 7)
        assert tree_digest(repo) == pristine, result.err
        assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]
        assert git(repo, "status", "--porcelain") == ""
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
