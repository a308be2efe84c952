"""python_arch_test: single, negated and flag predicate tests, widened in the file's style."""

from textwrap import dedent, indent

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from codemods.core.arch import DEFAULT_ARCHS, parse_archs
from codemods.gates import CannotWiden, SourceError, apply_edits
from codemods.gates.python import python_arch_test
from codemods.gates.python.predicates.reading import Meaning, read, table
from codemods.gates.python.python_arch_test import find, widen

# What the projects' predicates admit, as their sources say (FlashInfer: exact minor; SGLang: the major).
FLASHINFER = table(
    {"is_sm100a_supported": ["sm_10x"], "is_sm110a_supported": ["sm_11x"],
     "is_sm120a_supported": ["sm_120"], "is_sm121a_supported": ["sm_121"]},
    "flashinfer.toml",
)  # fmt: skip
SGLANG = table(
    {"is_sm80_supported": ["sm_8x"], "is_sm90_supported": ["sm_9x"], "is_sm100_supported": ["sm_10x"],
     "is_sm120_supported": ["sm_12x"]},
    "sglang.toml",
)  # fmt: skip
SM12X = "sm_120,sm_121"

AOT_FLAGS = """\
def gen_all_modules(sm_capabilities):
    has_sm100 = sm_capabilities.get("sm100", False)
    has_sm120 = sm_capabilities.get("sm120", False)
    has_sm121 = sm_capabilities.get("sm121", False)
    jit_specs = []
{body}
    return jit_specs


def detect_sm_capabilities():
    return {{
        "sm100": has_sm("compute_100", "12.8"),
        "sm120": has_sm("compute_120", "12.8"),
        "sm121": has_sm("compute_121", "12.9"),
    }}
"""


def _aot(body: str) -> str:
    return AOT_FLAGS.format(body=indent(dedent(body).strip("\n"), "    "))


def _meanings(source: bytes, known: dict) -> dict:
    return {**known, **read(source, "x.py", known)}


def _rewrite(source: bytes, archs: str, known: dict, **selector) -> bytes:
    meanings = _meanings(source, known)
    edits = []
    for gate in find(source, DEFAULT_ARCHS, meanings, **selector):
        edits += widen(source, gate, parse_archs(archs), DEFAULT_ARCHS, meanings)
    return apply_edits(source, edits)


@pytest.mark.parametrize(
    "before, after, archs, known, selector",
    [
        pytest.param(
            """\
            from .utils import is_sm120a_supported

            def fmha_v2_prefill_deepseek(query):
                if not is_sm120a_supported(query.device):
                    raise ValueError("fmha_v2_prefill_deepseek is only supported on SM120 GPUs.")
            """,
            """\
            from .utils import is_sm120a_supported, is_sm121a_supported

            def fmha_v2_prefill_deepseek(query):
                if not (is_sm120a_supported(query.device) or is_sm121a_supported(query.device)):
                    raise ValueError("fmha_v2_prefill_deepseek is only supported on SM120 GPUs.")
            """,
            SM12X, FLASHINFER, {"function": "fmha_v2_prefill_deepseek"},
            id="negated-device-predicate-gets-parentheses-9e5ec6a0c",
        ),
        pytest.param(
            """\
            from sglang.srt.utils.common import is_sm90_supported

            class M:
                def process_weights_after_loading(self, layer):
                    if not is_sm90_supported():
                        raise RuntimeError("needs Hopper/SM90 or above.")
            """,
            """\
            from sglang.srt.utils.common import is_sm90_supported, is_sm120_supported

            class M:
                def process_weights_after_loading(self, layer):
                    if not is_sm90_supported() and not is_sm120_supported():
                        raise RuntimeError("needs Hopper/SM90 or above.")
            """,
            SM12X, SGLANG, {},
            id="negated-bare-predicate-de-morgan-sglang-0.5.13",
        ),
        pytest.param(
            """\
            from sglang.srt.utils import is_sm100_supported

            def quantize(x):
                if is_sm100_supported():
                    return fast(x)
                return slow(x)
            """,
            """\
            from sglang.srt.utils import is_sm100_supported, is_sm120_supported

            def quantize(x):
                if is_sm100_supported() or is_sm120_supported():
                    return fast(x)
                return slow(x)
            """,
            SM12X, SGLANG, {}, id="single-predicate",
        ),
        pytest.param(
            """\
            def quantize(x):
                from sglang.srt.utils import is_sm90_supported

                assert is_sm90_supported(), "NVFP4 KV cache quantize requires SM90+ GPU"
            """,
            """\
            def quantize(x):
                from sglang.srt.utils import is_sm90_supported, is_sm120_supported

                assert is_sm90_supported() or is_sm120_supported(), "NVFP4 KV cache quantize requires SM90+ GPU"
            """,
            SM12X, SGLANG, {}, id="assert-with-local-import",
        ),
        pytest.param(
            """\
            from m import is_sm100_supported

            def pick(ready):
                if ready and is_sm100_supported():
                    return 1
            """,
            """\
            from m import is_sm100_supported, is_sm120_supported

            def pick(ready):
                if ready and (is_sm100_supported() or is_sm120_supported()):
                    return 1
            """,
            SM12X, SGLANG, {}, id="operand-of-and-gets-parentheses",
        ),
        pytest.param(
            """\
            from m import is_sm80_supported, is_sm90_supported

            def a():
                if not (is_sm80_supported() or is_sm90_supported()):
                    return None

            def b():
                if not is_sm90_supported():
                    raise RuntimeError("x")
            """,
            """\
            from m import is_sm80_supported, is_sm90_supported, is_sm120_supported

            def a():
                if not (is_sm80_supported() or is_sm90_supported()):
                    return None

            def b():
                if not (is_sm90_supported() or is_sm120_supported()):
                    raise RuntimeError("x")
            """,
            SM12X, SGLANG, {"function": "b"}, id="negation-in-the-files-own-style",
        ),
        pytest.param(
            """\
            from flashinfer.utils import is_sm90a_supported, is_sm100a_supported, is_sm110a_supported

            def test_batch_mla(backend):
                if backend == "fa3" and not is_sm90a_supported(torch.device("cuda")):
                    pytest.skip("FA3 is not supported on this device")

            def test_cutlass_mla():
                if not is_sm100a_supported(device):
                    pytest.skip("Cutlass MLA is not supported on this device")
            """,
            """\
            from flashinfer.utils import is_sm90a_supported, is_sm100a_supported, is_sm110a_supported

            def test_batch_mla(backend):
                if backend == "fa3" and not is_sm90a_supported(torch.device("cuda")):
                    pytest.skip("FA3 is not supported on this device")

            def test_cutlass_mla():
                if not is_sm100a_supported(device) and not is_sm110a_supported(device):
                    pytest.skip("Cutlass MLA is not supported on this device")
            """,
            "sm_110", FLASHINFER, {"function": "test_cutlass_mla"}, id="lone-negation-spread-as-the-file-negates-beside-tests-beebc6074",
        ),
        pytest.param(
            """\
            from sglang.srt.utils import is_sm100_supported, is_sm120_supported

            def other(prefill_backend, decode_backend):
                if prefill_backend == "trtllm_mha" and not is_sm100_supported():
                    raise ValueError("x")
                if decode_backend == "trtllm_mha" and not (is_sm100_supported() or is_sm120_supported()):
                    raise ValueError("z")

            def check(self):
                if self.enable_fp4_indexer and not is_sm100_supported():
                    raise ValueError("y")
            """,
            """\
            from sglang.srt.utils import is_sm100_supported, is_sm120_supported

            def other(prefill_backend, decode_backend):
                if prefill_backend == "trtllm_mha" and not is_sm100_supported():
                    raise ValueError("x")
                if decode_backend == "trtllm_mha" and not (is_sm100_supported() or is_sm120_supported()):
                    raise ValueError("z")

            def check(self):
                if self.enable_fp4_indexer and not (is_sm100_supported() or is_sm120_supported()):
                    raise ValueError("y")
            """,
            SM12X, SGLANG, {"function": "check"}, id="negation-beside-a-test-is-not-evidence-for-itself-sglang-0.5.17",
        ),
        pytest.param(
            _aot("""\
            if has_sm120:
                jit_specs.append(gen_nvfp4_attention_sm120_module())
            """),
            _aot("""\
            if has_sm120 or has_sm121:
                jit_specs.append(gen_nvfp4_attention_sm120_module())
            """),
            SM12X, {}, {"calls": "gen_nvfp4_attention_sm120_module"}, id="aot-flag-by-calls-0f69698c7",
        ),
        pytest.param(
            _aot("""\
            if not has_sm100 and not has_sm120:
                return jit_specs
            """),
            _aot("""\
            if not has_sm100 and not has_sm120 and not has_sm121:
                return jit_specs
            """),
            SM12X, {}, {}, id="negated-flag-chain",
        ),
        pytest.param(
            """\
            from sglang.srt.utils import is_sm90_supported

            def check(self):
                if self.enabled and self.fp4 and not is_sm90_supported():
                    raise ValueError("needs SM90")
            """,
            """\
            from sglang.srt.utils import is_sm90_supported, is_sm120_supported

            def check(self):
                if (
                    self.enabled
                    and self.fp4
                    and not is_sm90_supported()
                    and not is_sm120_supported()
                ):
                    raise ValueError("needs SM90")
            """,
            SM12X, SGLANG, {}, id="and-not-after-other-operands-found-again-as-one-gate-split-as-black-does",
        ),
        pytest.param(
            """\
            from sglang.srt.utils import is_sm90_supported, is_sm100_supported

            def check(self):
                if not is_sm90_supported() and self.fp4 and not is_sm100_supported():
                    raise ValueError("needs SM90 or SM100")
            """,
            """\
            from sglang.srt.utils import is_sm90_supported, is_sm100_supported, is_sm120_supported

            def check(self):
                if (
                    not is_sm90_supported()
                    and self.fp4
                    and not is_sm100_supported()
                    and not is_sm120_supported()
                ):
                    raise ValueError("needs SM90 or SM100")
            """,
            SM12X, SGLANG, {}, id="negated-chain-with-another-operand-widened-once-split-as-black-does",
        ),
        pytest.param(
            """\
            from sglang.srt.utils import is_sm90_supported

            def check(self):
                if (not is_sm90_supported() and self.fp4):
                    raise ValueError("needs SM90")
            """,
            """\
            from sglang.srt.utils import is_sm90_supported, is_sm120_supported

            def check(self):
                if (not is_sm90_supported() and not is_sm120_supported() and self.fp4):
                    raise ValueError("needs SM90")
            """,
            SM12X, SGLANG, {}, id="parenthesized-test-with-and-not-before-another-operand",
        ),
    ],
)
def test_widen(before: str, after: str, archs: str, known: dict, selector: dict) -> None:
    source = dedent(before).encode()
    assert find(source, DEFAULT_ARCHS, _meanings(source, known), **selector), "the case must have a gate"
    widened = _rewrite(source, archs, known, **selector)
    assert widened.decode() == dedent(after)
    assert _rewrite(widened, archs, known, **selector) == widened


@pytest.mark.parametrize(
    "source, known, selector",
    [
        pytest.param("if is_sm100_supported() or is_sm120_supported():\n    x = 1\n", SGLANG, {}, id="or-chain-already-admits"),
        pytest.param("ok = not is_sm90_supported()\n", SGLANG, {}, id="not-a-test"),
        pytest.param("f(is_sm100_supported())\n", SGLANG, {}, id="argument-not-a-test"),
        pytest.param("if is_sm120_supported():\n    x = 1\n", SGLANG, {}, id="already-admits-the-family"),
        pytest.param("if is_sm120a_supported(d) or is_sm121a_supported(d):\n    x = 1\n", FLASHINFER, {}, id="already-admitted"),
        pytest.param("# if is_sm100_supported():\nhelp = 'if is_sm100_supported():'\n", SGLANG, {}, id="comment-and-string"),
        pytest.param(
            _aot("""\
            if has_sm120:
                jit_specs.append(gen_nvfp4_attention_sm120_module())
            """),
            {}, {"calls": "gen_other_module"}, id="calls-selects-another-block",
        ),
        pytest.param("def f():\n    if is_sm100_supported():\n        x = 1\n", SGLANG, {"function": "g"}, id="other-function"),
    ],
)
def test_noop(source: str, known: dict, selector: dict) -> None:
    data = dedent(source).encode()
    assert _rewrite(data, SM12X, known, **selector) == data


def test_split_block_needs_a_human() -> None:
    source = _aot("""\
    if has_sm120:
        jit_specs.append(gen_fp4_quantization_sm120_module())
        jit_specs.append(gen_gemm_sm120_module())
    """).encode()
    meanings = _meanings(source, {})
    [gate] = find(source, DEFAULT_ARCHS, meanings, calls=["gen_gemm_sm120_module"])
    with pytest.raises(CannotWiden, match=r"needs a human: .*line 7 \(`jit_specs.append\(gen_fp4_quantization_sm120_module\(\)\)`\)"):
        widen(source, gate, parse_archs(SM12X), DEFAULT_ARCHS, meanings)


def test_unknown_predicate_is_refused_with_where_and_why() -> None:
    source = b"from .utils import is_sm130a_supported\n\nif not is_sm130a_supported(d):\n    raise ValueError\n"
    [gate] = find(source, DEFAULT_ARCHS, FLASHINFER)
    assert gate.admits.unknown  # never a guess from the name
    assert "is_sm130a_supported" in gate.detail["unknown"][0]
    with pytest.raises(CannotWiden, match=r"line 3: what it admits is unknown \(`is_sm130a_supported`: no definition .*\), so the gate is not widened"):
        widen(source, gate, parse_archs(SM12X), DEFAULT_ARCHS, FLASHINFER)


@pytest.mark.parametrize(
    ("test", "why"),
    [
        pytest.param("is_sm80_supported() and not is_sm120_supported()", "it refuses sm_120, sm_121", id="refuses-the-target"),
        pytest.param("is_sm90_supported() and not is_sm130a_supported()", "what it refuses is not known", id="refuses-an-unknown"),
        pytest.param(
            "not is_sm80_supported() and ready and is_sm90_supported() and not is_sm100_supported()", "no one set",
            id="and-not-chain-beside-a-required-one",
        ),
    ],
)
def test_predicates_required_and_refused_in_one_and_are_refused(test: str, why: str) -> None:
    # `not P` beside a required predicate excludes P rather than guarding for it: where it refuses what the gate
    # admits or gains (or what it refuses is unknown), no rewrite keeps its meaning
    source = f"from m import is_sm80_supported, is_sm90_supported, is_sm100_supported\n\nif {test}:\n    x = 1\n".encode()
    gates = find(source, DEFAULT_ARCHS, SGLANG)
    assert gates
    refused = 0
    for gate in gates:
        if gate.detail.get("unknown") or all(gate.admits.admits(arch) for arch in parse_archs(SM12X)):
            continue  # refused for its unknown predicate; `not is_sm120_supported()` alone names SM12x already
        with pytest.raises(CannotWiden, match=r"a predicate required and one refused in one `and`.*widen it by hand"):
            widen(source, gate, parse_archs(SM12X), DEFAULT_ARCHS, SGLANG)
        refused += 1
    assert refused
    for required in (g for g in gates if g.detail["shape"] == "single"):
        with pytest.raises(CannotWiden, match=why):
            widen(source, required, parse_archs(SM12X), DEFAULT_ARCHS, SGLANG)


@pytest.mark.parametrize(
    ("test", "after"),
    [
        # SGLang 0.5.16 (fp8.py): SM90 is not SM100, so `not is_sm100_supported()` refuses nothing; upstream dropped it
        pytest.param(
            "is_sm90_supported() and not is_sm100_supported()", "is_sm90_supported() or is_sm120_supported()",
            id="hopper-but-not-blackwell-sglang",
        ),
        pytest.param(
            "not is_sm100_supported() and is_sm90_supported()", "is_sm90_supported() or is_sm120_supported()",
            id="refusal-first",
        ),
        pytest.param(
            "ready and is_sm90_supported() and not is_sm100_supported()",
            "ready and (is_sm90_supported() or is_sm120_supported())",
            id="beside-another-condition",
        ),
    ],
)
def test_a_refusal_that_refuses_nothing_the_gate_admits_is_dropped(test: str, after: str) -> None:
    source = f"from m import is_sm90_supported, is_sm100_supported, is_sm120_supported\n\nif {test}:\n    x = 1\n".encode()
    # `not is_sm100_supported()` there is a refusal, not a guard: the one gate is the required predicate
    [required] = find(source, DEFAULT_ARCHS, SGLANG)
    assert required.text == "is_sm90_supported()"
    widened = apply_edits(source, widen(source, required, parse_archs(SM12X), DEFAULT_ARCHS, SGLANG))
    assert widened == source.replace(test.encode(), after.encode())
    # read again, it admits the old archs and the targets, and nothing is left to do
    [gate] = [g for g in find(widened, DEFAULT_ARCHS, SGLANG) if "is_sm120_supported" in g.detail["predicates"]]
    assert gate.admits.admitted == {a for a in DEFAULT_ARCHS if a.major in (9, 12)}
    assert widen(widened, gate, parse_archs(SM12X), DEFAULT_ARCHS, SGLANG) == []


def test_flashinfer_sm120a_admits_sm120_only() -> None:
    source = b"if is_sm120a_supported(d):\n    x = 1\n"
    [gate] = find(source, DEFAULT_ARCHS, FLASHINFER)
    assert gate.admits.names() == ["sm_120"]


def test_registered_and_selectors() -> None:
    from codemods.gates.registry import modules as gate_kinds, selector_keys

    assert gate_kinds()["python_arch_test"] is python_arch_test
    assert selector_keys(python_arch_test) == {"function", "assigns", "calls", "negation", "tests"}


SETUP_SKIP = """\
import unittest

from sglang.srt.utils import is_sm100_supported, is_sm120_supported


class TestMXFP8Gemm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not is_sm100_supported():
            raise unittest.SkipTest("needs SM100")
"""


@pytest.mark.parametrize(
    "negation, after",
    [
        (None, "        if not is_sm100_supported() and not is_sm120_supported():\n"),  # the file shows neither way
        ("parentheses", "        if not (is_sm100_supported() or is_sm120_supported()):\n"),
        ("and_not", "        if not is_sm100_supported() and not is_sm120_supported():\n"),
    ],
)
def test_negation_key_chooses_how_a_lone_negation_grows(negation: str | None, after: str) -> None:
    source = SETUP_SKIP.encode()
    selector = {} if negation is None else {"negation": negation}
    widened = _rewrite(source, SM12X, SGLANG, **selector).decode()
    assert widened == SETUP_SKIP.replace("        if not is_sm100_supported():\n", after)
    assert _rewrite(widened.encode(), SM12X, SGLANG, **selector) == widened.encode()


def test_negation_key_wins_over_the_files_own_way() -> None:
    # the file negates a pair with `and not`; the recipe asks for parentheses, which the new line gets
    source = (SETUP_SKIP + "\n\ndef other():\n    if not is_sm90_supported() and not is_sm100_supported():\n        pass\n").encode()
    widened = _rewrite(source, SM12X, SGLANG, function="setUpClass", negation="parentheses").decode()
    assert "        if not (is_sm100_supported() or is_sm120_supported()):\n" in widened
    assert "    if not is_sm90_supported() and not is_sm100_supported():\n" in widened  # not selected, not changed
    assert _rewrite(source, SM12X, SGLANG, function="setUpClass").decode().count(" and not is_sm120_supported()") == 1


@pytest.mark.parametrize("value", ["paren", "", 1, ["parentheses"]])
def test_negation_key_takes_two_values(value) -> None:
    assert "parentheses" in python_arch_test.check_selector("negation", value)
    assert python_arch_test.check_selector("negation", "and_not") == ""


NUMBERS = {80: ["sm_8x"], 90: ["sm_9x"], 100: ["sm_10x"], 110: ["sm_11x"], 120: ["sm_12x"]}


@settings(deadline=None, max_examples=40)
@given(
    number=st.sampled_from(sorted(NUMBERS)),
    negated=st.booleans(),
    majors=st.sets(st.sampled_from([8, 9, 10, 11, 12]), min_size=1, max_size=3),
)
def test_widened_test_admits_old_set_plus_targets(number: int, negated: bool, majors: set[int]) -> None:
    # whole families: these predicates admit a major, so a single minor cannot be admitted alone
    targets = [a for a in DEFAULT_ARCHS if a.major in majors]
    known = table({f"is_sm{n}_supported": archs for n, archs in NUMBERS.items()}, "t")
    names = ", ".join(f"is_sm{n}_supported" for n in NUMBERS if n == number)
    test = ("not " if negated else "") + f"is_sm{number}_supported()"
    source = f"from m import {names}\n\nif {test}:\n    x = 1\n".encode()
    [gate] = find(source, DEFAULT_ARCHS, known)
    widened = apply_edits(source, widen(source, gate, tuple(targets), DEFAULT_ARCHS, known))
    [after] = find(widened, DEFAULT_ARCHS, known) or [None]
    if after is None:  # widened into an or-chain: python_arch_or's shape
        from codemods.gates.python import python_arch_or

        [after] = python_arch_or.find(widened, DEFAULT_ARCHS, known)
    assert after.admits.admitted == gate.admits.admitted | set(targets)


# ---------------------------------------------------------------- a test that outgrows the line, wrapped as black wraps it

SERVER_ARGS = """\
from sglang.srt.utils import is_sm100_supported, is_sm120_supported


class ServerArgs:
    def _handle_kv_cache(self):
        if self.kv_cache_dtype == "fp4_e2m1" and not (is_sm100_supported() or is_sm120_supported()):
            raise ValueError("fp4 KV cache requires SM100 or SM120")

    def _handle_environment_variables(self):
{body}
"""


def _server_args(body: str) -> str:
    return SERVER_ARGS.format(body=indent(dedent(body).strip("\n"), "        "))


@pytest.mark.parametrize(
    "before, after, archs, known, selector",
    [
        pytest.param(
            _server_args("""\
            if self.enable_nsa_prefill_context_parallel_fp4 and not is_sm100_supported():
                raise ValueError("requires SM100")
            """),
            _server_args("""\
            if self.enable_nsa_prefill_context_parallel_fp4 and not (
                is_sm100_supported() or is_sm120_supported()
            ):
                raise ValueError("requires SM100")
            """),
            SM12X, SGLANG, {"function": "_handle_environment_variables"},
            id="sglang-0.5.17-right-hand-split-past-the-files-longest-code-line",
        ),
        pytest.param(
            _server_args("""\
            if self.enable_fp4_indexer and not is_sm100_supported():
                raise ValueError("requires SM100")
            """),
            _server_args("""\
            if self.enable_fp4_indexer and not (is_sm100_supported() or is_sm120_supported()):
                raise ValueError("requires SM100")
            """),
            SM12X, SGLANG, {"function": "_handle_environment_variables"},
            id="within-the-files-longest-code-line-stays-on-one-line",
        ),
        pytest.param(
            """\
            from flashinfer.utils import is_sm120a_supported


            def test_fmha_v2_prefill_deepseek(batch_size):
                if not is_sm120a_supported(torch.device("cuda")):
                    pytest.skip("fmha_v2_prefill_deepseek is only supported on SM120 GPUs.")
            """,
            """\
            from flashinfer.utils import is_sm120a_supported, is_sm121a_supported


            def test_fmha_v2_prefill_deepseek(batch_size):
                if not (
                    is_sm120a_supported(torch.device("cuda"))
                    or is_sm121a_supported(torch.device("cuda"))
                ):
                    pytest.skip("fmha_v2_prefill_deepseek is only supported on SM120 GPUs.")
            """,
            SM12X, FLASHINFER, {},
            id="flashinfer-9e5ec6a0c-test-split-before-each-or",
        ),
        pytest.param(
            """\
            from sglang.srt.utils import is_sm100_supported, is_sm120_supported


            def quantize(x, use_block_scaled_fp4_kernel_for_this_layer):
                if x.is_cuda:
                    pass
                elif use_block_scaled_fp4_kernel_for_this_layer and is_sm100_supported():
                    return fp4_quantize(x)
            """,
            """\
            from sglang.srt.utils import is_sm100_supported, is_sm120_supported


            def quantize(x, use_block_scaled_fp4_kernel_for_this_layer):
                if x.is_cuda:
                    pass
                elif use_block_scaled_fp4_kernel_for_this_layer and (
                    is_sm100_supported() or is_sm120_supported()
                ):
                    return fp4_quantize(x)
            """,
            SM12X, SGLANG, {},
            id="elif-operand-parenthesized-then-split",
        ),
        pytest.param(
            "from sglang.srt.utils import is_sm90_supported, is_sm100_supported, is_sm120_supported\r\n\r\n\r\n"
            "class ServerArgs:\r\n    def check(self):\r\n"
            "        if self.enable_nsa_prefill_context_parallel_fp4 and not is_sm100_supported():\r\n"
            "            raise ValueError(\"requires SM100\")\r\n"
            "        if not (is_sm90_supported() or is_sm100_supported()):\r\n            pass\r\n",
            "from sglang.srt.utils import is_sm90_supported, is_sm100_supported, is_sm120_supported\r\n\r\n\r\n"
            "class ServerArgs:\r\n    def check(self):\r\n"
            "        if self.enable_nsa_prefill_context_parallel_fp4 and not (\r\n"
            "            is_sm100_supported() or is_sm120_supported()\r\n"
            "        ):\r\n"
            "            raise ValueError(\"requires SM100\")\r\n"
            "        if not (is_sm90_supported() or is_sm100_supported() or is_sm120_supported()):\r\n"
            "            pass\r\n",
            SM12X, SGLANG, {},
            id="crlf-kept-and-a-line-that-fits-left-alone",
        ),
        pytest.param(
            _server_args("""\
            if self.enable_nsa_prefill_context_parallel and self.fp4 and not is_sm100_supported():
                pass
            """),
            _server_args("""\
            if (
                self.enable_nsa_prefill_context_parallel
                and self.fp4
                and not (is_sm100_supported() or is_sm120_supported())
            ):
                pass
            """),
            SM12X, SGLANG, {},
            id="several-operators-in-parentheses-one-a-line",
        ),
    ],
)
def test_widen_wraps_as_black(before: str, after: str, archs: str, known: dict, selector: dict) -> None:
    source = dedent(before).encode()
    widened = _rewrite(source, archs, known, **selector)
    assert widened.decode() == dedent(after)
    assert _rewrite(widened, archs, known, **selector) == widened


IMPORTS = "from sglang.srt.utils import is_sm100_supported, is_sm120_supported\n\n\n"


@pytest.mark.parametrize(
    "before, after",
    [
        pytest.param(
            _server_args("""\
            n = self.model_runner.server_args.speculative_num_draft_tokens_for_the_verify_step_of_the_scheduler + 1
            if self.enable_nsa_prefill_context_parallel_fp4 and not is_sm100_supported():
                raise ValueError("requires SM100")
            """),
            _server_args("""\
            n = self.model_runner.server_args.speculative_num_draft_tokens_for_the_verify_step_of_the_scheduler + 1
            if self.enable_nsa_prefill_context_parallel_fp4 and not (is_sm100_supported() or is_sm120_supported()):
                raise ValueError("requires SM100")
            """),
            id="a-file-with-longer-code-lines-is-not-black-at-88",
        ),
        pytest.param(
            IMPORTS + "def f(self):\n    if is_sm100_supported(self.device_of_the_model_weights_and_the_kv_cache_pool_xx):\n        pass\n",
            IMPORTS + "def f(self):\n    if is_sm100_supported(self.device_of_the_model_weights_and_the_kv_cache_pool_xx)"
            " or is_sm120_supported(self.device_of_the_model_weights_and_the_kv_cache_pool_xx):\n        pass\n",
            id="last-brackets-are-a-call-left-on-one-line",
        ),
    ],
)
def test_widen_leaves_other_long_shapes_on_one_line(before: str, after: str) -> None:
    widened = _rewrite(before.encode(), SM12X, SGLANG)
    assert widened.decode() == after
    assert _rewrite(widened, SM12X, SGLANG) == widened


@settings(deadline=None, max_examples=25)
@given(
    condition=st.sampled_from(["", "self.enable_fp4_indexer and ", "self.enable_nsa_prefill_context_parallel_fp4_for_the_indexer and "]),
    device=st.text(alphabet="abcdefghij_", min_size=0, max_size=48).map(lambda s: "dev_" + s),
    depth=st.integers(min_value=0, max_value=2),
)
def test_wrapped_test_is_what_ruff_format_writes(condition: str, device: str, depth: int) -> None:
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff (the test extra) is not installed")
    test = f"if {condition}not is_sm120a_supported({device}):"
    assume(len(test) + 4 * (depth + 1) <= 88)  # black at 88 wrote the file: the line fits before widening
    body = f"{test}\n    raise ValueError(\"needs SM12x\")\n"
    for _ in range(depth):
        body = f"if True:\n{indent(body, '    ')}"
    source = f"from flashinfer.utils import is_sm120a_supported\n\n\ndef check({device}):\n{indent(body, '    ')}".encode()
    widened = _rewrite(source, SM12X, FLASHINFER)
    formatted = subprocess.run([sys.executable, "-m", "ruff", "format", "--isolated", "-"], input=widened, capture_output=True, check=True).stdout
    assert widened.decode() == formatted.decode()


@settings(deadline=None, max_examples=25)
@given(
    argument=st.sampled_from([
        'device or torch.device("cuda", torch.cuda.current_device())', "self.device_of_the_first_input_tensor_on_this_rank",
        'device or torch.device("cuda", torch.cuda.current_device_of_this_process())',
    ]),
    depth=st.integers(min_value=0, max_value=2),
)  # fmt: skip
def test_a_negated_call_black_split_is_laid_out_as_ruff_format_writes(argument: str, depth: int) -> None:
    """Round 11 bug 3: `if not P(` / `    arg` / `):` widened gave `if not (P(` / `    arg` / `) or Q(` / ... /
    `)):`; ruff format's: `if not (` / each call on its own line (split at its own brackets if still too long,
    `or` leading) / `):`."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff (the test extra) is not installed")

    def ruff(data: bytes) -> bytes:
        return subprocess.run([sys.executable, "-m", "ruff", "format", "--isolated", "-"], input=data, capture_output=True, check=True).stdout

    body = f"if not is_sm120a_supported({argument}):\n    return False\n"
    for _ in range(depth):
        body = f"if True:\n{indent(body, '    ')}"
    source = ruff(f"from flashinfer.utils import is_sm120a_supported\n\n\ndef check(device=None):\n{indent(body, '    ')}".encode())
    assume(b"is_sm120a_supported(\n" in source)  # black split the call: the shape of this case
    # the argument fits a line two levels deeper than the `if` (else black splits it too: not written, left)
    assume(4 * (depth + 1) + 8 + len(argument) <= 88)
    widened = _rewrite(source, "sm_121", FLASHINFER, function="check")
    assert b"is_sm121a_supported" in widened
    assert widened.decode() == ruff(widened).decode()
    assert _rewrite(widened, "sm_121", FLASHINFER, function="check") == widened


def test_a_negated_call_black_split_gains_its_sibling_on_a_line_of_its_own() -> None:
    """Round 11 bug 3, FlashInfer's `sm120a_available` one level deeper (a method): both calls too long for one line."""
    source = dedent("""\
        from flashinfer.utils import is_sm120a_supported


        class Runner:
            def available(self, device=None):
                if not is_sm120a_supported(
                    device or torch.device("cuda", torch.cuda.current_device())
                ):
                    return False
        """).encode()
    assert _rewrite(source, "sm_121", FLASHINFER, function="available").decode().splitlines()[5:13] == [
        "        if not (",
        "            is_sm120a_supported(",
        '                device or torch.device("cuda", torch.cuda.current_device())',
        "            )",
        "            or is_sm121a_supported(",
        '                device or torch.device("cuda", torch.cuda.current_device())',
        "            )",
        "        ):",
    ]


@pytest.mark.parametrize(
    ("imported", "after"),
    [
        pytest.param(
            "    is_sm100a_supported,\n    is_sm100f_supported,\n    is_sm12x_supported,\n",
            "    is_sm100a_supported,\n    is_sm100f_supported,\n    is_sm110a_supported,\n    is_sm12x_supported,\n",
            id="round-11-bug-11-after-the-siblings-own-family-where-it-sorts",
        ),
        pytest.param(
            "    is_sm100a_supported,\n    is_sm12x_supported,\n",
            "    is_sm100a_supported,\n    is_sm110a_supported,\n    is_sm12x_supported,\n",
            id="right-after-the-sibling",
        ),
    ],
)
def test_a_new_predicate_is_imported_where_it_sorts(imported: str, after: str) -> None:
    """FlashInfer 0.7.4's gemm_base.py imports `is_sm100a_supported,` / `is_sm100f_supported,` /
    `is_sm12x_supported,`: `is_sm110a_supported` went between the first two."""
    source = f"from .utils import (\n{imported})\n\n\ndef pick(a):\n    if is_sm100a_supported(a.device):\n        return 2\n"
    widened = _rewrite(source.encode(), "sm_110", FLASHINFER, function="pick").decode()
    assert widened.startswith(f"from .utils import (\n{after})\n")


# FlashInfer 0.6.10 gemm_base.py: a function's own variables spelled like predicates, tested later. They are
# values (what they hold is read where they are assigned), never predicates read by their names.
LOCAL_VALUES = """\
from ..utils import get_compute_capability, is_sm120a_supported


def _heuristic_func_mm_fp4(suitable_backends, a, use_nvfp4):
    major, minor = get_compute_capability(a.device)
    is_sm103 = major == 10 and minor == 3
    is_sm120 = major == 12 and minor == 0

    if is_sm120 and use_nvfp4:
        return [c for c in ("b12x", "cutlass", "cudnn") if c in suitable_backends]
    if is_sm103:
        return ["cutlass", "cudnn"]
    return ["cudnn", "cutlass"]


def _heuristic_func_bmm_fp8(A, suitable_backends, is_sm_supported: bool):
    is_sm120_supported = _match_sm_version(A.device, ["120", "121"])
    if is_sm_supported:
        return ["cutlass_sm10x"]
    elif is_sm120_supported:
        return ["cutlass_sm12x"]
    return ["cublas"]


def gemm_fp8(a):
    if is_sm120a_supported(a.device):
        return "sm120"
    return "sm100"
"""


def test_a_functions_own_variable_named_like_a_predicate_is_no_gate():
    source = LOCAL_VALUES.encode()
    found = [(g.line, g.text) for g in find(source, DEFAULT_ARCHS, FLASHINFER)]
    assert found == [(26, "is_sm120a_supported(a.device)")]  # the predicate call, tested by an `if`, stays


def test_a_variable_named_like_a_predicate_is_no_gate_in_scan_either(tmp_path):
    from codemods.audit.scan import scan  # scan prunes the file before reading it: the assignment must stay
    from codemods.core.arch import Arch

    (tmp_path / "flashinfer/gemm").mkdir(parents=True)
    (tmp_path / "flashinfer/gemm/gemm_base.py").write_text(LOCAL_VALUES)
    gates = scan(tmp_path, Arch.parse("sm_121"), jobs=1, cache=None).gates
    tests = [(g["line"], g["text"]) for g in gates if g["kind"] == "python_arch_test"]
    assert tests == [(26, "is_sm120a_supported(a.device)")]


def test_a_module_level_cached_value_and_a_build_flag_are_still_predicates():
    source = dedent("""\
        _is_sm100_supported = is_cuda() and is_sm100_supported()


        def gen_all_modules(sm_capabilities):
            has_sm120 = sm_capabilities.get("sm120", False)
            if has_sm120:
                pass
            if _is_sm100_supported:
                pass
    """).encode()
    assert [g.text for g in find(source, DEFAULT_ARCHS, SGLANG)] == ["has_sm120", "_is_sm100_supported"]


# FlashInfer 0.7.0's aot.py: a family build flag, and no family flag for the target; upstream 0.7.1 wrote
# `if has_sm100f or has_sm103:`, the target's exact flag, which the file defines.
AOT_FAMILY = """\
def gen_all_modules(sm_capabilities):
    has_sm100f = sm_capabilities.get("sm100f", False)
    has_sm103 = sm_capabilities.get("sm103", False)
    jit_specs = []
    if has_sm100f:
        jit_specs.append(gen_moe_utils_module())
    return jit_specs


def detect_sm_capabilities():
    return {
        "sm100f": has_sm("compute_100", "12.9"),
        "sm103": has_sm("compute_103", "12.9"),
    }
"""


def test_a_target_without_the_template_spelling_takes_its_other_defined_flag() -> None:
    source = AOT_FAMILY.encode()
    widened = _rewrite(source, "sm_103", {})
    assert widened == source.replace(b"    if has_sm100f:\n", b"    if has_sm100f or has_sm103:\n")
    assert _rewrite(widened, "sm_103", {}) == widened
    # neither spelling defined: refused, naming what it tried
    missing = AOT_FAMILY.replace('    has_sm103 = sm_capabilities.get("sm103", False)\n', "").encode()
    with pytest.raises(CannotWiden, match=r"`has_sm103f` is not defined.*`has_sm103` is not defined"):
        _rewrite(missing, "sm_103", {})


# FlashInfer 0.7.0's aot.py: the build flags handed down as parameters. 0.7.1 added `has_sm103: bool,` beside
# `has_sm100: bool,` and passed the caller's own `has_sm103` beside `has_sm100` (gen_attention, gen_xqa).
AOT_PARAMETERS = """\
def gen_attention(
    dtypes: List[torch.dtype],
    has_sm90: bool,
    has_sm100: bool,
    add_gemma: bool,
) -> Iterator[JitSpec]:
    if has_sm100:
        yield gen_fmha_cutlass_sm100a_module()
    if has_sm100:
        yield gen_mla_module()


def gen_xqa(dtypes, has_sm90, has_sm100, has_sm120):
    if has_sm100:
        yield gen_xqa_module()


def gen_all_modules(sm_capabilities):
    has_sm90 = sm_capabilities.get("sm90", False)
    has_sm100 = sm_capabilities.get("sm100", False)
    has_sm103 = sm_capabilities.get("sm103", False)
    has_sm120 = sm_capabilities.get("sm120", False)
    jit_specs = list(
        gen_attention(
            dtypes,
            has_sm90,
            has_sm100,
            add_gemma,
        )
    )
    jit_specs += list(gen_xqa(dtypes, has_sm90, has_sm100, has_sm120))
    jit_specs += list(gen_xqa(dtypes, has_sm90=has_sm90, has_sm100=has_sm100, has_sm120=has_sm120))
    return jit_specs


def detect_sm_capabilities():
    return {
        "sm90": has_sm("compute_90", "12.3"),
        "sm100": has_sm("compute_100", "12.8"),
        "sm103": has_sm("compute_103", "12.9"),
        "sm120": has_sm("compute_120", "12.8"),
    }
"""


def test_a_flag_parameter_is_added_and_passed_by_every_caller_in_the_file() -> None:
    source = AOT_PARAMETERS.encode()
    widened = _rewrite(source, "sm_103", {}).decode()
    expected = (
        AOT_PARAMETERS
        .replace("    has_sm100: bool,\n", "    has_sm100: bool,\n    has_sm103: bool,\n")
        .replace("    if has_sm100:\n", "    if has_sm100 or has_sm103:\n")
        .replace("            has_sm100,\n", "            has_sm100,\n            has_sm103,\n")
        .replace("def gen_xqa(dtypes, has_sm90, has_sm100, has_sm120):", "def gen_xqa(dtypes, has_sm90, has_sm100, has_sm103, has_sm120):")
        .replace("gen_xqa(dtypes, has_sm90, has_sm100, has_sm120)", "gen_xqa(dtypes, has_sm90, has_sm100, has_sm103, has_sm120)")
        .replace("has_sm100=has_sm100, has_sm120", "has_sm100=has_sm100, has_sm103=has_sm103, has_sm120")
    )  # two gates in gen_attention: one parameter, added once; in gen_xqa it goes where 103 sorts
    assert widened == expected
    assert _rewrite(widened.encode(), "sm_103", {}) == widened.encode()


@pytest.mark.parametrize(
    "change, reason",
    [
        pytest.param(("    jit_specs += list(gen_xqa(dtypes, has_sm90, has_sm100, has_sm120))\n", ""), "not called", id="not-called-in-the-file"),
        pytest.param(("list(gen_xqa(dtypes, has_sm90, has_sm100, has_sm120))", "list(gen_xqa(dtypes, has_sm90, True, has_sm120))"), "passed otherwise", id="passed-a-value"),
        pytest.param(('    has_sm103 = sm_capabilities.get("sm103", False)\n', ""), "caller lacks it", id="caller-lacks-the-flag"),
    ],
)
def test_a_flag_parameter_is_not_added_where_a_caller_cannot_pass_it(change, reason) -> None:
    # only gen_xqa's gate, with the calls changed: refused as before, nothing written
    source = AOT_PARAMETERS.replace(*change)
    if reason == "not called":
        source = source.replace(
            "    jit_specs += list(gen_xqa(dtypes, has_sm90=has_sm90, has_sm100=has_sm100, has_sm120=has_sm120))\n", ""
        )
    with pytest.raises(CannotWiden, match=r"`has_sm103` is not defined"):
        _rewrite(source.encode(), "sm_103", {}, function="gen_xqa")


FAMILY_TABLE = table(
    {
        "is_sm100a_supported": ["sm_10x"], "is_sm110a_supported": ["sm_11x"], "is_sm120a_supported": ["sm_120"],
        "is_sm121a_supported": ["sm_121"], "is_sm12x_supported": ["sm_12x"],
    },
    "flashinfer.toml",
)  # fmt: skip

FP4_SKIP = b"""\
from flashinfer.utils import is_sm100a_supported


def test_fp4(device):
    if not is_sm100a_supported(device):
        pytest.skip("needs SM100")
"""


@pytest.mark.parametrize(
    ("source", "archs", "test"),
    [
        pytest.param(
            FP4_SKIP, "sm_110,sm_120,sm_121",
            b"    if not (\n        is_sm100a_supported(device)\n        or is_sm110a_supported(device)\n"
            b"        or is_sm12x_supported(device)\n    ):\n",
            id="every-arch-of-the-family-missing-takes-the-family-predicate-flashinfer-635505f75",
        ),
        pytest.param(
            FP4_SKIP.replace(b"is_sm100a_supported(device)", b"(is_sm100a_supported(device) or is_sm120a_supported(device))")
            .replace(b"import is_sm100a_supported", b"import is_sm100a_supported, is_sm120a_supported"),
            "sm_121",
            b"        or is_sm120a_supported(device)\n        or is_sm121a_supported(device)\n    ):\n",
            id="one-of-the-family-admitted-already-keeps-one-predicate-per-arch-flashinfer-0f69698c7",
        ),
        pytest.param(
            FP4_SKIP.replace(b"import is_sm100a_supported", b"import is_sm100a_supported, is_sm120a_supported, is_sm121a_supported"),
            "sm_120,sm_121",
            b"        or is_sm120a_supported(device)\n        or is_sm121a_supported(device)\n    ):\n",
            id="a-file-naming-each-arch-predicate-keeps-them-flashinfer-9f4fd04ac",
        ),
    ],
)
def test_a_family_predicate_for_a_whole_missing_family(source: bytes, archs: str, test: bytes) -> None:
    after = _rewrite(source, archs, FAMILY_TABLE)
    assert test in after, after.decode()
    assert _rewrite(after, archs, FAMILY_TABLE) == after  # read again: `is_sm12x_supported` is a numbered predicate


def test_a_build_flag_of_no_gpu_target_is_unknown_not_a_crash() -> None:
    """`has_sm("compute_00", ...)` names no GPU (found by mutating a recipe's case: it raised ArchParseError out of
    the predicate reader): the flag's meaning is unknown, so the `if` on it is refused, not widened or crashed on."""
    source = _aot("""
        if has_sm120:
            jit_specs.append(gen_fp4_module())
    """).replace('has_sm("compute_120", "12.8")', 'has_sm("compute_00", "12.8")').encode()
    meanings = _meanings(source, {})
    [gate] = find(source, DEFAULT_ARCHS, meanings, calls="gen_fp4_module")
    assert gate.admits.unknown
    with pytest.raises(CannotWiden, match="line 6: what it admits is unknown"):
        widen(source, gate, parse_archs("sm_121"), DEFAULT_ARCHS, meanings)


def test_assigns_selects_a_conditional_expression_assigned_to_the_target() -> None:
    """`backend = "fa4" if get_platform().is_sm100 else "triton"` (SGLang 0.5.21's inkling.py): `assigns = "backend"`
    picks its test, as it picks an `if` whose body sets the name; another target's is not picked. Widened past the
    line length, the value goes in parentheses as black writes it, and a second pass changes nothing."""
    source = dedent('''\
        def _inkling_overrides(server_args, hf_config):
            inkling_attn_backend = "fa4" if get_platform().is_sm100 else "triton"
            other = "fa4" if get_platform().is_sm100 else "triton"
            return inkling_attn_backend, other
        ''').encode()
    known = {".is_sm90": Meaning(frozenset({(9, 0)}), "t"), ".is_sm100": Meaning(frozenset({(10, 0), (10, 3)}), "t")}
    [gate] = find(source, DEFAULT_ARCHS, known, assigns="inkling_attn_backend")
    assert gate.line == 2
    widened = apply_edits(source, widen(source, gate, parse_archs("sm_90"), DEFAULT_ARCHS, known))
    assert widened.decode() == dedent('''\
        def _inkling_overrides(server_args, hf_config):
            inkling_attn_backend = (
                "fa4" if get_platform().is_sm100 or get_platform().is_sm90 else "triton"
            )
            other = "fa4" if get_platform().is_sm100 else "triton"
            return inkling_attn_backend, other
        ''')
    [again] = find(widened, DEFAULT_ARCHS, known, assigns="inkling_attn_backend")
    assert widen(widened, again, parse_archs("sm_90"), DEFAULT_ARCHS, known) == []


def test_tests_selects_the_if_whose_test_names_the_predicate() -> None:
    """FlashInfer 0.7.0's aot.py: `if has_sm100:` and `if has_sm100f:` both admit sm_100 alone and both append the
    TGV GEMM module; `tests = "has_sm100f"` picks the second, and finds it again once widened."""
    source = dedent('''\
        def detect_sm_capabilities():
            return {
                "sm100": has_sm("compute_100", "12.8"),
                "sm100f": has_sm("compute_100", "12.9"),
                "sm103": has_sm("compute_103", "12.9"),
            }


        def gen_all_modules(sm_capabilities):
            has_sm100 = sm_capabilities.get("sm100", False)
            has_sm100f = sm_capabilities.get("sm100f", False)
            has_sm103 = sm_capabilities.get("sm103", False)
            jit_specs = []
            if has_sm100:
                jit_specs.append(gen_gemm_sm100_module())
                jit_specs.append(gen_tgv_gemm_sm10x_module(use_sm_100f=False))
            if has_sm100f:
                jit_specs.append(gen_tgv_gemm_sm10x_module(use_sm_100f=True))
            return jit_specs
        ''').encode()
    meanings = _meanings(source, {})
    assert [g.line for g in find(source, DEFAULT_ARCHS, meanings, calls="gen_tgv_gemm_sm10x_module")] == [14, 17]
    [gate] = find(source, DEFAULT_ARCHS, meanings, calls="gen_tgv_gemm_sm10x_module", tests="has_sm100f")
    assert gate.line == 17
    widened = apply_edits(source, widen(source, gate, parse_archs("sm_103"), DEFAULT_ARCHS, meanings))
    assert b"    if has_sm100f or has_sm103:\n" in widened and b"    if has_sm100:\n" in widened
    [again] = find(widened, DEFAULT_ARCHS, _meanings(widened, {}), tests="has_sm100f")
    assert widen(widened, again, parse_archs("sm_103"), DEFAULT_ARCHS, _meanings(widened, {})) == []
    assert python_arch_test.check_selector("tests", "") != ""


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(b"\xef\xbb\xbf\xef\xbb\xbfif is_sm100_supported():\n    x = 1\n", id="two-boms-python-rejects-libcst-drops-both"),
        pytest.param(b"\xef\xbb\xbf\xef\xbb\xbf\xef\xbb\xbfif is_sm100_supported():\n    x = 1\n", id="three-boms"),
    ],
)
def test_a_second_bom_is_refused_not_read_three_bytes_off(source: bytes) -> None:
    """Python refuses a second BOM; libcst dropped it as it drops the first, and every span landed 3 bytes early
    (`if has_sm` for `has_sm100`), which the planner caught only as a rewritten gate that admits nothing."""
    with pytest.raises(SourceError, match="^not valid Python: line 1: a second byte order mark"):
        find(source, DEFAULT_ARCHS, SGLANG)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            "import x\n\n \\\nclass A:\n    def f(self):\n        if self.a and not is_sm100_supported():\n            raise E\n",
            id="blank-line-continued-by-a-backslash-libcst-drops-it",
        ),
        pytest.param(
            "import x\r\n\r\n \\\r\nclass A:\r\n    def f(self):\r\n        if self.a and not is_sm100_supported():\r\n            raise E\r\n",
            id="the-same-with-crlf",
        ),
    ],
)
def test_source_python_rejects_and_libcst_misreads_is_refused(source: str) -> None:
    """libcst reads a line of only ` \\` before a statement, which Python rejects, by leaving its bytes out, and
    every span after it landed early (`nd not is_sm100_supporte`; the planner caught it only as a rewritten gate
    that does not admit the target): refused with Python's reason."""
    with pytest.raises(SourceError, match="^not valid Python: line 4: unexpected indent"):
        find(source.encode(), DEFAULT_ARCHS, SGLANG)
