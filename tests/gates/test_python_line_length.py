"""`python.layout.text.line_length`: the limit black wrote a file at, read from the lines black would have split."""

from textwrap import dedent

import pytest

from codemods.gates.python.layout.text import line_length

PAD = "x" * 60


@pytest.mark.parametrize(
    "source, expected",
    [
        pytest.param("def f(a):\n    return a\n", 88, id="short-file-is-88"),
        pytest.param(
            f"""\
            def f(a):
                return call_{PAD}(a, b_{PAD[:20]})
            """,
            len(f"    return call_{PAD}(a, b_{PAD[:20]})"),
            id="a-call-black-would-split-sets-the-limit",
        ),
        pytest.param(
            f"""\
            n = self.model_runner.server_args.speculative_num_draft_tokens_{PAD} + 1
            """,
            len(f"n = self.model_runner.server_args.speculative_num_draft_tokens_{PAD} + 1"),
            id="a-statement-black-would-put-in-parentheses-sets-the-limit",
        ),
        pytest.param(
            """\
            @register_custom_op(
                op_name="mm_mxfp8",
                fake_impl=lambda q_input, weight_t, x_scale_u8, weight_scale_t, out_dtype, use_8x4_layout=False: (
                    q_input.new_empty((q_input.shape[0], weight_t.shape[1]), dtype=out_dtype)
                ),
            )
            def mm_mxfp8(q_input):
                return q_input
            """,
            88,
            id="sglang-0.5.23-fp8-utils-lambda-head-black-cannot-split",
        ),
        pytest.param(
            f"""\
            from sglang.multimodal_gen.runtime.pipelines_core.stages.model_specific_stages.{PAD[:20]} import (
                Stage,
            )
            """,
            88,
            id="import-head-black-cannot-split",
        ),
        pytest.param(
            f"""\
            def f(self):
                return g(
                    cache_seqlens=self.forward_metadata_spec_decode_expand.cache_seqlens_{PAD[:20]},
                )
            """,
            88,
            id="keyword-argument-inside-brackets-black-cannot-split",
        ),
        pytest.param(
            f"""\
            def f():
                if not Sm100BlockScaledPersistentDenseGemmKernel.is_valid_dtypes_and_scale_{PAD[:9]}(
                    a
                ):
                    pass
            """,
            88,
            id="if-head-ending-in-its-open-bracket",
        ),
        pytest.param(
            f'def f():\n    raise ValueError("{PAD}{PAD}")  # {PAD}\n',
            88,
            id="strings-and-comments-do-not-count",
        ),
    ],
)
def test_line_length(source: str, expected: int) -> None:
    assert line_length(dedent(source).encode()) == expected
