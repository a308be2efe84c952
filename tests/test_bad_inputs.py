"""Every bad input gets one clear line, a documented exit code, and no change on disk."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys

import pytest

from conftest import EXAMPLES, IDENTITY, ROOT, git, init_repo, tree_digest

COMM = "flashinfer/jit/comm.py"
HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"
OLD_GUARD = b"#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"
NEW_GUARD = b"#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))"


def state(path):
    refs = git(path, "for-each-ref", "--format=%(refname) %(objectname)") if (path / ".git").exists() else ""
    return tree_digest(path), refs


def refused(cli, repo, code, message, *extra):
    before = state(repo)
    result = cli("run", "sm120-enable", "--repo", repo, *extra)
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error[")]
    assert len(errors) == 1
    assert state(repo) == before
    return result


def commit_edit(repo, rel, data: bytes):
    (repo / rel).write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"edit {rel}")


# ------------------------------------------------------------------ repository state


def test_path_is_a_file(cli, tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("x")
    result = cli("run", "sm120-enable", "--repo", f)
    assert result.exit_code == 5 and "is a file, not a folder" in result.stderr
    assert f.read_text() == "x"


def test_empty_repo_without_commits(cli, tmp_path):
    repo = tmp_path / "fi"
    shutil.copytree(EXAMPLES / "flashinfer", repo)
    git(repo, "init", "-q", "-b", "main")
    refused(cli, repo, 5, "the repository has no commits yet")


def test_bare_repo(cli, example_repo, tmp_path):
    src = example_repo("flashinfer")
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(src), str(bare))
    before = tree_digest(bare)
    result = cli("run", "sm120-enable", "--repo", bare)
    assert result.exit_code == 5 and "is a bare repository" in result.stderr
    assert tree_digest(bare) == before


def test_foreign_branch_with_the_codemod_name(cli, example_repo):
    repo = example_repo("flashinfer")
    git(repo, "branch", "codemod/sm120-enable")
    refused(cli, repo, 5, "branch codemod/sm120-enable already exists and was not made by codemod")


def test_git_worktree_works_and_leaves_main_checkout_alone(cli, example_repo, tmp_path):
    repo = example_repo("flashinfer")
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "experiment", str(wt))
    main_before = tree_digest(repo)
    result = cli("run", "sm120-enable", "--repo", wt)
    assert result.exit_code == 0, result.output
    assert git(wt, "branch", "--show-current").strip() == "codemod/sm120-enable"
    assert git(repo, "branch", "--show-current").strip() == "main" and tree_digest(repo) == main_before
    assert cli("revert", "sm120-enable", "--repo", wt).exit_code == 0
    assert git(wt, "branch", "--show-current").strip() == "experiment"


def test_repo_with_submodule(cli, example_repo, tmp_path):
    repo = example_repo("flashinfer")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "README").write_text("vendored\n")
    init_repo(lib)
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "3rdparty/lib")
    git(repo, "commit", "-qm", "add submodule")
    sub_before = tree_digest(repo / "3rdparty/lib")
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0, result.output
    assert tree_digest(repo / "3rdparty/lib") == sub_before
    assert git(repo, "diff", "--name-only", "main", "HEAD").split() == [COMM, HEADER]
    assert cli("revert", "sm120-enable", "--repo", repo).exit_code == 0


def test_read_only_file(cli, example_repo):
    repo = example_repo("flashinfer")
    os.chmod(repo / HEADER, 0o444)
    refused(cli, repo, 9, f"{HEADER}: is read-only")


# ------------------------------------------------------------------ target files


def test_non_utf8_source(cli, example_repo):
    repo = example_repo("flashinfer")
    commit_edit(repo, COMM, (repo / COMM).read_bytes().replace(b"JIT specs", b"JIT sp\xe9cs"))
    refused(cli, repo, 3, f"{COMM}: not UTF-8 (byte")


def test_python_syntax_error(cli, example_repo):
    repo = example_repo("flashinfer")
    commit_edit(repo, COMM, (repo / COMM).read_bytes() + b"\ndef broken(:\n")
    refused(cli, repo, 3, f"{COMM}: not valid Python")


def test_unterminated_if_in_header(cli, example_repo):
    repo = example_repo("flashinfer")
    commit_edit(repo, HEADER, (repo / HEADER).read_bytes() + b"#if __CUDA_ARCH__ >= 900\nint stray;\n")
    refused(cli, repo, 3, "unbalanced preprocessor conditionals: 6 #if/#ifdef/#ifndef but 5 #endif")


def test_binary_file_with_source_extension(cli, example_repo):
    repo = example_repo("flashinfer")
    commit_edit(repo, HEADER, b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 64 + OLD_GUARD)
    refused(cli, repo, 3, f"{HEADER}: looks like a binary file")


def test_symlink_out_of_the_repo_is_never_followed(cli, example_repo, tmp_path):
    repo = example_repo("flashinfer")
    outside = tmp_path / "outside.cuh"
    outside.write_bytes((repo / HEADER).read_bytes())
    (repo / HEADER).unlink()
    (repo / HEADER).symlink_to(outside)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "symlink out")
    before = outside.read_bytes()
    refused(cli, repo, 9, "outside the repository")
    assert cli("run", "sm120-enable", "--repo", repo, "--dry-run").exit_code == 9
    assert outside.read_bytes() == before


def test_symlink_inside_the_repo_writes_the_real_file(cli, example_repo):
    repo = example_repo("flashinfer")
    real = repo / "include/flashinfer/comm/real_allreduce.cuh"
    (repo / HEADER).rename(real)
    (repo / HEADER).symlink_to("real_allreduce.cuh")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "symlink in")
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0, result.output
    assert (repo / HEADER).is_symlink() and os.readlink(repo / HEADER) == "real_allreduce.cuh"
    assert real.read_bytes().count(NEW_GUARD) == 4
    assert "include/flashinfer/comm/real_allreduce.cuh" in git(repo, "diff", "--name-only", "main", "HEAD").split()
    assert git(repo, "status", "--porcelain") == ""


def test_bom_and_crlf_are_kept(cli, example_repo):
    repo = example_repo("flashinfer")
    comm = b"\xef\xbb\xbf" + (repo / COMM).read_bytes().replace(b"\n", b"\r\n")
    header = (repo / HEADER).read_bytes().replace(b"\n", b"\r\n")
    commit_edit(repo, COMM, comm)
    commit_edit(repo, HEADER, header)
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0, result.output
    assert (repo / COMM).read_bytes() == comm.replace(b"versions=[9, 10]\r\n    )\r\n    return gen_jit_spec(\r\n        \"trtllm_comm\"", b"versions=[9, 10, 12]\r\n    )\r\n    return gen_jit_spec(\r\n        \"trtllm_comm\"")
    assert (repo / HEADER).read_bytes() == header.replace(b"\n" + OLD_GUARD + b"\r\n", b"\n" + NEW_GUARD + b"\r\n")
    assert cli("revert", "sm120-enable", "--repo", repo).exit_code == 0
    assert (repo / COMM).read_bytes() == comm and (repo / HEADER).read_bytes() == header


@pytest.mark.slow
def test_50mb_generated_header_in_bounded_memory(example_repo):
    """The real header's guards at 50 MB: planned correctly, peak RSS of the process well under 1 GB."""
    repo = example_repo("flashinfer")
    body = (repo / HEADER).read_bytes()
    filler = b"// generated\nstatic const int table_%d[] = {1, 2, 3};\n"
    chunk = b"".join(filler % i for i in range(2000))
    copies = 50 * 1024 * 1024 // (len(body) + len(chunk)) + 1
    big = (body + chunk) * copies
    commit_edit(repo, HEADER, big)
    env = {**os.environ, **IDENTITY, "PYTHONPATH": str(ROOT)}
    script = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run([sys.executable, '-m', 'codemods.cli', 'run', 'sm120-enable', '--repo', sys.argv[1], '--format', 'json'],"
        " capture_output=True, text=True)\n"
        "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.stderr.write(r.stderr[-2000:])\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(repo)], env=env, capture_output=True, text=True, timeout=900)
    code, peak_kb = map(int, proc.stdout.split())
    assert code == 0, proc.stderr
    assert peak_kb < 700 * 1024, f"peak RSS {peak_kb // 1024} MB"
    assert (repo / HEADER).read_bytes() == big.replace(b"\n" + OLD_GUARD, b"\n" + NEW_GUARD)
