"""python_arch_test's `calls` selector: the statements that only serve the named call are the feature's too."""

from textwrap import dedent, indent

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.core.arch import DEFAULT_ARCHS, parse_archs
from codemods.gates import CannotWiden, apply_edits
from codemods.gates.python.predicates.reading import read, table
from codemods.gates.python.python_arch_test import find, widen

SGLANG = table(
    {"is_sm90_supported": ["sm_9x"], "is_sm100_supported": ["sm_10x"], "is_sm120_supported": ["sm_12x"]},
    "sglang.toml",
)
SM12X = "sm_120,sm_121"

# The shape of SGLang 0.5.15's kvfp4_tensor.py: a function-local import of the predicates, then an
# `if` whose body imports the kernel, prepares its arguments, calls it and returns its result.
PACKED_KV = """\
import torch


class PackedKVUtil:
    @staticmethod
    def unpack(packed, scales, scale, dtype):
        from sglang.srt.utils import is_sm90_supported, is_sm100_supported

        rows, cols, half = packed.shape
        if {test}:
{body}
        return slow_unpack(packed, scales, scale).to(dtype)
"""


def _packed(body: str, test: str = "is_sm100_supported()") -> bytes:
    return PACKED_KV.format(test=test, body=indent(dedent(body).strip("\n"), " " * 12)).encode()


def _rewrite(source: bytes, calls: str) -> bytes:
    meanings = {**SGLANG, **read(source, "x.py", SGLANG)}
    edits = []
    for gate in find(source, DEFAULT_ARCHS, meanings, calls=calls):
        edits += widen(source, gate, parse_archs(SM12X), DEFAULT_ARCHS, meanings)
    return apply_edits(source, edits)


UNPACK = """\
from flashinfer import packed_kv_unpack

flat = packed.view(torch.uint8).reshape(rows * cols, half)
flat_scales = scales.view(torch.uint8).reshape(rows * cols, -1)
out = packed_kv_unpack(
    flat, flat_scales, scale, output_dtype=dtype
)
return out.reshape(rows, cols, -1)
"""

PACK = """\
from flashinfer import packed_kv_pack

# the kernel takes the scale as it is
packed_2d, scales_2d = packed_kv_pack(packed.reshape(rows * cols, -1), scale)
"""

WIDENED_IMPORT = """\
        from sglang.srt.utils import (
            is_sm90_supported,
            is_sm100_supported,
            is_sm120_supported,
        )
"""


@pytest.mark.parametrize(
    "body, calls",
    [
        pytest.param(UNPACK, "packed_kv_unpack", id="import-argument-preparation-call-return-sglang-0.5.15-dequantize"),
        pytest.param(PACK, "packed_kv_pack", id="import-and-a-tuple-assigned-call-sglang-0.5.15-quantize"),
        pytest.param(
            "import flashinfer.kv as kv\n\nout = kv.packed_kv_unpack(packed, scales)\nreturn out\n", "packed_kv_unpack",
            id="module-import-read-by-an-attribute-call",
        ),
    ],
)
def test_widen_a_block_whose_other_statements_serve_the_call(body: str, calls: str) -> None:
    source = _packed(body)
    [gate] = find(source, DEFAULT_ARCHS, SGLANG, calls=calls)
    assert "needs_human" not in gate.detail
    widened = _rewrite(source, calls)
    expected = source.decode().replace(
        "        from sglang.srt.utils import is_sm90_supported, is_sm100_supported\n", WIDENED_IMPORT
    ).replace("if is_sm100_supported():", "if is_sm100_supported() or is_sm120_supported():")
    assert widened.decode() == expected
    assert _rewrite(widened, calls) == widened


@pytest.mark.parametrize(
    "body, calls, named",
    [
        pytest.param(
            UNPACK.replace("return out", 'log_once("packed kv on flashinfer")\nreturn out'), "packed_kv_unpack",
            [r"line 18 \(`log_once\(\"packed kv on flashinfer\"\)`\)"],
            id="an-unrelated-call-among-them",
        ),
        pytest.param(
            UNPACK.replace("return out.reshape(rows, cols, -1)", "return finish(out)"), "packed_kv_unpack",
            [r"line 18 \(`return finish\(out\)`\)"],
            id="the-result-passed-to-another-free-function",
        ),
        pytest.param(
            UNPACK.replace("return out", "self.last_flat = flat\nreturn out"), "packed_kv_unpack",
            [r"line 13 \(`flat = packed", r"line 18 \(`self.last_flat = flat`\)"],
            id="a-prepared-argument-also-kept-elsewhere",
        ),
        pytest.param(
            "from flashinfer import packed_kv_unpack, warmup\n\nwarmup()\nreturn packed_kv_unpack(packed, scales)\n",
            "packed_kv_unpack",
            [r"line 11 \(`from flashinfer import packed_kv_unpack, warmup`\)", r"line 13 \(`warmup\(\)`\)"],
            id="an-import-that-also-serves-another-call",
        ),
    ],
)
def test_a_block_running_more_than_the_feature_needs_a_human(body: str, calls: str, named: list[str]) -> None:
    source = _packed(body)
    meanings = {**SGLANG, **read(source, "x.py", SGLANG)}
    [gate] = find(source, DEFAULT_ARCHS, meanings, calls=calls)
    assert len(gate.detail["needs_human"]) == len(named)
    with pytest.raises(CannotWiden, match="needs a human: the block of line 10 also runs .*" + ".*".join(named)):
        widen(source, gate, parse_archs(SM12X), DEFAULT_ARCHS, meanings)


def test_aot_flag_block_running_another_module_is_still_refused() -> None:
    # FlashInfer's aot.py (c25bd1486 split it): appending another module serves no named call; appending
    # the named call's result does (it reads what the feature binds, through a method)
    source = dedent("""\
    def gen_all_modules(has_sm120):
        jit_specs = []
        if has_sm120:
            gemm = gen_gemm_sm120_module()
            jit_specs.append(gen_fp4_quantization_sm120_module())
            jit_specs.append(gemm)
        return jit_specs
    """).encode()
    [gate] = find(source, DEFAULT_ARCHS, {}, calls="gen_gemm_sm120_module")
    assert gate.detail["needs_human"] == ["line 5 (`jit_specs.append(gen_fp4_quantization_sm120_module())`)"]


# ---------------------------------------------------------------- a semantic rule, over generated blocks


@st.composite
def _feature_blocks(draw) -> list[str]:
    """A block that only runs the feature `kernel`: maybe its import, argument preparations (each read by
    the call, some reading the one before), the call, maybe a method call on its result returned."""
    lines = ["from flashinfer import kernel"] if draw(st.booleans()) else []
    prepared = []
    for n in range(draw(st.integers(0, 3))):
        source = prepared[-1] if prepared and draw(st.booleans()) else "packed"
        lines.append(f"arg{n} = {source}.view(torch.uint8).reshape(rows, -1)")
        prepared.append(f"arg{n}")
    # a preparation another one reads is the feature's once that one is (the fixpoint)
    lines.append(f"out = kernel({', '.join(prepared) or 'packed'})")
    if draw(st.booleans()):
        lines.append("return out.reshape(rows, cols, -1)")
    return lines


@settings(deadline=None, max_examples=30)
@given(block=_feature_blocks(), at=st.integers(0, 10), unrelated=st.sampled_from(["log_once()", "warmup(out)", "sync(packed)"]))
def test_a_statement_calling_an_unrelated_free_function_makes_a_feature_block_need_a_human(
    block: list[str], at: int, unrelated: str
) -> None:
    source = _packed("\n".join(block))
    [gate] = find(source, DEFAULT_ARCHS, SGLANG, calls="kernel")
    assert "needs_human" not in gate.detail
    at = min(at, len(block) - (block[-1].startswith("return")))  # nothing runs after a return
    extended = _packed("\n".join([*block[:at], unrelated, *block[at:]]))
    [gate] = find(extended, DEFAULT_ARCHS, SGLANG, calls="kernel")
    assert gate.detail["needs_human"] == [f"line {11 + at} (`{unrelated}`)"]
