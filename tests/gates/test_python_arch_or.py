from textwrap import dedent

import pytest

from conftest import crlf, rewrite
from hypothesis import given
from hypothesis import strategies as st

from codemods.core.arch import DEFAULT_ARCHS, Arch, parse_archs
from codemods.gates import CannotWiden, apply_edits
from codemods.gates.python import python_arch_or
from codemods.gates.python.python_arch_or import KIND, find, missing_symbols, widen


def _rewrite(source: bytes, targets: tuple[Arch, ...], **selector) -> bytes:
    return rewrite(python_arch_or, source, targets, **selector)


FUSION = "apply_flashinfer_allreduce_fusion"
ASSIGNS = "self.enable_flashinfer_allreduce_fusion"

COMMUNICATOR = """\
    from sglang.srt.utils import (
        get_bool_env_var,
        is_cuda,
        is_flashinfer_available,
        is_sm90_supported,
        is_sm100_supported,
    )

    _is_cuda = is_cuda()
    _is_flashinfer_available = is_flashinfer_available()
    _is_sm90_supported = _is_cuda and is_sm90_supported()
    _is_sm100_supported = _is_cuda and is_sm100_supported()
    _use_aiter = get_bool_env_var("SGLANG_USE_AITER")


    def apply_flashinfer_allreduce_fusion(batch_size: int):
        return (
            # NOTE: a regression on sm100, see the issue
            (_is_sm90_supported or _is_sm100_supported)
            and _is_flashinfer_available
            and batch_size > 0
        )


    def other_fusion(batch_size: int):
        return (_is_sm90_supported or _is_sm100_supported) and batch_size > 0
    """

COMMUNICATOR_WIDENED = """\
    from sglang.srt.utils import (
        get_bool_env_var,
        is_cuda,
        is_flashinfer_available,
        is_sm90_supported,
        is_sm100_supported,
        is_sm120_supported,
    )

    _is_cuda = is_cuda()
    _is_flashinfer_available = is_flashinfer_available()
    _is_sm90_supported = _is_cuda and is_sm90_supported()
    _is_sm100_supported = _is_cuda and is_sm100_supported()
    _is_sm120_supported = _is_cuda and is_sm120_supported()
    _use_aiter = get_bool_env_var("SGLANG_USE_AITER")


    def apply_flashinfer_allreduce_fusion(batch_size: int):
        return (
            # NOTE: a regression on sm100, see the issue
            (_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)
            and _is_flashinfer_available
            and batch_size > 0
        )


    def other_fusion(batch_size: int):
        return (_is_sm90_supported or _is_sm100_supported) and batch_size > 0
    """

SERVER_ARGS = """\
    from sglang.srt.utils.common import (
        is_sm90_supported,
        is_sm100_supported,
        is_sm120_supported,
    )


    class ServerArgs:
        def _handle_model_specific_adjustments(self):
            if is_sm90_supported() or is_sm100_supported():
                self.enable_fused_qk_norm = True
            if (
                not self.enable_flashinfer_allreduce_fusion
                and model_arch
                in [
                    "DeepseekV3ForCausalLM",
                    "GptOssForCausalLM",
                ]
                and (is_sm90_supported() or is_sm100_supported())
                and not self.enable_dp_attention
                and self.nnodes == 1
            ):
                self.enable_flashinfer_allreduce_fusion = True
    """


@pytest.mark.parametrize(
    "before, after, archs, selector",
    [
        pytest.param(
            COMMUNICATOR,
            COMMUNICATOR_WIDENED,
            "sm_120",
            {"function": FUSION},
            id="sglang-communicator-chain-definition-import",
        ),
        pytest.param(
            SERVER_ARGS,
            SERVER_ARGS.replace(
                "and (is_sm90_supported() or is_sm100_supported())",
                "and (is_sm90_supported() or is_sm100_supported() or is_sm120_supported())",
            ),
            "sm_120",
            {"assigns": ASSIGNS},
            id="sglang-server-args-if-that-assigns",
        ),
        pytest.param(
            """\
            from sglang.srt.utils import is_sm90_supported, is_sm100_supported

            if is_sm90_supported() or is_sm100_supported():
                use_fusion = True
            """,
            """\
            from sglang.srt.utils import is_sm90_supported, is_sm100_supported, is_sm120_supported

            if is_sm90_supported() or is_sm100_supported() or is_sm120_supported():
                use_fusion = True
            """,
            "sm_120",
            {},
            id="call-import-on-one-line",
        ),
        pytest.param(
            """\
            from sglang.srt.utils import is_cuda, is_sm90_supported, is_sm100_supported

            if is_sm90_supported() or is_sm100_supported():
                use_fusion = True
            """,
            """\
            from sglang.srt.utils import (
                is_cuda,
                is_sm90_supported,
                is_sm100_supported,
                is_sm120_supported,
            )

            if is_sm90_supported() or is_sm100_supported() or is_sm120_supported():
                use_fusion = True
            """,
            "sm_120",
            {},
            id="import-past-88-split-one-name-a-line-as-black-sglang-0.5.16",
        ),
        pytest.param(
            """\
            from sglang.srt.utils import is_cuda, is_sm90_supported, is_sm100_supported

            if is_sm90_supported() or is_sm100_supported():
                use_fusion = compute_the_fusion_setting(first_argument, second_argument, third_argument, fourth)
            """,
            """\
            from sglang.srt.utils import is_cuda, is_sm90_supported, is_sm100_supported, is_sm120_supported

            if is_sm90_supported() or is_sm100_supported() or is_sm120_supported():
                use_fusion = compute_the_fusion_setting(first_argument, second_argument, third_argument, fourth)
            """,
            "sm_120",
            {},
            id="import-within-the-files-own-longer-line-length-stays-on-one-line",
        ),
        pytest.param(
            """\
            from sglang.srt.utils import (
                is_sm90_supported,
                is_sm100_supported,
                is_triton_kernels_available,
            )

            ok = is_sm90_supported() or is_sm100_supported()
            """,
            """\
            from sglang.srt.utils import (
                is_sm90_supported,
                is_sm100_supported,
                is_sm120_supported,
                is_triton_kernels_available,
            )

            ok = is_sm90_supported() or is_sm100_supported() or is_sm120_supported()
            """,
            "sm_120",
            {},
            id="import-goes-after-its-sibling",
        ),
        pytest.param(
            """\
            from ..utils import (
                is_sm90_supported,
                is_sm100_supported,  # blackwell
            )

            ok = is_sm90_supported() or is_sm100_supported()
            """,
            """\
            from ..utils import (
                is_sm90_supported,
                is_sm100_supported,  # blackwell
                is_sm120_supported,
            )

            ok = is_sm90_supported() or is_sm100_supported() or is_sm120_supported()
            """,
            "sm_120",
            {},
            id="relative-import-comment-stays",
        ),
        pytest.param(
            """\
            def fused(platform):
                return get_platform().is_sm90 or get_platform().is_sm100
            """,
            """\
            def fused(platform):
                return get_platform().is_sm90 or get_platform().is_sm100 or get_platform().is_sm120
            """,
            "sm_120",
            {},
            id="attribute-needs-no-import",
        ),
        pytest.param(
            "ok = current_platform.is_sm90_supported() or current_platform.is_sm100_supported()\n",
            # an assignment grown past the line is split as black splits it (issue 38: values widen as tests do)
            "ok = (\n    current_platform.is_sm90_supported()\n    or current_platform.is_sm100_supported()\n"
            "    or current_platform.is_sm120_supported()\n)\n",
            "sm_120",
            {},
            id="attribute-call",
        ),
        pytest.param(
            """\
            from sglang.srt.utils import is_sm120_supported

            _is_sm90_supported = is_sm90_supported()
            _is_sm120_supported = is_sm120_supported()


            def fused():
                if (
                    _is_sm90_supported  # hopper
                    or _is_sm100_supported  # blackwell
                ):
                    return True
            """,
            """\
            from sglang.srt.utils import is_sm120_supported

            _is_sm90_supported = is_sm90_supported()
            _is_sm120_supported = is_sm120_supported()


            def fused():
                if (
                    _is_sm90_supported  # hopper
                    or _is_sm100_supported or _is_sm120_supported  # blackwell
                ):
                    return True
            """,
            "sm_120",
            {},
            id="multiline-chain-appends-on-last-operand-line",
        ),
        pytest.param(
            """\
            from sglang.srt.utils import is_sm90_supported, is_sm100_supported, is_sm120_supported

            ok = is_sm90_supported() or (is_sm100_supported())
            """,
            """\
            from sglang.srt.utils import is_sm90_supported, is_sm100_supported, is_sm120_supported

            ok = is_sm90_supported() or (is_sm100_supported()) or is_sm120_supported()
            """,
            "sm_120",
            {},
            id="parenthesized-operand-stays-closed",
        ),
        pytest.param(
            """\
            from sglang.srt.utils import is_sm90_supported, is_sm100_supported, is_sm120_supported

            ok = (is_sm90_supported() or is_sm100_supported()) or is_sm90_supported()
            """,
            """\
            from sglang.srt.utils import is_sm90_supported, is_sm100_supported, is_sm120_supported

            ok = (
                (is_sm90_supported() or is_sm100_supported())
                or is_sm90_supported()
                or is_sm120_supported()
            )
            """,
            "sm_120",
            {},
            id="nested-chain-is-flattened",
        ),
        pytest.param(
            crlf(
                """\
                from sglang.srt.utils import (
                    is_cuda,
                    is_sm90_supported,
                    is_sm100_supported,
                )

                _is_cuda = is_cuda()
                _is_sm90_supported = _is_cuda and is_sm90_supported()
                _is_sm100_supported = _is_cuda and is_sm100_supported()


                def fused():
                    return _is_sm90_supported or _is_sm100_supported
                """
            ),
            crlf(
                """\
                from sglang.srt.utils import (
                    is_cuda,
                    is_sm90_supported,
                    is_sm100_supported,
                    is_sm120_supported,
                )

                _is_cuda = is_cuda()
                _is_sm90_supported = _is_cuda and is_sm90_supported()
                _is_sm100_supported = _is_cuda and is_sm100_supported()
                _is_sm120_supported = _is_cuda and is_sm120_supported()


                def fused():
                    return _is_sm90_supported or _is_sm100_supported or _is_sm120_supported
                """
            ),
            "sm_120",
            {"function": "fused"},
            id="crlf-kept-in-all-three-edits",
        ),
        pytest.param(
            """\
            from sglang.srt.utils import is_sm90_supported, is_sm100_supported

            _is_sm100_supported = is_sm100_supported()  # blackwell
            _is_sm90_supported = is_sm90_supported()

            ok = _is_sm90_supported or _is_sm100_supported
            """,
            """\
            from sglang.srt.utils import (
                is_sm90_supported,
                is_sm100_supported,
                is_sm110_supported,
                is_sm120_supported,
            )

            _is_sm100_supported = is_sm100_supported()  # blackwell
            _is_sm90_supported = is_sm90_supported()
            _is_sm110_supported = is_sm110_supported()
            _is_sm120_supported = is_sm120_supported()

            ok = (
                _is_sm90_supported
                or _is_sm100_supported
                or _is_sm110_supported
                or _is_sm120_supported
            )
            """,
            "sm_110,sm_120",
            {},
            id="two-majors-copy-the-last-definition",
        ),
        pytest.param(
            """\
            if _is_cuda:
                from sglang.srt.utils import is_sm90_supported, is_sm100_supported

                _is_sm90_supported = is_sm90_supported()
                _is_sm100_supported = is_sm100_supported()

            ok = _is_sm90_supported or _is_sm100_supported
            """,
            """\
            if _is_cuda:
                from sglang.srt.utils import (
                    is_sm90_supported,
                    is_sm100_supported,
                    is_sm120_supported,
                )

                _is_sm90_supported = is_sm90_supported()
                _is_sm100_supported = is_sm100_supported()
                _is_sm120_supported = is_sm120_supported()

            ok = _is_sm90_supported or _is_sm100_supported or _is_sm120_supported
            """,
            "sm_120",
            {},
            id="definitions-inside-module-level-if",
        ),
        pytest.param(
            "ok = is_sm90_supported() or is_sm100_supported()\n"
            "is_sm90_supported = is_sm100_supported = is_sm120_supported = lambda: True\n",
            "ok = is_sm90_supported() or is_sm100_supported() or is_sm120_supported()\n"
            "is_sm90_supported = is_sm100_supported = is_sm120_supported = lambda: True\n",
            "sm_120",
            {},
            id="defined-in-this-file-needs-no-import",
        ),
    ],
)
def test_widen(before: str, after: str, archs: str, selector: dict) -> None:
    targets = parse_archs(archs)
    source = dedent(before).encode()
    assert find(source, **selector), "the case must have a gate"
    widened = _rewrite(source, targets, **selector)
    assert widened.decode() == dedent(after)
    assert all(widen(widened, gate, targets) == [] for gate in find(widened, **selector))



# FlashInfer 9f4fd04ac's prefill.py shape: an `if` whose chain grows past 88 is split as black (and ruff format)
# split it, the same split python_arch_test makes (gates/python/layout/wrap.py); each `after` is what `ruff format` writes.
@pytest.mark.parametrize(
    "before, after",
    [
        pytest.param(
            """\
            from flashinfer.utils import is_sm100a_supported, is_sm110a_supported


            def get_fmha_module(device):
                if is_sm100a_supported(device) or is_sm110a_supported(device):
                    return gen_fmha_cutlass_sm100a_module().build_and_load()
                raise ValueError("SM100A is not supported on this device")
            """,
            """\
            from flashinfer.utils import (
                is_sm100a_supported,
                is_sm110a_supported,
                is_sm120a_supported,
            )


            def get_fmha_module(device):
                if (
                    is_sm100a_supported(device)
                    or is_sm110a_supported(device)
                    or is_sm120a_supported(device)
                ):
                    return gen_fmha_cutlass_sm100a_module().build_and_load()
                raise ValueError("SM100A is not supported on this device")
            """,
            id="whole-test-in-parentheses-one-predicate-a-line",
        ),
        pytest.param(
            """\
            from .utils import is_sm90a_supported, is_sm100a_supported


            def pick(dev, use_tma):
                if use_tma:
                    return "tma"
                elif use_tma is None and (is_sm90a_supported(dev) or is_sm100a_supported(dev)):
                    return "fa3"
                while is_sm90a_supported(dev) or is_sm100a_supported(dev):
                    break
            """,
            """\
            from .utils import is_sm90a_supported, is_sm100a_supported, is_sm120a_supported


            def pick(dev, use_tma):
                if use_tma:
                    return "tma"
                elif use_tma is None and (
                    is_sm90a_supported(dev) or is_sm100a_supported(dev) or is_sm120a_supported(dev)
                ):
                    return "fa3"
                while (
                    is_sm90a_supported(dev) or is_sm100a_supported(dev) or is_sm120a_supported(dev)
                ):
                    break
            """,
            id="elif-right-hand-split-and-while-in-parentheses-on-one-line",
        ),
        pytest.param(
            """\
            from .utils import is_sm90a_supported, is_sm100a_supported


            def pick(d):
                if is_sm90a_supported(d) or is_sm100a_supported(d):
                    return "fa3"
            """,
            """\
            from .utils import is_sm90a_supported, is_sm100a_supported, is_sm120a_supported


            def pick(d):
                if is_sm90a_supported(d) or is_sm100a_supported(d) or is_sm120a_supported(d):
                    return "fa3"
            """,
            id="a-chain-that-still-fits-stays-on-one-line",
        ),
    ],
)
def test_widen_wraps_as_black(before: str, after: str) -> None:
    targets = parse_archs("sm_120")
    widened = _rewrite(dedent(before).encode(), targets)
    assert widened.decode() == dedent(after)
    assert _rewrite(widened, targets) == widened

@pytest.mark.parametrize(
    "source, selector",
    [
        pytest.param(
            "ok = is_sm100_supported() or is_sm120_supported()\n", {}, id="already-admitted"
        ),
        pytest.param(
            "ok = _is_sm90_supported or _is_sm100_supported or _is_sm120_supported\n",
            {},
            id="already-admitted-name-form",
        ),
        pytest.param("ok = _is_sm90_supported or _is_hip\n", {}, id="non-arch-operand"),
        pytest.param(
            "ok = is_sm90_supported() or is_blackwell_supported()\n",
            {},
            id="predicate-without-number",
        ),
        pytest.param(
            "ok = (is_sm90_supported() or is_sm100_supported()) or _is_npu\n",
            {},
            id="nested-in-mixed-chain",
        ),
        pytest.param("ok = is_sm90_supported() and is_sm100_supported()\n", {}, id="and-is-not-or"),
        pytest.param("if is_sm100_supported():\n    ok = True\n", {}, id="single-predicate"),
        pytest.param(
            "ok = not is_sm90_supported() or is_sm100_supported()\n", {}, id="negated-operand"
        ),
        pytest.param(
            """\
            # is_sm90_supported() or is_sm100_supported()
            help = "is_sm90_supported() or is_sm100_supported()"
            """,
            {},
            id="comment-and-string",
        ),
        pytest.param(COMMUNICATOR, {"function": "missing_function"}, id="function-not-matching"),
        pytest.param(SERVER_ARGS, {"function": "_handle_sampling_backend"}, id="other-method"),
        pytest.param(
            """\
            if is_sm90_supported() or is_sm100_supported():
                self.enable_other = True
            """,
            {"assigns": ASSIGNS},
            id="if-assigns-another-target",
        ),
        pytest.param(
            """\
            if is_sm90_supported() or is_sm100_supported():
                if ready:
                    self.enable_flashinfer_allreduce_fusion = True
            """,
            {"assigns": ASSIGNS},
            id="assignment-not-directly-in-the-body",
        ),
        pytest.param(
            """\
            if ready:
                self.enable_flashinfer_allreduce_fusion = is_sm90_supported() or is_sm100_supported()
            """,
            {"assigns": ASSIGNS},
            id="chain-in-the-body-not-the-test",
        ),
    ],
)
def test_noop(source: str, selector: dict) -> None:
    data = dedent(source).encode()
    assert _rewrite(data, parse_archs("sm_120"), **selector) == data


def test_gate() -> None:
    source = dedent(COMMUNICATOR).encode()
    [gate] = find(source, function=FUSION)
    assert gate.kind == KIND
    assert (gate.line, gate.context) == (19, FUSION)
    assert gate.text == "(_is_sm90_supported or _is_sm100_supported)"
    assert source[gate.start : gate.end] == gate.text.encode()
    assert gate.admits.names() == ["sm_90", "sm_100", "sm_103"]
    assert gate.detail == {
        "form": "name",
        "predicates": ["_is_sm90_supported", "_is_sm100_supported"],
    }
    assert len(find(source)) == 2


def test_assigns_selects_one_of_two_chains() -> None:
    source = dedent(SERVER_ARGS).encode()
    assert len(find(source)) == 2
    [gate] = find(source, assigns=ASSIGNS)
    assert gate.line == 19
    assert gate.context == "_handle_model_specific_adjustments"
    assert gate.detail["form"] == "call"


@pytest.mark.parametrize(
    "source, symbols",
    [
        pytest.param(
            COMMUNICATOR, ["sglang.srt.utils.is_sm120_supported"], id="imported-for-the-definition"
        ),
        pytest.param(SERVER_ARGS, [], id="already-imported"),
        pytest.param(
            """\
            from .. import is_sm90_supported, is_sm100_supported
            ok = is_sm90_supported() or is_sm100_supported()
            """,
            ["..is_sm120_supported"],
            id="relative-import",
        ),
        pytest.param(
            "ok = get_platform().is_sm90 or get_platform().is_sm100\n",
            ["get_platform().is_sm120"],
            id="attribute",
        ),
        pytest.param(
            "ok = p.is_sm90_supported() or p.is_sm100_supported(0)\n",
            ["p.is_sm120_supported"],
            id="attribute-call",
        ),
        pytest.param("ok = p.is_sm100 or p.is_sm120\n", [], id="already-admitted"),
    ],
)
def test_missing_symbols(source: str, symbols: list[str]) -> None:
    data = dedent(source).encode()
    gate = find(data)[-1]
    assert missing_symbols(data, gate, parse_archs("sm_120")) == symbols


@pytest.mark.parametrize(
    "source, reason",
    [
        pytest.param(
            """\
            def f(_is_sm90_supported, _is_sm100_supported):
                return _is_sm90_supported or _is_sm100_supported
            """,
            "no module-level `_is_sm100_supported = ...` to copy",
            id="names-are-parameters",
        ),
        pytest.param(
            """\
            _is_sm90 = cap[0] == 9 and is_sm90()
            _is_sm100 = cap[0] == 10 and is_sm100()
            ok = _is_sm90 or _is_sm100
            """,
            "cannot derive `_is_sm120`",
            id="definition-spells-the-major",
        ),
        pytest.param(
            "_is_sm90 = cap[0] == 9\n_is_sm100 = cap[0] == 10\nok = _is_sm90 or _is_sm100\n",
            "cannot derive `_is_sm120`",
            id="definition-without-predicate",
        ),
        pytest.param(
            "ok = is_sm90_supported() or is_sm100_supported()\n",
            "`is_sm120_supported` is not defined or imported here",
            id="call-neither-defined-nor-imported",
        ),
        pytest.param(
            """\
            from m import check as is_sm100_supported
            ok = is_sm90_supported() or is_sm100_supported()
            """,
            "imported under another name",
            id="sibling-imported-under-alias",
        ),
    ],
)
def test_cannot_widen(source: str, reason: str) -> None:
    data = dedent(source).encode()
    [gate] = find(data)
    with pytest.raises(CannotWiden, match=reason):
        widen(data, gate, parse_archs("sm_120"))


FORMS = {
    "name": "_is_sm{}_supported",
    "call": "is_sm{}_supported()",
    "attribute": "get_platform().is_sm{}",
    "attribute_call": "p.is_sm{}_supported()",
}


@given(
    form=st.sampled_from(sorted(FORMS)),
    numbers=st.lists(st.sampled_from([80, 90, 100, 110, 120]), min_size=2, max_size=4),
    targets=st.lists(st.sampled_from(DEFAULT_ARCHS), min_size=1, max_size=3),
)
def test_widened_chain_admits_old_set_plus_targets(
    form: str, numbers: list[int], targets: list[Arch]
) -> None:
    spelled = [FORMS[form].format(n) for n in numbers]
    everything = [FORMS[form].format(n) for n in (80, 90, 100, 110, 120)]
    if form == "name":
        header = "".join(f"{name} = True\n" for name in everything)
    elif form == "call":
        header = "".join(f"def {name[:-2]}(): pass\n" for name in everything)
    else:
        header = ""
    source = (header + "ok = " + " or ".join(spelled) + "\n").encode()
    [gate] = find(source)
    widened = apply_edits(source, widen(source, gate, tuple(targets)))
    [after] = find(widened)
    wanted = {t.major for t in targets}
    assert after.admits.admitted == gate.admits.admitted | {
        a for a in DEFAULT_ARCHS if a.major in wanted
    }
    assert widened.startswith(source[: gate.start])
    assert widen(widened, after, tuple(targets)) == []


def test_edits_are_minimal_insertions() -> None:
    source = dedent(COMMUNICATOR).encode()
    [gate] = find(source, function=FUSION)
    edits = widen(source, gate, parse_archs("sm_120"))
    assert [edit.text for edit in edits] == [
        b"    is_sm120_supported,\n",
        b"_is_sm120_supported = _is_cuda and is_sm120_supported()\n",
        b" or _is_sm120_supported",
    ]
    assert all(edit.start == edit.end for edit in edits)
    assert all(source[edit.start - 1 : edit.start] == b"\n" for edit in edits[:2])
    assert source[: edits[2].start].endswith(b"_is_sm100_supported")


def test_import_on_one_line_is_extended_after_the_sibling() -> None:
    source = (
        b"from m import is_sm90_supported, is_sm100_supported, is_hip\n"
        b"ok = is_sm90_supported() or is_sm100_supported()\n"
    )
    [gate] = find(source)
    [import_edit, _] = widen(source, gate, parse_archs("sm_120"))
    assert import_edit.text == b", is_sm120_supported"
    assert source[: import_edit.start].endswith(b"is_sm100_supported")


@pytest.mark.parametrize(
    "text, admitted, unknown",
    [
        pytest.param("(_is_sm90_supported or _is_sm120_supported)", ["sm_90", "sm_120", "sm_121"], [], id="names-in-parens"),
        pytest.param("get_platform().is_sm100 or get_platform().is_sm110", ["sm_100", "sm_103", "sm_110"], [], id="attributes"),
        pytest.param("is_sm90_supported() or is_hip()", [], "all", id="non-arch-operand-is-unknown"),
    ],
)
def test_admits_text(text, admitted, unknown):
    from codemods.core.arch import DEFAULT_ARCHS
    from codemods.gates.python.python_arch_or import admits

    result = admits(text, DEFAULT_ARCHS)
    assert result.names() == admitted
    assert result.unknown_names() == ([a.name for a in DEFAULT_ARCHS] if unknown == "all" else unknown)
