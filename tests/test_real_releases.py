"""sm120-enable on the real FlashInfer 0.6.3 and SGLang 0.5.8 wheels, in both layouts.

The wheels are downloaded (no deps) into a cache on first use; nothing from
them is committed here.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from conftest import git, init_repo, tree_digest

pytestmark = pytest.mark.real

OLD_GUARD = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"
NEW_GUARD = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))"


def _ignore_caches(_dir, names):
    return [n for n in names if n == "__pycache__"]


def flashinfer_tree(unpacked: Path, dest: Path, layout: str) -> dict[str, str]:
    """A git repo of FlashInfer as installed (wheel) or rearranged like the upstream checkout."""
    pkg = unpacked / "flashinfer"
    if layout == "wheel":
        shutil.copytree(pkg, dest / "flashinfer", ignore=_ignore_caches)
        include = "flashinfer/data/include"
    else:
        shutil.copytree(pkg, dest / "flashinfer", ignore=lambda d, n: _ignore_caches(d, n) + (["data"] if Path(d) == pkg else []))
        shutil.copytree(pkg / "data" / "include", dest / "include")
        shutil.copytree(pkg / "data" / "csrc", dest / "csrc")
        include = "include"
    init_repo(dest)
    return {"comm": "flashinfer/jit/comm.py", "header": f"{include}/flashinfer/comm/trtllm_allreduce.cuh"}


def sglang_tree(unpacked: Path, dest: Path, layout: str) -> dict[str, str]:
    prefix = "sglang" if layout == "wheel" else "python/sglang"
    shutil.copytree(unpacked / "sglang", dest / prefix, ignore=_ignore_caches)
    init_repo(dest)
    return {"communicator": f"{prefix}/srt/layers/communicator.py", "server_args": f"{prefix}/srt/server_args.py"}


def changed_lines(repo: Path, rel: str) -> tuple[list[str], list[str]]:
    diff = git(repo, "diff", "-U0", "main", "HEAD", "--", rel)
    removed = [l[1:] for l in diff.splitlines() if l.startswith("-") and not l.startswith("---")]
    added = [l[1:] for l in diff.splitlines() if l.startswith("+") and not l.startswith("+++")]
    return removed, added


def refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


@pytest.mark.parametrize("layout", ["wheel", "checkout"])
def test_flashinfer_063(cli, real_unpacked, tmp_path, layout):
    repo = tmp_path / "flashinfer"
    repo.mkdir()
    paths = flashinfer_tree(real_unpacked["flashinfer"], repo, layout)
    pristine, pristine_refs = tree_digest(repo), refs(repo)

    dry = cli("run", "sm120-enable", "--repo", repo, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert tree_digest(repo) == pristine and refs(repo) == pristine_refs, "dry run writes nothing"

    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0, result.output
    assert git(repo, "diff", "--name-only", "main", "HEAD").split() == sorted(paths.values())
    assert len(git(repo, "log", "--format=%H", "main..HEAD").split()) == 2

    removed, added = changed_lines(repo, paths["comm"])
    assert removed == ["        supported_major_versions=[9, 10]"] and added == ["        supported_major_versions=[9, 10, 12]"]
    comm = (repo / paths["comm"]).read_text()
    func = comm[comm.index("def gen_trtllm_comm_module"):]
    assert "supported_major_versions=[9, 10, 12]" in func[: func.index("\ndef ")]

    removed, added = changed_lines(repo, paths["header"])
    assert removed == [OLD_GUARD] * 13 and added == [NEW_GUARD] * 13

    again = cli("run", "sm120-enable", "--repo", repo)
    assert again.exit_code == 0 and "already applied" in again.stderr
    assert len(git(repo, "log", "--format=%H", "main..HEAD").split()) == 2

    back = cli("revert", "sm120-enable", "--repo", repo)
    assert back.exit_code == 0, back.output
    assert tree_digest(repo) == pristine
    assert refs(repo) == pristine_refs


@pytest.mark.parametrize("layout", ["wheel", "checkout"])
def test_sglang_058(cli, real_unpacked, tmp_path, layout):
    repo = tmp_path / "sglang"
    repo.mkdir()
    paths = sglang_tree(real_unpacked["sglang"], repo, layout)
    pristine, pristine_refs = tree_digest(repo), refs(repo)

    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0, result.output
    assert len(git(repo, "log", "--format=%H", "main..HEAD").split()) == 2

    removed, added = changed_lines(repo, paths["communicator"])
    assert removed == ["        (_is_sm90_supported or _is_sm100_supported)"]
    assert sorted(added) == sorted([
        "    is_sm120_supported,",
        "_is_sm120_supported = _is_cuda and is_sm120_supported()",
        "        (_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)",
    ])
    text = (repo / paths["communicator"]).read_text()
    assert re.search(r"_is_sm100_supported = _is_cuda and is_sm100_supported\(\)\n_is_sm120_supported = ", text)

    removed, added = changed_lines(repo, paths["server_args"])
    assert removed == ["            and (is_sm90_supported() or is_sm100_supported())"]
    assert added == ["            and (is_sm90_supported() or is_sm100_supported() or is_sm120_supported())"]

    for rel in paths.values():
        compile((repo / rel).read_text(), rel, "exec")

    back = cli("revert", "sm120-enable", "--repo", repo)
    assert back.exit_code == 0, back.output
    assert tree_digest(repo) == pristine and refs(repo) == pristine_refs


def test_dirty_real_tree_refused_with_edit_intact(cli, real_unpacked, tmp_path):
    repo = tmp_path / "flashinfer"
    repo.mkdir()
    paths = flashinfer_tree(real_unpacked["flashinfer"], repo, "wheel")
    header = repo / paths["header"]
    header.write_bytes(header.read_bytes() + b"// my local experiment\n")
    before, before_refs = tree_digest(repo), refs(repo)
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 4 and paths["header"] in result.stderr
    assert tree_digest(repo) == before and refs(repo) == before_refs
