"""Scan advice a maintainer can act on (issue 34 part 1): areas and --exclude, true reasons, definitions,
requirements, tuning branches and feature guards, on small trees in the shapes of SGLang and FlashInfer code."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from codemods.audit.scan import scan
from codemods.core.arch import Arch

SM120 = Arch.parse("sm_120")
SM121 = Arch.parse("sm_121")

# A gate each part of an SGLang checkout may hold: a capability test whose body refuses every other arch.
_REFUSING = """\
import torch


def {name}():
    if torch.cuda.get_device_capability()[0] != 9:
        raise RuntimeError("this path is written for Hopper")
    return 1
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def _sglang_checkout(root: Path) -> Path:
    return _write(root, {
        "python/sglang/srt/__init__.py": "",
        "python/sglang/srt/layers/moe.py": _REFUSING.format(name="fused_moe"),
        "python/sglang/test/test_moe.py": _REFUSING.format(name="test_fused_moe"),
        "test/srt/test_attention.py": _REFUSING.format(name="test_attention"),
        "benchmark/kernels/bench_moe.py": _REFUSING.format(name="bench_moe"),
        "python/sglang/bench_one_batch.py": _REFUSING.format(name="bench_one_batch"),
    })


def _gates(root: Path, arch: Arch = SM120, **options) -> dict[str, dict]:
    return {g["file"]: g for g in scan(root, arch, jobs=1, **options).gates if g["excludes_arch"]}


# ---------------------------------------------------------------- 1. areas and --exclude


def test_every_record_says_its_area(tmp_path):
    gates = _gates(_sglang_checkout(tmp_path))
    assert {file: g["area"] for file, g in gates.items()} == {
        "python/sglang/srt/layers/moe.py": "library",
        "python/sglang/test/test_moe.py": "tests",
        "test/srt/test_attention.py": "tests",
        "benchmark/kernels/bench_moe.py": "benchmarks",
        "python/sglang/bench_one_batch.py": "benchmarks",
    }


def test_text_lists_the_library_first_and_counts_each_area(cli, tmp_path):
    root = _sglang_checkout(tmp_path)
    result = cli("scan", "--repo", root, "--arch", "sm_120", "--no-cache")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "(1 library, 2 benchmarks, 2 tests)" in text
    order = [text.index(f"  -- {area} (") for area in ("library", "benchmarks", "tests")]
    assert order == sorted(order)
    assert text.index("python/sglang/srt/layers/moe.py:") < text.index("benchmark/kernels/bench_moe.py:") < text.index(
        "python/sglang/test/test_moe.py:")


def test_exclude_leaves_matching_files_and_folders_out(cli, tmp_path):
    root = _sglang_checkout(tmp_path)
    result = cli("scan", "--repo", root, "--arch", "sm_120", "--no-cache", "--format", "json",
                 "--exclude", "test", "--exclude", "*/test", "--exclude", "python/sglang/bench_*.py")
    assert result.exit_code == 0, result.output
    files = {g["file"] for g in json.loads(result.stdout)["gates"] if g["excludes_arch"]}
    assert files == {"python/sglang/srt/layers/moe.py", "benchmark/kernels/bench_moe.py"}
    text = cli("scan", "--repo", root, "--arch", "sm_120", "--no-cache", "--exclude", "benchmark").stdout
    assert "benchmark/kernels/bench_moe.py" not in text and "1 records left out" in text


def test_sarif_ranks_and_tags_each_result_by_area(cli, tmp_path):
    root = _sglang_checkout(tmp_path)
    sarif = json.loads(cli("scan", "--repo", root, "--arch", "sm_120", "--no-cache", "--format", "sarif").stdout)
    results = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "gate-excludes-arch"]
    placed = [(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], r["properties"]["tags"], r["rank"])
              for r in results]
    assert placed[0] == ("python/sglang/srt/layers/moe.py", ["library"], 90.0)
    assert {uri: tags for uri, tags, _ in placed}["test/srt/test_attention.py"] == ["tests"]
    ranks = [rank for _, _, rank in placed]
    assert ranks == sorted(ranks, reverse=True)


def test_the_project_files_exclude_is_applied(tmp_path, monkeypatch):
    from codemods.audit import areas

    root = _sglang_checkout(tmp_path)
    project = areas.for_tree(root)
    assert project.exclude == () and project.area("python/sglang/test/test_moe.py") == "tests"
    assert areas.from_table({"exclude": ["benchmark"]}).excluded("benchmark/kernels/bench_moe.py")
