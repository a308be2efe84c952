"""jit_specs: FlashInfer's gen_jit_spec calls, their sources and the gates that pick their archs."""

from __future__ import annotations

from textwrap import dedent

import pytest

from codemods.jit import specs as jit_specs
from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates.python.cst_source import parse
from codemods.jit.spec_cst import LibcstIndex
from codemods.jit.specs import _AstIndex, _Unsupported, find

SM120 = Arch.parse("sm_120")


def _specs(text: str):
    return find(dedent(text).encode())


def test_literal_module_list_sources_and_majors():
    [spec] = _specs(
        """\
        def gen_trtllm_comm_module() -> JitSpec:
            nvcc_flags = current_compilation_context.get_nvcc_flags_list(
                supported_major_versions=[9, 10]
            )
            return gen_jit_spec(
                "trtllm_comm",
                [
                    jit_env.FLASHINFER_CSRC_DIR / "trtllm_allreduce.cu",
                    jit_env.FLASHINFER_CSRC_DIR / "nv_internal" / "cpp" / "common" / "envUtils.cpp",
                    jit_env.FLASHINFER_CSRC_DIR / "nv_internal/cpp/common/tllmException.cpp",
                ],
                extra_include_paths=[str(jit_env.FLASHINFER_CSRC_DIR / "nv_internal" / "include")],
                extra_cuda_cflags=nvcc_flags,
            )
        """
    )
    assert (spec.module, spec.function, spec.line) == ("trtllm_comm", "gen_trtllm_comm_module", 5)
    assert spec.sources == (
        ("csrc", "trtllm_allreduce.cu"),
        ("csrc", "nv_internal/cpp/common/envUtils.cpp"),
        ("csrc", "nv_internal/cpp/common/tllmException.cpp"),
    )
    assert spec.include_dirs == (("csrc", "nv_internal/include"),)
    assert (spec.gate.majors, spec.gate.text, spec.gate.line) == ((9, 10), "[9, 10]", 3)
    assert not spec.gate.admits(SM120) and spec.gate.admits(Arch.parse("sm_103"))


def test_a_spec_without_gate():
    [spec] = _specs(
        'def gen_norm_module():\n    return gen_jit_spec("norm", [jit_env.FLASHINFER_CSRC_DIR / "norm.cu"])\n'
    )
    assert spec.gate is None


def test_computed_list_is_no_gate():
    [spec] = _specs(
        """\
        def gen_m():
            flags = ctx.get_nvcc_flags_list(supported_major_versions=MAJORS)
            flags += ctx.get_nvcc_flags_list(supported_major_versions=[9, *MORE])
            return gen_jit_spec("m", [], extra_cuda_cflags=flags)
        """
    )
    assert spec.gate is None


def test_callers_give_one_variant_each_and_flag_names_are_exact_targets():
    specs = _specs(
        """\
        def gen_fused_moe_sm120_module():
            nvcc_flags = ["-DX"] + ctx.get_nvcc_flags_list(supported_major_versions=[12])
            return gen_fused_moe_module(nvcc_flags, "120")


        def gen_fused_moe_sm90_module():
            nvcc_flags = sm90a_nvcc_flags + ["-DX"]
            return gen_fused_moe_module(nvcc_flags, "90")


        def gen_fused_moe_plain_module():
            return gen_fused_moe_module([], "80")


        def gen_fused_moe_module(nvcc_flags, device_arch):
            sources = [jit_env.FLASHINFER_CSRC_DIR / "fused_moe" / "binding.cu"]
            for name in ["moe_kernels.cu"]:
                sources.append(jit_env.FLASHINFER_GEN_SRC_DIR / name)
            return gen_jit_spec(f"fused_moe_{device_arch}", sources, extra_cuda_cflags=nvcc_flags)
        """
    )
    assert [(s.module, s.gate.majors, s.gate.targets) for s in specs] == [
        ("gen_fused_moe_sm120_module", (12,), ()),
        ("gen_fused_moe_sm90_module", (), (Arch.parse("sm_90a"),)),
    ]
    assert specs[0].sources == (("csrc", "fused_moe/binding.cu"), ("csrc", "moe_kernels.cu"))
    assert specs[1].gate.admits(Arch.parse("sm_90")) and not specs[1].gate.admits(SM120)


def test_flags_added_under_an_if_make_no_gate():
    specs = _specs(
        """\
        def gen_batch_mla_module(backend):
            extra_cuda_cflags = []
            if backend == "fa3":
                extra_cuda_cflags += sm90a_nvcc_flags
            return gen_jit_spec(uri, source_paths, extra_cuda_cflags=extra_cuda_cflags)


        def gen_single_prefill_module(backend):
            if backend == "fa2":
                return gen_jit_spec(uri, ["single_prefill.cu"])
            return gen_jit_spec(uri, ["single_prefill_sm90.cu"], extra_cuda_cflags=sm90a_nvcc_flags)
        """
    )
    assert [(s.module, s.gate and s.gate.text, s.sources) for s in specs] == [
        ("gen_batch_mla_module", None, ()),
        ("gen_single_prefill_module", None, (("csrc", "single_prefill.cu"),)),
        ("gen_single_prefill_module", "sm90a_nvcc_flags", (("csrc", "single_prefill_sm90.cu"),)),
    ]


def test_no_call_no_parse():
    assert find(b"this is not python (") == []


# The ast reading must give what the libcst reading gives, for every input; these are the places where the
# two trees differ, and the inputs the ast reading hands to libcst.

CONCATENATED = """\
def gen_m():
    return gen_jit_spec(
        "m" "_sm90",
        ["a.cu" "b.cu", jit_env.FLASHINFER_CSRC_DIR / "d" "e.cu", b"bytes.cu"],
    )
"""

PARENTHESISED = """\
def gen_m():
    a = ctx.get_nvcc_flags_list(supported_major_versions=([9, 10]))
    b = ctx.get_nvcc_flags_list(supported_major_versions = (  # 12: PR 1234
        (9, 12)
    ))
    return gen_jit_spec("m", [], extra_cuda_cflags=a + b)
"""

FSTRING_PATHS = """\
def gen_m():
    flags = [f"-I{jit_env.FLASHINFER_CSRC_DIR / 'fmha_v2'}", f'''
        {jit_env.FLASHINFER_CSRC_DIR /
            "multi" / 'line.cu'} {"loose.cu"}''']
    return gen_jit_spec("m", source_paths, extra_include_paths=[f"{jit_env.FLASHINFER_INCLUDE_DIR / 'inc'}"])
"""

ONE_LINE_BODY = """\
def gen_a(): flags = sm90a_nvcc_flags; return gen_jit_spec("a", [], extra_cuda_cflags=flags)
def gen_b():
    flags = sm90a_nvcc_flags; return gen_jit_spec("b", [], extra_cuda_cflags=flags)
"""

IMPORTED_FLAGS = """\
@register(supported_major_versions=[10])
def gen_m_sm100():
    from .core import sm100a_nvcc_flags, sm103a_nvcc_flags as sm103
    return gen_m(sm100a_nvcc_flags + sm103)


def gen_m(flags):
    return gen_jit_spec(name="m", sources=["a.cu"], extra_cuda_cflags=flags)
"""

ARGUMENT_ORDER = """\
def gen_m(args, kwargs):
    gen_jit_spec(*args)
    gen_jit_spec(**kwargs)
    gen_jit_spec(extra_include_paths=[jit_env.FLASHINFER_CSRC_DIR / "inc"], *("m", ["a.cu"]))
    return gen_jit_spec(sources=["b.cu"], name=("n"), extra_cuda_cflags=[*sm90a_nvcc_flags])
"""

NORMALIZED_IN_FSTRING = """\
def gen_m_sm90():
    nvcc_flags = sm90a_nvcc_flags
    log(f"{\uff47en_m()}")


def gen_m():
    return gen_jit_spec("m", [])
"""


def _libcst_reading(source: bytes):
    return jit_specs._specs(LibcstIndex(parse(source), source, DEFAULT_ARCHS))


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(CONCATENATED.encode(), id="implicit-concatenation-is-one-string-per-piece"),
        pytest.param(PARENTHESISED.encode(), id="parentheses-around-a-list-are-its-text"),
        pytest.param(FSTRING_PATHS.encode(), id="paths-and-strings-inside-f-strings"),
        pytest.param(ONE_LINE_BODY.encode(), id="flags-in-a-body-after-the-colon"),
        pytest.param(IMPORTED_FLAGS.encode(), id="flags-imported-in-the-function-and-a-list-in-its-decorator"),
        pytest.param(ARGUMENT_ORDER.encode(), id="starred-arguments-and-keywords-before-them"),
        pytest.param(b"\xef\xbb\xbf" + PARENTHESISED.encode(), id="bom"),
        pytest.param(PARENTHESISED.replace("\n", "\r\n").encode(), id="crlf"),
        pytest.param(
            "# ünïcode\n".encode() + CONCATENATED.replace('"m"', '"ü"').encode(), id="non-ascii-in-strings-and-comments"
        ),
    ],
)
def test_ast_reading_is_libcst_reading(source):
    _AstIndex(source)  # read without falling back
    assert find(source) == _libcst_reading(source)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(b"X = [*a for a in b]\n" + IMPORTED_FLAGS.encode(), id="syntax-ast-rejects"),
        pytest.param(CONCATENATED.replace("b.cu", 'b.cu" f"{x}').encode(), id="a-source-concatenated-to-an-f-string"),
        pytest.param(ONE_LINE_BODY.replace("sm90a", "sm\uff19\uff10a").encode(), id="a-name-ast-normalizes"),
        pytest.param(NORMALIZED_IN_FSTRING.encode(), id="a-name-ast-normalizes-inside-an-f-string"),
        pytest.param(b"x = 1\rgen_jit_spec('m', ['a.cu'])\n", id="a-lone-cr"),
        pytest.param(
            ONE_LINE_BODY.replace("def gen_b():", "def gen_b(): \\").encode(), id="a-body-continued-after-a-backslash"
        ),
        pytest.param(
            b'def gen_m():\n    return f"{gen_jit_spec(\'m\', [], extra_cuda_cflags=sm90a_nvcc_flags)}"\n',
            id="a-spec-inside-an-f-string",
        ),
    ],
)
def test_libcst_reads_what_ast_cannot_vouch_for(source):
    with pytest.raises(_Unsupported):
        jit_specs._specs(_AstIndex(source))
    assert find(source) == _libcst_reading(source)


def test_concatenated_strings():
    [spec] = find(CONCATENATED.encode())
    assert spec.module == "gen_m"  # "m" "_sm90" is no string literal
    assert spec.sources == (("csrc", "a.cu"), ("csrc", "b.cu"), ("csrc", "e.cu"))


def test_parenthesised_lists_keep_their_parentheses():
    for source in (PARENTHESISED.encode(), b"\xef\xbb\xbf" + PARENTHESISED.encode()):
        [spec] = find(source)
        assert spec.gate.text == "([9, 10]), (  # 12: PR 1234\n        (9, 12)\n    )"
        assert (spec.gate.line, spec.gate.majors) == (2, (9, 10, 12))


def test_a_name_ast_normalizes_is_read_as_written():
    [a, b] = find(ONE_LINE_BODY.replace("sm90a", "sm\uff19\uff10a").encode())
    assert a.gate is None
    assert (b.gate.text, b.gate.targets) == ("sm\uff19\uff10a_nvcc_flags", (Arch.parse("sm_90a"),))
    [spec] = find(NORMALIZED_IN_FSTRING.encode())
    assert spec.gate is None  # libcst: gen_m_sm90 calls "\uff47en_m", not gen_m
