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


# ---------------------------------------------------------------- 2-5. what the statement around a Python gate says

_BACKEND = """\
import torch
from sglang.srt.utils import is_sm100_supported

_is_cuda = torch.cuda.is_available()
CUDA_CAPABILITY = torch.cuda.get_device_capability()


class PagedBackend:
    def __init__(self, runner):
        self.runner = runner
        backend = "auto"
        if is_sm100_supported():
            backend = "cutlass"
        self.backend = backend


class SplitBackend:
    def __init__(self, runner):
        if is_sm100_supported():
            self.kernel = "tcgen05"
        else:
            self.kernel = "mma"


def make_fa3(runner):
    assert torch.cuda.get_device_capability()[0] == 9, (
        "FA3 backend requires SM>=80 and SM<=90. Use another attention backend."
    )
    return runner


def make_ring(runner):
    if torch.cuda.get_device_capability()[0] != 9:
        raise ValueError("the ring kernel only runs on sm90")
    return runner


def make_plain(runner):
    assert torch.cuda.get_device_capability()[0] == 9
    return runner


def is_hopper():
    return torch.cuda.get_device_capability() == (9, 0)


def is_blackwell():
    return torch.cuda.get_device_capability()[0] == 10


def block_sizes(head_dim):
    if _is_cuda and CUDA_CAPABILITY[0] >= 9:
        BLOCK_M, BLOCK_N = (128, 64)
    elif _is_cuda and CUDA_CAPABILITY[0] >= 8:
        if CUDA_CAPABILITY[1] == 9:
            BLOCK_M, BLOCK_N = (64, 64)
        else:
            BLOCK_M, BLOCK_N = (128, 128)
    else:
        BLOCK_M, BLOCK_N = (64, 64)
    if CUDA_CAPABILITY[0] == 9:
        num_stages = 3
    return BLOCK_M, BLOCK_N


def pick_backend(runner):
    table = {
        "fa3": make_fa3 if is_sm100_supported() else make_plain,
    }
    return table


def launch(x):
    if CUDA_CAPABILITY[0] >= 9:
        impl = "wgmma"
    elif CUDA_CAPABILITY[0] >= 8:
        if CUDA_CAPABILITY[1] == 9:
            impl = "ada_mma"
        else:
            impl = "mma"
    return impl
"""


def _by_line(tmp_path: Path, arch: Arch = SM120) -> dict[int, dict]:
    root = _write(tmp_path, {
        "python/sglang/srt/__init__.py": "",
        "python/sglang/srt/layers/attention/backends.py": _BACKEND,
    })
    records = [g for g in scan(root, arch, jobs=1).gates if g["file"].endswith("backends.py") and g["excludes_arch"]]
    return {g["line"]: g for g in records}


def _line(text: str) -> int:
    return _BACKEND.splitlines().index(text) + 1


def test_an_if_inside_a_function_does_not_say_the_function_does_not_run(tmp_path):
    gates = _by_line(tmp_path)
    kept = gates[_line("        if is_sm100_supported():")]
    assert kept["classification"] == "needs-human"
    assert "does not run" not in kept["reason"] and "keeps `backend` as set before the `if`" in kept["reason"]
    other = gates[_line("        if is_sm100_supported():") + 7]
    assert other["symbol"].endswith("__init__") and "takes the `else`" in other["reason"]


def test_an_earlier_arm_of_the_chain_takes_the_arch(tmp_path):
    gates = _by_line(tmp_path, SM121)
    inner = gates[_line("            impl = \"ada_mma\"") - 1]
    assert inner["classification"] == "covered", inner
    assert "the earlier arm `CUDA_CAPABILITY[0] >= 9`" in inner["reason"]


def test_a_predicate_definition_is_a_definition_not_widenable(tmp_path):
    gates = _by_line(tmp_path)
    hopper = gates[_line("    return torch.cuda.get_device_capability() == (9, 0)")]
    assert hopper["classification"] == "definition" and "`is_hopper`" in hopper["reason"]
    blackwell = gates[_line("    return torch.cuda.get_device_capability()[0] == 10")]
    assert blackwell["classification"] == "needs-human" and "name covers it" in blackwell["reason"]


def test_an_assert_or_raise_naming_an_arch_is_a_requirement(tmp_path):
    gates = _by_line(tmp_path)
    fa3 = gates[_line("    assert torch.cuda.get_device_capability()[0] == 9, (")]
    assert fa3["classification"] == "needs-human" and "stated requirement" in fa3["reason"]
    ring = gates[_line("    if torch.cuda.get_device_capability()[0] != 9:")]
    assert ring["classification"] == "needs-human" and "stated requirement" in ring["reason"]
    # no message: not a stated requirement, but a Hopper-only assert is code for another kind of arch than sm_120
    plain = gates[_line("    assert torch.cuda.get_device_capability()[0] == 9")]
    assert plain["classification"] == "other-arch" and "the assert at line" in plain["reason"]
    assert "written for sm_90, another kind of arch than sm_120" in plain["reason"]


def test_a_tuning_branch_is_its_own_group(cli, tmp_path):
    gates = _by_line(tmp_path)
    tuning = gates[_line("        if CUDA_CAPABILITY[1] == 9:")]
    assert tuning["classification"] == "tuning", tuning
    assert "BLOCK_M, BLOCK_N" in tuning["reason"] and "earlier arm" in tuning["reason"]
    stages = gates[_line("    if CUDA_CAPABILITY[0] == 9:")]
    assert stages["classification"] == "tuning" and "num_stages" in stages["reason"]
    text = cli("scan", "--repo", tmp_path, "--arch", "sm_120", "--no-cache").stdout
    assert "tuning (2): block sizes or heuristics picked by capability: review" in text


# ---------------------------------------------------------------- 6. feature guards

_WGMMA = """\
#pragma once

__device__ void gemm_tile(float* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  out[0] = 1.0f;
#endif
}
"""


def test_a_feature_guard_says_which_features_it_needs(cli, tmp_path):
    root = _write(tmp_path, {"include/flashinfer/gemm/wgmma_tile.cuh": _WGMMA})
    [gate] = [g for g in scan(root, SM120, jobs=1).gates if g["excludes_arch"]]
    assert gate["features"] == ["sm_90a"] and gate["reason"].startswith("the guard needs sm_90a features; ")
    text = cli("scan", "--repo", root, "--arch", "sm_120", "--no-cache").stdout
    assert "(needs sm_90a features)" in text and "admits none" not in text
    sarif = json.loads(cli("scan", "--repo", root, "--arch", "sm_120", "--no-cache", "--format", "sarif").stdout)
    assert "(admits none: needs sm_90a features)" in sarif["runs"][0]["results"][0]["message"]["text"]


def test_a_value_picked_by_a_predicate_is_a_fallback_not_a_function_that_does_not_run(tmp_path):
    gates = _by_line(tmp_path)
    chosen = gates[_line('        "fa3": make_fa3 if is_sm100_supported() else make_plain,')]
    assert chosen["classification"] == "needs-human", chosen
    assert chosen["reason"].startswith("sm_120 gets `make_plain` instead") and "does not run" not in chosen["reason"]


# A refusal whose message says what the code needs, without a range word ("requires SM90", not "SM>=90"): the shapes
# of SGLang 0.5.23's argument hooks, kernels and tests (bench/precision).
_REFUSALS = {
    "python/sglang/srt/__init__.py": "",
    "python/sglang/srt/layers/comm_hooks.py": """\
        import torch
        from sglang.srt.utils import is_sm100_supported


        def pick_allgather(backend):
            if backend == "fused":
                if not is_sm100_supported():
                    raise ValueError("the fused allgather backend requires SM100 (Blackwell).")
            return backend


        def check_attn(cfg):
            if cfg.attn == "trtllm":
                assert is_sm100_supported(), "--attn trtllm needs an SM100/SM103 GPU."
            return cfg


        def skinny_gemm():
            if torch.cuda.get_device_capability() != (12, 0):
                raise RuntimeError("the skinny GEMM requires SM120")
            return 1
        """,
    "test/srt/test_tiles.py": """\
        import unittest

        import torch


        class TestTiles(unittest.TestCase):
            def test_sm90_tiles(self):
                if torch.cuda.get_device_capability() != (9, 0):
                    self.skipTest("requires the SM90 tile kernel")
                self.assertTrue(True)
        """,
}


def _refusals(tmp_path: Path, arch: Arch) -> dict[tuple[str, str], dict]:
    root = _write(tmp_path, _REFUSALS)
    return {(Path(g["file"]).name, g["symbol"].split(".")[-1]): g for g in scan(root, arch, jobs=1).gates
            if g["excludes_arch"]}


def test_a_refusal_saying_what_it_requires_is_a_requirement_without_a_range_word(tmp_path):
    gates = _refusals(tmp_path, SM121)
    for key in (("comm_hooks.py", "pick_allgather"), ("comm_hooks.py", "check_attn"),
                ("test_tiles.py", "test_sm90_tiles")):
        assert gates[key]["classification"] == "needs-human", gates[key]
        assert "stated requirement" in gates[key]["reason"], gates[key]
    # Naming the scanned arch's own family (SM120, scanning sm_121): the check may predate the arch; widen it.
    skinny = gates[("comm_hooks.py", "skinny_gemm")]
    assert skinny["classification"] == "widenable" and "stops on sm_121" in skinny["reason"], skinny


_RETURNS_FIRST = """\
import torch


def kernel_class_for(device):
    major, _minor = torch.cuda.get_device_capability(device)
    if major >= 10:
        return "TcgenGroupedGemm"
    if major == 9:
        return "WgmmaGroupedGemm"
    raise RuntimeError("no grouped GEMM for this GPU")
"""


def test_an_earlier_if_that_returns_takes_the_arch(tmp_path):
    # SGLang 0.5.23's cutedsl LoRA MoE picks its kernel class with `if ...: return` in a row, no `elif`: sm_121
    # returns at `major >= 10` and never reaches `major == 9`, so there is nothing to widen there.
    root = _write(tmp_path, {"python/sglang/srt/__init__.py": "", "python/sglang/srt/lora/pick.py": _RETURNS_FIRST})
    gates = {g["line"]: g for g in scan(root, SM121, jobs=1).gates if g["excludes_arch"]}
    hopper = gates[_RETURNS_FIRST.splitlines().index("    if major == 9:") + 1]
    assert hopper["classification"] == "covered", hopper
    assert "the earlier `if major >= 10` (line 6) returns" in hopper["reason"], hopper


def test_one_gate_text_is_reported_once(tmp_path):
    # SGLang 0.5.8's fp8 MoE: `assert is_sm100_supported() or is_sm90_supported()` was listed twice, once per
    # reader (python_arch_or and python_arch_test), which counted one gate as two widenable items.
    root = _write(tmp_path, {
        "python/sglang/srt/__init__.py": "",
        "python/sglang/srt/layers/moe_method.py": """\
            from sglang.srt.utils import is_sm90_supported, is_sm100_supported


            class GroupedMoE:
                def __init__(self, config):
                    self.config = config
                    assert is_sm100_supported() or is_sm90_supported()
            """,
    })
    records = [g for g in scan(root, SM120, jobs=1).gates if g["file"].endswith("moe_method.py")]
    assert [(g["line"], g["text"]) for g in records] == [(7, "is_sm100_supported() or is_sm90_supported()")], records
