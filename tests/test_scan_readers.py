"""scan reads what a gate means for the code it guards (issue 18 items 1 and 3), on trees in FlashInfer's shape:
predicates by their definitions, a predicate's definition as a gate, arch-keyed maps, and polarity."""

from __future__ import annotations

from pathlib import Path

from codemods.audit.scan import scan
from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates import apply_edits
from codemods.gates.python import python_arch_or
from codemods.gates.python import python_arch_test
from codemods.gates.python import python_capability
from codemods.gates.python.predicates.reading import read
from fixtures.predicates import COMPAT, SM120F_RETURN, SM120F_RETURN_FIXED, UTILS

SM121 = Arch.parse("sm_121")

DECODE = '''\
from .utils import is_sm90a_supported, is_sm120a_supported


def get_trtllm_gen_decode_module(device):
    if is_sm90a_supported(device) or is_sm120a_supported(device):
        return build_decode_module()
    raise RuntimeError("trtllm-gen decode needs SM90a or SM120a")
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
        16: (["sm_90"], "covered"),  # sm_90a: a target sm_121 does not run
        21: (["sm_120"], "covered"),  # sm_120a: compute_120a cannot be compiled for sm_121a
        26: (["sm_120"], "blocker"),  # sm_120f runs on sm_121, the definition refuses it
        31: (["sm_121"], "admits"),
    }
    fixed = UTILS.replace(SM120F_RETURN, SM120F_RETURN_FIXED)
    assert fixed != UTILS
    (root / "flashinfer/utils.py").write_text(fixed)
    after = {line: classification for _, line, _, _, classification in _gates(root, "python_predicate")}
    assert after[26] == "admits"


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
        "flashinfer/cute_dsl/compat.py", 4, ["sm_100", "sm_103", "sm_120"], "widenable")  # issue 17: run adds sm_120's value
    assert gate["reason"].startswith("`_TMEM_MAX_ALLOC_COLUMNS_MAP` has no key for sm_121: the lookup at line 10 fails")
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
        return fallback_attention(q)  # an early value, no refusal: the code after is the SM100 path


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
        # `if not P(): return value`: the code after is P's path, as `codemod run` reads it (it widens `not P` to
        # `not (P or Q)`); sm_121 gets the early value, a fallback (before: the body was read as the path, admitting
        # every arch but sm_100, so scan called sm_121 admitted where run would change its path)
        (8, True, False, True),
        (13, True, False, True),  # a check for SM100, as before
        (19, False, True, True),  # one operand of an `and` under a raise excludes nothing by itself
    ]


BACKEND_CHOICES = '''\
from flashinfer.utils import get_compute_capability


def batch_decode(query, backend="auto"):
    if backend == "auto":
        backend = "trtllm-gen" if get_compute_capability(query.device)[0] == 10 else "xqa"
    return run_decode(query, backend)


def _heuristic_mm_fp4(a, suitable):
    major, minor = get_compute_capability(a.device)
    is_sm120 = major == 12 and minor == 0
    if is_sm120:
        return [c for c in ("b12x", "cutlass") if c in suitable]
    return [c for c in ("cutlass", "b12x") if c in suitable]


def launch(a):
    major, _ = get_compute_capability(a.device)
    return run_gemm(a, use_tma=major == 10)


def _kernel_for(a):
    major, _ = get_compute_capability(a.device)
    return gen_kernel(a) if major == 10 else None


def check(a):
    major, minor = get_compute_capability(a.device)
    if not (major == 12 and minor == 0):
        raise ValueError("needs SM120")
    return run_check(a)
'''


def test_a_comparison_that_guards_no_code_path_is_not_a_blocker(tmp_path):
    # issue 18 item 2: a branch an arch does not take is a blocker only when the arch then gets nothing there
    root = _tree(tmp_path, {"flashinfer/backends.py": BACKEND_CHOICES})
    records = [g for g in scan(root, SM121, jobs=1).gates
               if g["file"] == "flashinfer/backends.py" and g["kind"] == "python_capability"]
    found = [(g["line"], g["text"], g["admits"], g["excludes_arch"], g["classification"]) for g in records]
    assert found == [
        # sm_121 takes the other value of `x if test else y`: a fallback at most (before: widenable)
        (6, "get_compute_capability(query.device)[0] == 10", ["sm_100", "sm_103"], True, "needs-human"),
        # a flag stored in a name: what uses it decides (before: widenable, once per comparison)
        (12, "major == 12", ["sm_120"], True, "unknown"),
        (12, "minor == 0", ["sm_120"], True, "unknown"),
        (20, "major == 10", ["sm_100", "sm_103"], True, "unknown"),  # a value passed to a call
        (25, "major == 10", ["sm_100", "sm_103"], True, "unknown"),  # `... else None`: what uses the None decides
        # a guard: `raise` where it does not hold, as before (sm_121 gets nothing there)
        (30, "major == 12", ["sm_120"], True, "widenable"),
        (30, "minor == 0", ["sm_120"], True, "widenable"),
    ]
    reasons = {g["line"]: g["reason"] for g in records}
    assert reasons[6].startswith("sm_121 gets `'xqa'` instead: the condition picks between two values")
    assert reasons[12] == 'a value, not a guard: what uses `is_sm120` decides; a change selects it with assigns = "is_sm120"'
    assert reasons[20] == "a value, not a guard: what `run_gemm` does with it decides"
    assert "picks `None` elsewhere" in reasons[25]


def test_the_recipe_still_reads_and_widens_a_backend_choice(tmp_path):
    # the recipes' side is unchanged: python_capability.find reads the comparison where it holds, and widens it
    data = BACKEND_CHOICES.encode()
    found = {(g.line, g.text) for g in python_capability.find(data, DEFAULT_ARCHS)}
    assert {(6, "get_compute_capability(query.device)[0] == 10"), (12, "major == 12 and minor == 0")} <= found
    [choice] = [g for g in python_capability.find(data, DEFAULT_ARCHS) if g.line == 6]
    widened = apply_edits(data, python_capability.widen(data, choice, (SM121,)))
    # 89 columns widened: black's parentheses around the value, split before `if` and `else` (what ruff writes)
    assert [line.strip() for line in widened.splitlines()[5:10]] == [
        b"backend = (", b'"trtllm-gen"', b"if get_compute_capability(query.device)[0] in (10, 12)", b'else "xqa"', b")"
    ]


EARLY_RETURN = '''\
from .utils import is_sm120a_supported


def _b12x_can_implement(a, b):
    if not is_sm120a_supported(a.device):
        return True
    return a.shape[1] % 128 == 0 and b.shape[1] % 128 == 0


def _b12x_requirement(a, b):
    if not is_sm120a_supported(a.device):
        raise ValueError("b12x needs SM120")
    return True
'''


def test_scan_and_run_read_an_early_return_of_a_value_alike(tmp_path):
    root = _tree(tmp_path, {"flashinfer/gemm/b12x.py": EARLY_RETURN})
    records = {g["line"]: g for g in scan(root, SM121, jobs=1).gates if g["kind"] == "python_arch_test"}
    early, refusal = records[5], records[11]
    # both exclude sm_121 from the code after, written for sm_120 (the polarity run widens by)
    assert (early["admits"], early["excludes_arch"], early["classification"]) == (["sm_120"], True, "needs-human")
    assert early["reason"].startswith("sm_121 returns `True` early instead (no refusal)")
    assert (refusal["admits"], refusal["excludes_arch"], refusal["classification"]) == (["sm_120"], True, "widenable")
    # run's reader: the same gate, excluding sm_121; widening it makes sm_121 take the code after
    data = (root / "flashinfer/gemm/b12x.py").read_bytes()
    meanings = read(UTILS.encode(), "flashinfer/utils.py")
    [gate, _] = python_arch_test.find(data, DEFAULT_ARCHS, meanings)
    assert (gate.line, gate.admits.admits(SM121)) == (5, False)
    widened = apply_edits(data, python_arch_test.widen(data, gate, (SM121,), DEFAULT_ARCHS, meanings))
    assert b"if not (is_sm120a_supported(a.device) or is_sm121a_supported(a.device)):\n        return True" in widened


EARLY_CAPABILITY = '''\
import torch


def use_fast_path(device):
    major, minor = torch.cuda.get_device_capability(device)
    if major != 12:
        return True
    return run_sm12x_check(device)
'''


def test_scan_reads_a_negated_capability_check_returning_early_as_run_does(tmp_path):
    # `if major != 12: return True` is a check for 12 (python_capability.find reads `!=` so, and widens it to
    # `not in (11, 12)` for sm_110): the code after is 12's path. Before, scan read the body as the path and
    # called it widenable for sm_121, which runs the code after it.
    root = _tree(tmp_path, {"flashinfer/gemm/__init__.py": "", "flashinfer/gemm/fast.py": EARLY_CAPABILITY})
    [for_121] = [g for g in scan(root, SM121, jobs=1).gates if g["kind"] == "python_capability"]
    assert (for_121["line"], for_121["admits"], for_121["excludes_arch"], for_121["classification"]) == (
        6, ["sm_120", "sm_121"], False, "admits")
    [for_100] = [g for g in scan(root, Arch.parse("sm_100"), jobs=1).gates if g["kind"] == "python_capability"]
    assert (for_100["excludes_arch"], for_100["classification"]) == (True, "needs-human"), for_100["reason"]
    assert for_100["reason"].startswith("sm_100 returns `True` early instead (no refusal): the code after is written")
    [gate] = python_capability.find(EARLY_CAPABILITY.encode())
    assert gate.admits.names() == for_121["admits"]


_EXITS = """\
void chunked(int sm) {
  if (sm == 120) {
    throw std::invalid_argument("chunked attention is not supported on SM120");
  }
  launch();
}

void fused(int sm) {
  if (sm != 90 && sm != 100) {
    throw std::invalid_argument("needs SM90 or SM100");
  }
  launch();
}

Runtime* build(int sm_version) {
  if (sm_version != 90) {
    THROW("only supports Hopper (SM90), but the device is %d", sm_version);
  }
  std::vector<std::string> flags = {"-std=c++17", "--gpu-architecture=sm_90a"};
  return compile(flags);
}
"""


def test_an_if_that_exits_is_an_error_path_widenable_only_where_widen_has_an_edit(tmp_path):
    """Round 11 bug 7: a C++ `if` that throws admits where its condition is false. For sm_120 `fused` is widenable
    (`&& sm != 120`), `chunked` a blocker: no rewrite makes `sm == 120` false on sm_120 alone."""
    root = _tree(tmp_path, {"csrc/checks.cu": _EXITS})
    gates = {g["line"]: g for g in scan(root, Arch.parse("sm_120"), jobs=1).gates if g["kind"] == "cpp_runtime_check"}
    assert {line: (g["excludes_arch"], g["classification"]) for line, g in gates.items()} == {
        2: (True, "blocker"), 9: (True, "widenable"), 16: (True, "needs-human")
    }
    # DeepGEMM's JIT compiler (FlashInfer's compiler.cuh) throws off Hopper and builds for sm_90a: a port, not a widening
    assert "builds for sm_90a, which sm_120 cannot run" in gates[16]["reason"]
    assert "stops there on sm_120 (`throw`)" in gates[2]["reason"] and "no edit" in gates[2]["reason"]
    assert "sm_121" in gates[2]["admits"] and "sm_120" not in gates[2]["admits"]


def test_a_coding_line_does_not_move_the_gates_scan_reports(tmp_path):
    """Python reads `# -*- coding: latin-1 -*-` files as Latin-1, so ast's columns after a non-ASCII character were
    off by a byte each; codemod reads every file as UTF-8 (found by tests/plan/test_recipe_fuzz.py)."""
    source = (
        '# -*- coding: latin-1 -*-\nimport torch\n\n\ndef pick():\n    name = "é"; return torch.cuda.get_device_capability()[0] == 9\n'
        '\n\ndef gen_module():\n    flags = ["é"]; return gen(supported_major_versions=[9, 10])\n'
    )
    root = _tree(tmp_path, {"flashinfer/pick.py": source})
    gates = [g for g in scan(root, SM121, jobs=1).gates if g["file"] == "flashinfer/pick.py"]
    assert sorted(g["text"] for g in gates) == ["[9, 10]", "torch.cuda.get_device_capability()[0] == 9"]
