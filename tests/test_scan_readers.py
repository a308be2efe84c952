"""scan reads what a gate means for the code it guards (issue 18 items 1 and 3), on trees in FlashInfer's shape:
predicates by their definitions, a predicate's definition as a gate, arch-keyed maps, and polarity."""

from __future__ import annotations

from pathlib import Path

from codemods.audit.scan import scan
from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates import python_arch_or

SM121 = Arch.parse("sm_121")

UTILS = '''\
import torch


def get_compute_capability(device: torch.device) -> Tuple[int, int]:
    return torch.cuda.get_device_capability(device.index)


def version_at_least(version: str, base: str) -> bool:
    return tuple(map(int, version.split("."))) >= tuple(map(int, base.split(".")))


def is_sm90a_supported(device: torch.device) -> bool:
    major, _ = get_compute_capability(device)
    return major == 9 and version_at_least(torch.version.cuda, "12.3")


def is_sm120a_supported(device: torch.device) -> bool:
    major, minor = get_compute_capability(device)
    return major == 12 and minor == 0 and version_at_least(torch.version.cuda, "12.8")


def is_sm120f_supported(device: torch.device) -> bool:
    major, minor = get_compute_capability(device)
    return major == 12 and minor == 0 and version_at_least(torch.version.cuda, "12.9")


def is_sm121a_supported(device: torch.device) -> bool:
    major, minor = get_compute_capability(device)
    return major == 12 and minor == 1 and version_at_least(torch.version.cuda, "12.9")
'''

DECODE = '''\
from .utils import is_sm90a_supported, is_sm120a_supported


def get_trtllm_gen_decode_module(device):
    if is_sm90a_supported(device) or is_sm120a_supported(device):
        return build_decode_module()
    raise RuntimeError("trtllm-gen decode needs SM90a or SM120a")
'''

COMPAT = '''\
import cutlass.cute as cute

_TMEM_MAX_ALLOC_COLUMNS_MAP = {"sm_100": 512, "sm_103": 512, "sm_120": 512}


def get_max_tmem_alloc_cols(compute_capability: str) -> int:
    if hasattr(cute.arch, "get_max_tmem_alloc_cols"):
        return cute.arch.get_max_tmem_alloc_cols(compute_capability)
    if compute_capability not in _TMEM_MAX_ALLOC_COLUMNS_MAP:
        raise ValueError(f"Unsupported compute capability: {compute_capability}")
    return _TMEM_MAX_ALLOC_COLUMNS_MAP[compute_capability]
'''

TEST_GEMM = '''\
import pytest
import torch


@pytest.mark.skipif(torch.cuda.get_device_capability()[0] not in [10, 11, 12], reason="needs SM100+")
def test_mm_fp4():
    run_mm_fp4()


@pytest.mark.skipif(torch.cuda.get_device_capability()[0] not in [10], reason="needs SM100")
def test_tgv_gemm():
    run_tgv_gemm()


def test_fp8_groupwise():
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("needs SM90")
    run_groupwise()
'''


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A FlashInfer wheel's layout (targets/projects/flashinfer.toml markers) holding `files`."""
    root = tmp_path / "site-packages"
    for folder in ("flashinfer/data/include/flashinfer", "flashinfer/data/csrc", "flashinfer/jit"):
        (root / folder).mkdir(parents=True)
    for rel, text in {"flashinfer/__init__.py": "", "flashinfer/utils.py": UTILS, **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _gates(root: Path, kind: str) -> list[tuple[str, int, list[str], bool, str]]:
    return [(g["file"], g["line"], g["admits"], g["excludes_arch"], g["classification"])
            for g in scan(root, SM121, jobs=1).gates if g["kind"] == kind]


def test_an_or_chain_admits_what_its_predicates_definitions_say(tmp_path):
    # before: read by names, `is_sm120a_supported` admitted every SM12x, so the chain admitted sm_121
    [by_name] = python_arch_or.find(DECODE.encode(), DEFAULT_ARCHS)
    assert "sm_121" in by_name.admits.names()
    # after: FlashInfer's definition checks `minor == 0`: the chain excludes sm_121
    root = _tree(tmp_path, {"flashinfer/decode.py": DECODE})
    [(file, line, admits, excludes, _)] = _gates(root, "python_arch_or")
    assert (file, line, admits, excludes) == ("flashinfer/decode.py", 5, ["sm_90", "sm_120"], True)


def test_a_predicate_definition_is_a_gate(tmp_path):
    root = _tree(tmp_path, {})
    found = {line: (admits, classification) for _, line, admits, _, classification in _gates(root, "python_predicate")}
    assert found == {
        14: (["sm_90"], "covered"),  # sm_90a: a target sm_121 does not run
        19: (["sm_120"], "covered"),  # sm_120a: compute_120a cannot be compiled for sm_121a
        24: (["sm_120"], "blocker"),  # sm_120f runs on sm_121, the definition refuses it
        29: (["sm_121"], "admits"),
    }
    fixed = UTILS.replace("return major == 12 and minor == 0 and version_at_least(torch.version.cuda, \"12.9\")",
                          "return major == 12 and version_at_least(torch.version.cuda, \"12.9\")")
    (root / "flashinfer/utils.py").write_text(fixed)
    after = {line: classification for _, line, _, _, classification in _gates(root, "python_predicate")}
    assert after[24] == "admits"


def test_a_predicate_definition_is_read_once_as_the_predicate(tmp_path):
    # `major, minor = get_compute_capability(device)` is FlashInfer's (major, minor) (HELPERS): its comparisons are
    # capability comparisons; in a predicate's deciding return they are the predicate, which knows its target
    # (sm_120a: covered), not widenable comparisons reported a second time on the same line
    root = _tree(tmp_path, {"flashinfer/gemm.py": GEMM_HEURISTIC})
    gates = scan(root, SM121, jobs=1).gates
    assert [g["line"] for g in gates if g["file"] == "flashinfer/utils.py" and g["kind"] == "python_capability"] == []
    assert [(g["line"], g["text"], g["admits"]) for g in gates if g["file"] == "flashinfer/gemm.py"] == [
        (6, "major == 12", ["sm_120"]), (6, "minor == 0", ["sm_120"]),
    ]  # fmt: skip


GEMM_HEURISTIC = '''\
from flashinfer.utils import get_compute_capability


def _check_b12x_mm_fp4(a):
    major, minor = get_compute_capability(a.device)
    if not (major == 12 and minor == 0):
        raise ValueError("b12x requires SM120")
    return run_b12x(a)
'''


def test_an_arch_keyed_map_with_a_raising_lookup_is_a_gate(tmp_path):
    root = _tree(tmp_path, {"flashinfer/cute_dsl/__init__.py": "", "flashinfer/cute_dsl/compat.py": COMPAT})
    [gate] = [g for g in scan(root, SM121, jobs=1).gates if g["kind"] == "python_arch_map"]
    assert (gate["file"], gate["line"], gate["admits"], gate["classification"]) == (
        "flashinfer/cute_dsl/compat.py", 3, ["sm_100", "sm_103", "sm_120"], "blocker")
    assert gate["reason"].startswith("`_TMEM_MAX_ALLOC_COLUMNS_MAP` has no key for sm_121: the lookup at line 9 fails")
    # a copy the package cannot import (no __init__.py on the way, as CUTLASS's python/ in flashinfer/data)
    root2 = _tree(tmp_path / "copy", {"flashinfer/data/cutlass/python/cute/compat.py": COMPAT})
    [copy] = [g for g in scan(root2, SM121, jobs=1).gates if g["kind"] == "python_arch_map"]
    assert copy["classification"] == "covered" and "has no __init__.py" in copy["reason"]


def test_skips_and_raises_report_what_the_test_runs_on(tmp_path):
    root = tmp_path / "tests"
    root.mkdir()
    (root / "test_gemm.py").write_text(TEST_GEMM)
    found = [(g["line"], g["admits"], g["excludes_arch"]) for g in scan(root, SM121, jobs=1).gates]
    assert found == [
        (5, ["sm_100", "sm_103", "sm_110", "sm_120", "sm_121"], False),  # runs on 10, 11 and 12
        (10, ["sm_100", "sm_103"], True),  # skips sm_121
        (16, ["sm_90"], True),  # skipped everywhere but SM90
    ]


PREDICATE_TESTS = '''\
def test_not_on_hopper():
    if is_sm90_supported():
        pytest.skip("not on Hopper")
    run()


def attention(q):
    if not is_sm100_supported():
        return fallback_attention(q)  # the body is the path: it runs where SM100 is not


def gemm(a):
    if not is_sm100_supported():
        raise RuntimeError("needs SM100")
    return gemm_sm100(a)


def moe(x):
    if use_cutlass and is_sm100_supported():
        raise RuntimeError("cutlass MoE is broken on SM100")  # SM100 still runs it without use_cutlass
    return moe_kernel(x)
'''


def test_predicate_tests_report_what_their_path_admits(tmp_path):
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "m.py").write_text(PREDICATE_TESTS)
    found = [(g["line"], g["excludes_arch"], "sm_90" in g["admits"], "sm_100" in g["admits"])
             for g in scan(root, SM121, jobs=1).gates]
    assert found == [
        (2, False, False, True),  # before: reported as admitting sm_90 only, the archs it skips
        (8, False, True, False),  # before: reported as admitting sm_100 only, where the fallback does not run
        (13, True, False, True),  # a check for SM100, as before
        (19, False, True, True),  # one operand of an `and` under a raise excludes nothing by itself
    ]
