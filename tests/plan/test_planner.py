"""The planner over GateKind: kind-blind, and the required-symbol check answered by the kind's missing_symbols."""

from __future__ import annotations

import re
from pathlib import Path
from textwrap import dedent

import pytest

from codemods.gates.registry import KINDS
from codemods.plan import planner
from codemods.recipes.load import detect, load_recipe

RECIPE = """\
id = "sm120-fusion"
summary = "widen one SGLang or-chain"
arch = "sm_120"

[[change]]
id = "sglang.fusion-gate"
project = "sglang"
file = "{python}/srt/layers/communicator.py"
kind = "python_arch_or"
function = "fusion_applies"
requires_symbol = "is_sm120_supported"
symbol_files = ["{python}/srt/utils/__init__.py"]
"""

COMMUNICATOR = """\
from sglang.srt.utils import (
    is_sm90_supported,
    is_sm100_supported,
)

_is_sm90_supported = is_sm90_supported()
_is_sm100_supported = is_sm100_supported()


def fusion_applies():
    return _is_sm90_supported or _is_sm100_supported
"""


def _sglang_wheel(tmp_path: Path, utils: str) -> Path:
    root = tmp_path / "wheel"
    layers = root / "sglang" / "srt" / "layers"
    layers.mkdir(parents=True)
    (layers / "communicator.py").write_text(COMMUNICATOR)
    (root / "sglang" / "srt" / "utils").mkdir()
    (root / "sglang" / "srt" / "utils" / "__init__.py").write_text(dedent(utils))
    return root


def _plan(tmp_path: Path, utils: str):
    (tmp_path / "recipe.toml").write_text(RECIPE)
    root = _sglang_wheel(tmp_path, utils)
    return planner.plan(load_recipe(tmp_path / "recipe.toml"), detect(root, ["sglang"]))


@pytest.mark.parametrize(
    "utils",
    [
        pytest.param("def is_sm120_supported():\n    return True\n", id="defined"),
        pytest.param(
            """\
            from .common import (
                is_sm100_supported,
                is_sm120_supported,
            )
            """,
            id="re-exported-by-a-parenthesized-import",
        ),
        pytest.param("if True:\n    is_sm120_supported = lambda: True\n", id="assigned-under-an-if"),
    ],
)
def test_required_symbol_found_in_a_symbol_file(tmp_path, utils):
    plan = _plan(tmp_path, utils)
    [change] = plan.changes
    assert (change.outcome, change.reason) == ("changed", "")
    after = change.after.decode()
    assert "    is_sm120_supported,\n)" in after
    assert "_is_sm120_supported = is_sm120_supported()\n" in after
    assert "return _is_sm90_supported or _is_sm100_supported or _is_sm120_supported\n" in after


@pytest.mark.parametrize(
    "utils",
    [
        pytest.param("def is_sm100_supported():\n    return True\n", id="absent"),
        pytest.param("# is_sm120_supported = ...\nX = 'is_sm120_supported = 1'\n", id="only-mentioned"),
        pytest.param("from .common import *\n", id="star-import-vouches-for-nothing"),
        pytest.param("def is_sm120_supported(:\n", id="not-python"),
    ],
)
def test_required_symbol_missing_refuses_the_change(tmp_path, utils):
    plan = _plan(tmp_path, utils)
    [change] = plan.changes
    assert change.outcome == "failed"
    assert change.reason == (
        "is_sm120_supported is not defined in this SGLang (looked in sglang/srt/utils/__init__.py); "
        "this version has no predicate for the arch, so none can be imported"
    )
    assert change.after == change.before == COMMUNICATOR.encode()


def test_a_file_that_imports_the_symbol_vouches_for_it(tmp_path):
    """missing_symbols leaves out what the file imports already: no symbol file is needed then."""
    (tmp_path / "recipe.toml").write_text(RECIPE)
    root = _sglang_wheel(tmp_path, "")
    communicator = root / "sglang/srt/layers/communicator.py"
    communicator.write_text(COMMUNICATOR.replace("    is_sm100_supported,\n", "    is_sm100_supported,\n    is_sm120_supported,\n"))
    [change] = planner.plan(load_recipe(tmp_path / "recipe.toml"), detect(root, ["sglang"])).changes
    assert change.outcome == "changed", change.reason
    assert change.after.decode().count("is_sm120_supported,\n") == 1  # not imported twice


def test_the_planner_names_no_gate_kind():
    """What a kind does is asked through its GateKind hooks; the planner never branches on a kind's name."""
    folder = Path(planner.__file__).parent
    source = "\n".join(path.read_text() for path in sorted(folder.glob("*.py")))
    assert not [name for name in KINDS if re.search(rf"[\"']{name}[\"']", source)]
    assert "inspect" not in source and ".kind ==" not in source and ".kind !=" not in source


LIST_RECIPE = """\
id = "sm120-comm"
summary = "widen one FlashInfer JIT list"
arch = "sm_120"

[[change]]
id = "flashinfer.comm-jit"
project = "flashinfer"
file = "{python}/jit/comm.py"
kind = "python_arch_list"
function = "gen_trtllm_comm_module"
"""

COMM = """\
def gen_trtllm_comm_module():
    return gen_jit_spec("trtllm_comm", sources, supported_major_versions=[9, 10])
"""


def test_a_list_in_a_file_libcst_finds_too_deep_is_widened(tmp_path):
    """python_arch_list reads and edits through the stdlib ast, which reads 650 implicitly concatenated strings
    (libcst's parse, which the edit once needed, calls that nesting too deep)."""
    root = tmp_path / "wheel" / "flashinfer"
    (root / "jit").mkdir(parents=True)
    (root / "data" / "include" / "flashinfer").mkdir(parents=True)
    deep = "x = (" + "'a' " * 650 + ")\n"
    (root / "jit" / "comm.py").write_text(COMM + deep)
    (tmp_path / "recipe.toml").write_text(LIST_RECIPE)
    [change] = planner.plan(load_recipe(tmp_path / "recipe.toml"), detect(tmp_path / "wheel", ["flashinfer"])).changes
    assert change.outcome == "changed", change.reason
    assert change.after.decode() == COMM.replace("[9, 10]", "[9, 10, 12]") + deep


@pytest.mark.parametrize("deep", [pytest.param("x = " + "-" * 400 + "1\n", id="unary-minus-400")])
def test_a_file_found_from_a_cut_down_read_but_too_deep_to_edit_is_a_failed_change(tmp_path, deep):
    """The list is found, but the file nests deeper than Python's own parser reads: the change fails naming the
    file, no exception reaches the caller."""
    root = tmp_path / "wheel" / "flashinfer"
    (root / "jit").mkdir(parents=True)
    (root / "data" / "include" / "flashinfer").mkdir(parents=True)
    (root / "jit" / "comm.py").write_text(COMM + deep)
    (tmp_path / "recipe.toml").write_text(LIST_RECIPE)
    plan = planner.plan(load_recipe(tmp_path / "recipe.toml"), detect(tmp_path / "wheel", ["flashinfer"]))
    [change] = plan.changes
    assert (change.outcome, change.too_deep) == ("failed", True)
    assert change.reason == "flashinfer/jit/comm.py: nested too deeply (codemod reads at most 64 levels)"
    assert change.after == change.before


SKIPS_RECIPE = '''\
id = "fp4-tests-sm110"
summary = "two skips in one file, one import for both"
arch = "sm_110"

[[change]]
id = "flashinfer.fp4-skips"
project = "flashinfer"
file = "tests/test_fp4.py"
kind = "python_arch_test"
all = true
'''

SKIPS = """\
import torch

from flashinfer.utils import is_sm100a_supported


def test_a(device):
    if not is_sm100a_supported(torch.device(device)):
        pytest.skip("needs SM100")


def test_b():
    if not is_sm100a_supported(torch.device("cuda")):
        pytest.skip("needs SM100")
"""


def test_gates_that_each_need_the_same_import_get_it_once(tmp_path):
    """Each gate's widening adds the import it needs: two gates of one file give the same import edit, spliced
    once (FlashInfer 635505f75's test_fp4_quantize.py: it failed "the rewritten gate does not admit the target
    (internal check)", the edit counted twice when placing the gates after it)."""
    (tmp_path / "recipe.toml").write_text(SKIPS_RECIPE)
    root = tmp_path / "checkout"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_fp4.py").write_text(SKIPS)
    (root / "include" / "flashinfer").mkdir(parents=True)
    (root / "flashinfer" / "jit").mkdir(parents=True)
    (root / "flashinfer" / "utils.py").write_text(
        "def is_sm100a_supported(device):\n    major, minor = get_compute_capability(device)\n    return major == 10 and minor == 0\n\n\n"
        "def is_sm110a_supported(device):\n    major, minor = get_compute_capability(device)\n    return major == 11 and minor == 0\n"
    )
    (pc,) = planner.plan(load_recipe(tmp_path / "recipe.toml"), detect(root, ["flashinfer"])).changes
    assert pc.outcome == "changed", pc.reason
    after = pc.after.decode()
    assert after.count("is_sm110a_supported") == 3  # the import once, each skip once
    assert "from flashinfer.utils import is_sm100a_supported, is_sm110a_supported\n" in after


def test_a_table_entry_a_later_release_defines_is_left_out_for_an_older_tree():
    """[predicates_since]: FlashInfer's `is_sm12x_supported` (0.6.5 on) is no predicate a 0.3.1 tree can import."""
    from codemods.recipes.load import projects

    flashinfer = projects()["flashinfer"]
    assert "is_sm12x_supported" not in flashinfer.predicate_table("0.3.1")
    assert "is_sm12x_supported" in flashinfer.predicate_table("0.6.5")
    assert "is_sm12x_supported" in flashinfer.predicate_table("")  # version unknown: the whole table
    assert "is_sm120a_supported" in flashinfer.predicate_table("0.3.1")


TEST_RECIPE = """\
id = "cutlass-moe-sm90"
summary = "widen one SGLang predicate test"
arch = "sm_90"

[[change]]
id = "sglang.cutlass-moe"
project = "sglang"
file = "{python}/srt/layers/quantization/fp8.py"
kind = "python_arch_test"
function = "create_weights"
"""

FP8 = """\
from sglang.srt.layers.utils import is_sm100_supported


class Fp8MoEMethod:
    def create_weights(self, layer):
        if self.cutlass_fp8_supported and is_sm100_supported():
            layer.ab_strides = make_strides()
"""


@pytest.mark.parametrize(
    "layer_utils, outcome",
    [
        pytest.param("def is_sm100_supported():\n    return major == 10\n", "failed", id="the-module-lacks-it"),
        pytest.param(
            "def is_sm90_supported():\n    return major == 9\n\n\ndef is_sm100_supported():\n    return major == 10\n",
            "changed", id="the-module-defines-it",
        ),
        pytest.param("from sglang.srt.utils.common import *\n", "changed", id="star-import-is-not-vouched-against"),
        pytest.param(  # as one written for a later Python (PEP 701's nested f-string quotes) is to 3.11
            "def is_sm100_supported():\n    return major == 10\n\n\ndef later(:\n", "changed",
            id="a-module-this-python-cannot-read-is-not-vouched-against",
        ),
    ],
)
def test_an_imported_predicate_must_exist_in_the_module_it_comes_from(tmp_path, layer_utils, outcome):
    """The [predicates] table says what `is_sm90_supported` means, not that this tree has it: SGLang 0.4.10's
    srt/layers/utils.py defines `is_sm100_supported` alone, and importing `is_sm90_supported` from it would
    break the import of fp8.py (round 8, sg-cutlass-moe-fp8-sm90)."""
    (tmp_path / "recipe.toml").write_text(TEST_RECIPE)
    root = tmp_path / "wheel"
    quantization = root / "sglang" / "srt" / "layers" / "quantization"
    quantization.mkdir(parents=True)
    (quantization / "fp8.py").write_text(FP8)
    (root / "sglang" / "srt" / "layers" / "utils.py").write_text(layer_utils)
    [change] = planner.plan(load_recipe(tmp_path / "recipe.toml"), detect(root, ["sglang"])).changes
    assert change.outcome == outcome, change.reason
    if outcome == "failed":
        assert change.reason == (
            "sglang/srt/layers/quantization/fp8.py:6: cannot widen `is_sm100_supported()`: `is_sm90_supported` is not"
            " defined in sglang/srt/layers/utils.py, which the new import would take it from: this version has no"
            " such predicate, and a recipe does not write one"
        )
        assert change.after == change.before == FP8.encode()
    else:
        after = change.after.decode()
        assert "from sglang.srt.layers.utils import is_sm90_supported, is_sm100_supported\n" in after
        assert "and (is_sm100_supported() or is_sm90_supported()):" in after


def test_a_refusal_quotes_the_first_line_of_a_gate_of_several():
    """Round 12 bug 9: a refusal for an unnamed dict quoted all five of its lines in one message."""
    from codemods.plan.widen import _quoted

    assert _quoted('{\n    "sm_90": 1,\n    "sm_100": 2,\n}') == "{ ..."
    assert _quoted("  [9, 10]  ") == "[9, 10]"
