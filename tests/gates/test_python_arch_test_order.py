"""python_arch_test: where a new predicate goes in a chain, and how an over-long test is split.

A chain of two or more predicates in ascending arch order keeps that order (SGLang 0.5.16 -> 0.5.17,
quantization/mxfp4.py: `not is_sm90_supported() and not is_sm120_supported()` gains
`not is_sm100_supported()` between them); a lone predicate gets the new one appended (0.5.21 -> 0.5.22:
`get_platform().is_sm120` -> `(... or get_platform().is_sm110)`). A test that is nothing but the
predicates, with several top-level `and`/`or`s, grown past 88 columns is split as black splits it.
Fixtures are in the shape of those files, written here.
"""

from textwrap import dedent

import pytest

from codemods.core.arch import DEFAULT_ARCHS, parse_archs
from codemods.gates import apply_edits
from codemods.gates.python.predicates.reading import read, table
from codemods.gates.python.python_arch_test import find, widen

SGLANG = table(
    {"is_sm80_supported": ["sm_8x"], "is_sm90_supported": ["sm_9x"], "is_sm100_supported": ["sm_10x"],
     "is_sm110_supported": ["sm_11x"], "is_sm120_supported": ["sm_12x"]},
    "sglang.toml",
)  # fmt: skip
IMPORT = (
    "from sglang.srt.utils import (\n    is_sm90_supported,\n    is_sm100_supported,\n    is_sm110_supported,\n"
    "    is_sm120_supported,\n)\n"
)


def _rewrite(source: bytes, archs: str) -> bytes:
    meanings = {**SGLANG, **read(source, "x.py", SGLANG)}
    edits = []
    for gate in find(source, DEFAULT_ARCHS, meanings):
        edits += widen(source, gate, parse_archs(archs), DEFAULT_ARCHS, meanings)
    return apply_edits(source, edits)


@pytest.mark.parametrize(
    "test, archs, after",
    [
        pytest.param(
            "is_sm90_supported() or is_sm120_supported()", "sm_100,sm_103",
            "is_sm90_supported() or is_sm100_supported() or is_sm120_supported()",
            id="or-chain-in-order",
        ),
        pytest.param(
            "not (is_sm90_supported() or is_sm120_supported())", "sm_110",
            "not (is_sm90_supported() or is_sm110_supported() or is_sm120_supported())",
            id="negated-or-chain-in-order",
        ),
        pytest.param(
            "is_sm120_supported()", "sm_110",
            "is_sm120_supported() or is_sm110_supported()",
            id="lone-predicate-appends",
        ),
        pytest.param(
            "is_sm120_supported() or is_sm90_supported()", "sm_100,sm_103",
            "is_sm120_supported() or is_sm90_supported() or is_sm100_supported()",
            id="unordered-chain-appends",
        ),
        pytest.param(
            "is_sm90_supported() or is_sm100_supported()", "sm_120,sm_121",
            "is_sm90_supported() or is_sm100_supported() or is_sm120_supported()",
            id="sorting-last-appends",
        ),
    ],
)
def test_new_predicate_goes_where_the_chain_order_says(test: str, archs: str, after: str) -> None:
    source = (IMPORT + f"\n\ndef check():\n    if {test}:\n        raise RuntimeError('needs the arch')\n").encode()
    widened = _rewrite(source, archs)
    assert widened == source.replace(test.encode(), after.encode())
    assert _rewrite(widened, archs) == widened


def test_over_long_negated_chain_is_split_as_black_splits_it() -> None:
    before = dedent(
        """\
        class Mxfp4MoEMethod:
            def process_weights_after_loading(self, layer):
                if self.use_marlin:
                    if not is_sm90_supported() and not is_sm120_supported():
                        raise RuntimeError("MXFP4 Marlin requires SM90 or SM120.")
        """
    )
    after = dedent(
        """\
        class Mxfp4MoEMethod:
            def process_weights_after_loading(self, layer):
                if self.use_marlin:
                    if (
                        not is_sm90_supported()
                        and not is_sm100_supported()
                        and not is_sm120_supported()
                    ):
                        raise RuntimeError("MXFP4 Marlin requires SM90 or SM120.")
        """
    )
    source = (IMPORT + "\n\n" + before).encode()
    widened = _rewrite(source, "sm_100,sm_103")
    assert widened == (IMPORT + "\n\n" + after).encode()
    assert _rewrite(widened, "sm_100,sm_103") == widened
    [gate] = find(widened, DEFAULT_ARCHS, SGLANG)
    assert {a.major for a in gate.admits.admitted} == {9, 10, 12}


def test_test_with_other_conditions_is_split_as_black_does() -> None:
    # `cond and not P and not Q` grown past 88 columns: black puts the whole test in parentheses, one operand a
    # line, though the gate is only its last two operands (what ruff format writes: tests/gates/test_wrap.py)
    test = "self.enabled and self.fp4 and not is_sm90_supported()"
    source = (IMPORT + f"\n\ndef check(self):\n    if {test}:\n        raise ValueError('needs SM90')\n").encode()
    widened = _rewrite(source, "sm_120,sm_121")
    split = (
        "    if (\n        self.enabled\n        and self.fp4\n        and not is_sm90_supported()\n"
        "        and not is_sm120_supported()\n    ):\n"
    )
    assert widened == source.replace(f"    if {test}:\n".encode(), split.encode())
    assert _rewrite(widened, "sm_120,sm_121") == widened
