import re
from textwrap import dedent

import pytest

from conftest import crlf, rewrite
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from codemods.core.arch import DEFAULT_ARCHS, Arch, parse_archs
from codemods.gates import CannotWiden, SourceError, apply_edits
from codemods.gates.python import python_arch_list
from codemods.gates.python.python_arch_list import KIND, find, widen


def _rewrite(source: bytes, targets: tuple[Arch, ...], **selector) -> bytes:
    return rewrite(python_arch_list, source, targets, **selector)


SPEC = "gen_trtllm_comm_module"


@pytest.mark.parametrize(
    "before, after, archs, selector",
    [
        pytest.param(
            """\
            def gen_trtllm_comm_module() -> JitSpec:
                nvcc_flags = current_compilation_context.get_nvcc_flags_list(
                    supported_major_versions=[9, 10]
                )
                return gen_jit_spec("trtllm_comm", sources, extra_cuda_cflags=nvcc_flags)
            """,
            """\
            def gen_trtllm_comm_module() -> JitSpec:
                nvcc_flags = current_compilation_context.get_nvcc_flags_list(
                    supported_major_versions=[9, 10, 12]
                )
                return gen_jit_spec("trtllm_comm", sources, extra_cuda_cflags=nvcc_flags)
            """,
            "sm_120",
            {"function": SPEC},
            id="flashinfer-comm-spec",
        ),
        pytest.param(
            """\
            def gen_trtllm_comm_module():
                return flags(supported_major_versions=[9, 10])


            def gen_vllm_comm_module():
                return flags(supported_major_versions=[9, 10])
            """,
            """\
            def gen_trtllm_comm_module():
                return flags(supported_major_versions=[9, 10, 12])


            def gen_vllm_comm_module():
                return flags(supported_major_versions=[9, 10])
            """,
            "sm_120",
            {"function": SPEC},
            id="only-the-selected-spec",
        ),
        pytest.param(
            """\
            def gen_trtllm_comm_module():
                def inner():
                    return flags(supported_major_versions=[9, 10])

                return flags(supported_major_versions=[9, 10])
            """,
            """\
            def gen_trtllm_comm_module():
                def inner():
                    return flags(supported_major_versions=[9, 10])

                return flags(supported_major_versions=[9, 10, 12])
            """,
            "sm_120",
            {"function": SPEC},
            id="nested-def-is-another-function",
        ),
        pytest.param(
            "flags(supported_major_versions=(9, 10))\n",
            "flags(supported_major_versions=(9, 10, 12))\n",
            "sm_120",
            {},
            id="tuple",
        ),
        pytest.param(
            "flags(supported_major_versions=[9,10])\n",
            "flags(supported_major_versions=[9,10,12])\n",
            "sm_120",
            {},
            id="separator-without-space",
        ),
        pytest.param(
            "flags(supported_major_versions=[9, 12])\n",
            "flags(supported_major_versions=[9, 10, 12])\n",
            "sm_100",
            {},
            id="ascending-insert-in-the-middle",
        ),
        pytest.param(
            "flags(supported_major_versions=[10])\n",
            "flags(supported_major_versions=[9, 10, 11, 12])\n",
            "sm_90,sm_110,sm_120,sm_121",
            {},
            id="several-majors-before-and-after",
        ),
        pytest.param(
            """\
            nvcc_flags = ctx.get_nvcc_flags_list(
                supported_major_versions=[
                    10,
                    11,
                ]
            )
            """,
            """\
            nvcc_flags = ctx.get_nvcc_flags_list(
                supported_major_versions=[
                    10,
                    11,
                    12,
                ]
            )
            """,
            "sm_120",
            {},
            id="one-per-line-trailing-comma",
        ),
        pytest.param(
            """\
            flags(supported_major_versions=[
                10,
                11
            ])
            """,
            """\
            flags(supported_major_versions=[
                10,
                11,
                12
            ])
            """,
            "sm_120",
            {},
            id="one-per-line-no-trailing-comma",
        ),
        pytest.param(
            """\
            flags(supported_major_versions=[
                9,  # hopper
                12,  # rtx pro
            ])
            """,
            """\
            flags(supported_major_versions=[
                9,  # hopper
                10,
                12,  # rtx pro
            ])
            """,
            "sm_100",
            {},
            id="one-per-line-insert-keeps-comments",
        ),
        pytest.param(
            """\
            flags(supported_major_versions=[
                9,
                10  # blackwell
            ])
            """,
            """\
            flags(supported_major_versions=[
                9,
                10,  # blackwell
                12
            ])
            """,
            "sm_120",
            {},
            id="comment-stays-on-its-element",
        ),
        pytest.param(
            "flags(supported_major_versions=[9, 10  # blackwell\n])\n",
            "flags(supported_major_versions=[9, 10, 12  # blackwell\n])\n",
            "sm_120",
            {},
            id="inline-list-with-comment",
        ),
        pytest.param(
            crlf(
                """\
                def gen_trtllm_comm_module():
                    return flags(
                        supported_major_versions=[
                            9,
                            10,
                        ]
                    )
                """
            ),
            crlf(
                """\
                def gen_trtllm_comm_module():
                    return flags(
                        supported_major_versions=[
                            9,
                            10,
                            12,
                        ]
                    )
                """
            ),
            "sm_120",
            {"function": SPEC},
            id="crlf-kept",
        ),
        pytest.param(
            "\ufeff# Gerät: café\nflags(name='ü', supported_major_versions=[9, 10])\n",
            "\ufeff# Gerät: café\nflags(name='ü', supported_major_versions=[9, 10, 12])\n",
            "sm_120",
            {},
            id="bom-and-non-ascii-before-the-list",
        ),
        pytest.param(
            "flags(supported_major_versions=(9,))\n",
            "flags(supported_major_versions=(9, 12,))\n",
            "sm_120",
            {},
            id="one-tuple-keeps-its-comma",
        ),
        pytest.param(
            "flags(supported_major_versions=())\n",
            "flags(supported_major_versions=(12,))\n",
            "sm_120",
            {},
            id="empty-tuple",
        ),
        pytest.param(
            "flags(archs=[9, 10], supported_major_versions=[8])\n",
            "flags(archs=[9, 10, 12], supported_major_versions=[8])\n",
            "sm_120",
            {"keyword": "archs"},
            id="keyword-selector",
        ),
    ],
)
def test_widen(before: str, after: str, archs: str, selector: dict) -> None:
    targets = parse_archs(archs)
    source = dedent(before).encode()
    assert find(source, **selector), "the case must have a gate"
    widened = _rewrite(source, targets, **selector)
    assert widened == dedent(after).encode()
    assert all(widen(widened, gate, targets) == [] for gate in find(widened, **selector))


@pytest.mark.parametrize(
    "source, selector",
    [
        pytest.param("flags(supported_major_versions=[9, 10, 12])\n", {}, id="already-admitted"),
        pytest.param(
            "flags(supported_major_versions=[9, 10, 11, 12])\n",
            {},
            id="already-admitted-among-others",
        ),
        pytest.param(
            "flags(supported_major_versions=[9, 10, *EXTRA])\n", {}, id="spread-is-unknown"
        ),
        pytest.param("flags(supported_major_versions=[9, BLACKWELL])\n", {}, id="name-is-unknown"),
        pytest.param(
            "flags(supported_major_versions=[m for m in range(9, 11)])\n", {}, id="comprehension"
        ),
        pytest.param("flags(supported_major_versions=MAJORS)\n", {}, id="name-instead-of-list"),
        pytest.param(
            """\
            def gen_trtllm_comm_module():
                return gen_jit_spec("trtllm_comm", sources)


            def gen_gemm_module():
                return flags(supported_major_versions=[9, 10])
            """,
            {"function": SPEC},
            id="other-spec-not-selected",
        ),
        pytest.param("flags(supported_minor_versions=[9, 10])\n", {}, id="other-keyword"),
        pytest.param("flags([9, 10])\n", {}, id="positional-list"),
        pytest.param(
            "def get_nvcc_flags_list(supported_major_versions=[9, 10]):\n    pass\n",
            {},
            id="parameter-default-is-not-a-call",
        ),
        pytest.param(
            '# supported_major_versions=[9, 10]\ndoc = "flags(supported_major_versions=[9, 10])"\n',
            {},
            id="comment-and-string",
        ),
    ],
)
def test_noop(source: str, selector: dict) -> None:
    data = dedent(source).encode()
    assert _rewrite(data, parse_archs("sm_120"), **selector) == data


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("flags(supported_major_versions=[9, 10, *EXTRA])\n", id="spread"),
        pytest.param("flags(supported_major_versions=[9, BLACKWELL])\n", id="name"),
        pytest.param("flags(supported_major_versions=[9, -10])\n", id="expression"),
    ],
)
def test_unknown_list(source: str) -> None:
    [gate] = find(source.encode())
    assert gate.admits.unknown == frozenset(DEFAULT_ARCHS)
    assert gate.detail["majors"] is None
    with pytest.raises(CannotWiden, match="not a list of integer literals"):
        widen(source.encode(), gate, parse_archs("sm_120"))


def test_gate() -> None:
    source = dedent(
        """\
        def gen_trtllm_comm_module():
            nvcc_flags = ctx.get_nvcc_flags_list(
                supported_major_versions=[9, 10]
            )
        """
    ).encode()
    [gate] = find(source)
    assert gate.kind == KIND
    assert (gate.line, gate.context, gate.text) == (3, "gen_trtllm_comm_module", "[9, 10]")
    assert gate.admits.names() == ["sm_90", "sm_100", "sm_103"]
    assert gate.detail == {"keyword": "supported_major_versions", "majors": [9, 10], "style": "majors"}


@pytest.mark.parametrize(
    "prefix",
    [
        pytest.param("", id="ascii"),
        pytest.param("# ü € 𝄞\n", id="multibyte-characters"),
        pytest.param("\ufeff", id="bom"),
        pytest.param("\ufeff# Gerät\r\nname = 'café'\r\n", id="bom-crlf-non-ascii"),
    ],
)
def test_spans_are_byte_offsets(prefix: str) -> None:
    source = (prefix + "x = flags(supported_major_versions=(9, 10))\n").encode()
    [gate] = find(source)
    assert source[gate.start : gate.end] == b"(9, 10)"
    assert gate.text == "(9, 10)"
    assert gate.line == prefix.count("\n") + 1


def test_not_python() -> None:
    with pytest.raises(SourceError, match="not valid Python"):
        find(b"def f(:\n")
    with pytest.raises(SourceError, match="not UTF-8"):
        find(b"x = '\xff'\n")


@given(
    majors=st.lists(st.integers(8, 13), max_size=5),
    targets=st.lists(st.sampled_from(DEFAULT_ARCHS), min_size=1, max_size=3),
    one_per_line=st.booleans(),
)
def test_widened_list_admits_old_set_plus_targets(
    majors: list[int], targets: list[Arch], one_per_line: bool
) -> None:
    if one_per_line and majors:
        listed = "[\n" + "".join(f"        {m},\n" for m in majors) + "    ]"
    else:
        listed = "[" + ", ".join(map(str, majors)) + "]"
    source = f"flags(\n    supported_major_versions={listed}\n)\n".encode()
    [gate] = find(source)
    widened = apply_edits(source, widen(source, gate, tuple(targets)))
    [after] = find(widened)
    assert after.admits.admitted == gate.admits.admitted | {
        arch for arch in DEFAULT_ARCHS if arch.major in {t.major for t in targets}
    }
    added = sorted({t.major for t in targets} - set(majors))
    assert sorted(after.detail["majors"]) == sorted(majors + added)
    if majors == sorted(majors):
        assert after.detail["majors"] == sorted(majors + added)
    assert widen(widened, after, tuple(targets)) == []


def test_edit_is_the_inserted_element_only() -> None:
    source = b"flags(supported_major_versions=[9, 10])\n"
    [gate] = find(source)
    [edit] = widen(source, gate, parse_archs("sm_120"))
    assert edit.text == b", 12"
    assert edit.start == edit.end == source.index(b"]")


@pytest.mark.parametrize(
    "text, admitted, unknown",
    [
        pytest.param("[9, 10, 12]", ["sm_90", "sm_100", "sm_103", "sm_120", "sm_121"], [], id="majors-listed"),
        pytest.param("(11,)", ["sm_110"], [], id="tuple"),
        pytest.param("[9, MAJOR]", [], "all", id="computed-is-unknown"),
        pytest.param("[9, 10", [], "all", id="unparsable-is-unknown"),
    ],
)
def test_admits_text(text, admitted, unknown):
    from codemods.core.arch import DEFAULT_ARCHS
    from codemods.gates.python.python_arch_list import admits

    result = admits(text, DEFAULT_ARCHS)
    assert result.names() == admitted
    assert result.unknown_names() == ([a.name for a in DEFAULT_ARCHS] if unknown == "all" else unknown)


def _gates(gates) -> list[tuple]:
    return [(g.kind, g.start, g.end, g.line, g.text, g.admits, g.context, g.detail) for g in gates]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("f(supported_major_versions=[9, 10])\n", id="module-level"),
        pytest.param(
            "def gen():\n    return ctx.flags(\n        supported_major_versions=[\n            9,\n            10,\n        ]\n    )\n",
            id="one-per-line",
        ),
        pytest.param("\ufeffdef g():\n    f(supported_major_versions=(9, 10))\n", id="bom-tuple"),
        pytest.param("def g():\n    f(supported_major_versions=[9, x, 0x0a])\n", id="computed"),
        pytest.param("def g():\n    f(supported_major_versions=[True, -1, 1.0])\n", id="not-integers"),
        pytest.param("def g():\n    f(supported_major_versions=[*base, 12])\n", id="starred"),
        pytest.param("def g():\n    f(supported_major_versions=[])\n", id="empty"),
        pytest.param("def g():\n    f(supported_major_versions=versions)\n", id="a-name-is-no-gate"),
        pytest.param(
            "def outer():\n    class K:\n        x = f(supported_major_versions=[9])\n"
            "        def m(self):\n            return lambda: f(supported_major_versions=[10])\n",
            id="class-in-function-and-lambda",
        ),
        pytest.param("@deco(supported_major_versions=[9])\nasync def a():\n    pass\n", id="decorator-belongs-to-function"),
        pytest.param("s = 'é'\ndef g():\n    f(x='ü', supported_major_versions=[9, 10])  # é\n", id="non-ascii-offsets"),
        pytest.param("class C(Base, supported_major_versions=[9]):\n    pass\n", id="class-keyword"),
        pytest.param("def g():\n    f(supported_major_versions = [9, 10], other=[1])\n", id="spaces-around-equals"),
        pytest.param("def g():\n    f(supported_major_versions=([9, 10]))\n", id="extra-parentheses"),
        pytest.param("def g():\n    f(supported_major_versions=((9, 10)))\n", id="tuple-in-extra-parentheses"),
        pytest.param(
            "def g():\n    f(supported_major_versions=(  # why\n        [9, 10]\n    ))\n", id="parentheses-and-comment"
        ),
    ],
)
def test_find_spans_are_libcsts(source: str) -> None:
    """find reads the stdlib ast; widen edits through libcst: each gate's span is a libcst node's, and a tree the
    caller parsed gives the same gates."""
    import ast

    data = source.encode()
    found = find(data)
    assert {(g.start, g.end) for g in found} <= _libcst_spans(data)
    assert _gates(find(data, tree=ast.parse(data))) == _gates(found)


def _libcst_spans(data: bytes) -> set[tuple[int, int]]:
    import libcst as cst

    from codemods.gates.python.cst_source import parse

    parsed = parse(data)
    return {parsed.outer_span(node) for node in parsed.nodes((cst.List, cst.Tuple, cst.Set))} | {
        parsed.outer_span(arg.value) for arg in parsed.nodes(cst.Arg)
    }


@pytest.mark.parametrize(
    "source, line",
    [
        # Python's tokenizer ends a line at a lone CR, libcst and codemod's line numbers do not: offsets agree
        pytest.param("x = 1\ry = 2\ndef g():\n    f(supported_major_versions=[9])\n", 3, id="lone-carriage-return"),
        pytest.param("def g():\n    s = f'{f(supported_major_versions=[9])}'\n", 2, id="inside-an-f-string"),
        pytest.param("s = f\"\"\"{x}\n{f(supported_major_versions=[9])}\"\"\"\n", 2, id="f-string-second-line"),
    ],
)
def test_find_places_what_ast_positions_differently(source: str, line: int) -> None:
    data = source.encode()
    [gate] = find(data)
    assert (gate.text, gate.line, data[gate.start : gate.end]) == ("[9]", line, b"[9]")
    assert (gate.start, gate.end) in _libcst_spans(data)
    assert _rewrite(data, parse_archs("sm_120")) == data.replace(b"[9]", b"[9, 12]")


# ---------------------------------------------------------------- call arguments: capability lists by position


CC = {"call": "supported_compute_capability", "position": 0}
MATCH = {"call": "_match_sm_version", "position": 1}


@pytest.mark.parametrize(
    "before, after, archs, selector",
    [
        pytest.param(
            """\
            @supported_compute_capability([120])
            def _nvfp4_attention_requirement(q, k, v):
                return True
            """,
            """\
            @supported_compute_capability([120, 121])
            def _nvfp4_attention_requirement(q, k, v):
                return True
            """,
            "sm_120,sm_121",
            {**CC, "function": "_nvfp4_attention_requirement"},
            id="decorator-capabilities-0f69698c7",
        ),
        pytest.param(
            """\
            # cuBLASLt supports BF16 GEMM on SM80+.
            @supported_compute_capability([100, 103])
            def _cublaslt_mm_bf16_requirement(a, b):
                return True
            """,
            """\
            # cuBLASLt supports BF16 GEMM on SM80+.
            @supported_compute_capability([80, 86, 87, 89, 90, 100, 103, 110, 120, 121])
            def _cublaslt_mm_bf16_requirement(a, b):
                return True
            """,
            "sm_80,sm_86,sm_87,sm_89,sm_90,sm_110,sm_120,sm_121",
            {**CC, "function": "_cublaslt_mm_bf16_requirement"},
            id="several-archs-before-and-after-27e035e2a",
        ),
        pytest.param(
            """\
            def _cutlass_gemm_fp8_requirement(a, b):
                if not _match_sm_version(a.device, ["100", "103", "110"]):
                    raise ValueError("unsupported")
            """,
            """\
            def _cutlass_gemm_fp8_requirement(a, b):
                if not _match_sm_version(a.device, ["100", "103", "110", "120", "121"]):
                    raise ValueError("unsupported")
            """,
            "sm_120,sm_121",
            {**MATCH, "function": "_cutlass_gemm_fp8_requirement"},
            id="string-capabilities-90abf04e4",
        ),
        pytest.param(
            "ok = _match_sm_version(dev, ['100'])\n",
            "ok = _match_sm_version(dev, ['100', '120', '121'])\n",
            "sm_120,sm_121",
            MATCH,
            id="single-quotes-kept",
        ),
        pytest.param(
            'targets = arch_list(["sm_90a", "sm_100a"])\n',
            'targets = arch_list(["sm_90a", "sm_100a", "sm_120a"])\n',
            "sm_120",
            {"call": "arch_list", "position": 0},
            id="prefix-and-suffix",
        ),
        pytest.param(
            'targets = arch_list(("9.0a", "10.0a"))\n',
            'targets = arch_list(("9.0a", "10.0a", "12.0a", "12.1a"))\n',
            "sm_120,sm_121",
            {"call": "arch_list", "position": 0},
            id="dotted-with-suffix",
        ),
        pytest.param(
            'ok = majors_in(dev, ["9", "10"])\n',
            'ok = majors_in(dev, ["9", "10", "12"])\n',
            "sm_120,sm_121",
            {"call": "majors_in", "position": 1},
            id="majors-as-strings",
        ),
        pytest.param(
            "check(dev, archs=[90, 100])\n",
            "check(dev, archs=[90, 100, 120])\n",
            "sm_120",
            {"call": "check", "keyword": "archs"},
            id="call-and-keyword",
        ),
        pytest.param(
            "@utils.supported_compute_capability([90, 120])\ndef f():\n    pass\n",
            "@utils.supported_compute_capability([90, 100, 120])\ndef f():\n    pass\n",
            "sm_100",
            CC,
            id="attribute-callee-insert-in-the-middle",
        ),
        pytest.param(
            """\
            @supported_compute_capability(
                [
                    100,
                    103,
                ]
            )
            def f():
                pass
            """,
            """\
            @supported_compute_capability(
                [
                    100,
                    103,
                    120,
                    121,
                ]
            )
            def f():
                pass
            """,
            "sm_120,sm_121",
            CC,
            id="one-per-line",
        ),
        pytest.param(
            "@supported_compute_capability([100, 103])\ndef a():\n    pass\n\n\n@supported_compute_capability([100, 103])\ndef b():\n    pass\n",
            "@supported_compute_capability([100, 103])\ndef a():\n    pass\n\n\n@supported_compute_capability([100, 103, 120, 121])\ndef b():\n    pass\n",
            "sm_120,sm_121",
            {**CC, "function": "b"},
            id="decorator-of-the-selected-function-only",
        ),
        pytest.param(
            "ok = _match_sm_version(dev, ['100'], strict=[9])\n",
            "ok = _match_sm_version(dev, ['100', '120', '121'], strict=[9, 12])\n",
            "sm_120,sm_121",
            {"call": "_match_sm_version"},
            id="call-alone-every-list",
        ),
    ],
)
def test_widen_call_argument(before: str, after: str, archs: str, selector: dict) -> None:
    from codemods.core.arch import Arch as A

    targets = tuple(A.parse(a) for a in archs.split(","))
    source = dedent(before).encode()
    universe = tuple(dict.fromkeys(DEFAULT_ARCHS + targets))
    assert find(source, universe, **selector), "the case must have a gate"
    edits = []
    for gate in find(source, universe, **selector):
        edits += widen(source, gate, targets, universe)
    widened = apply_edits(source, edits)
    assert widened == dedent(after).encode()
    assert all(widen(widened, gate, targets, universe) == [] for gate in find(widened, universe, **selector))
    for gate in find(widened, universe, **selector):
        assert all(gate.admits.admits(t) for t in targets)


@pytest.mark.parametrize(
    "source, selector",
    [
        pytest.param("@supported_compute_capability([120, 121])\ndef f():\n    pass\n", CC, id="already-admitted"),
        pytest.param("@supported_compute_capability([80, 86, 89, 90, 100, 103, 110, 120, 121])\ndef f():\n    pass\n", CC, id="already-admitted-among-others"),
        pytest.param("@other_decorator([100])\ndef f():\n    pass\n", CC, id="other-call"),
        pytest.param("ok = _match_sm_version(dev, ['100'])\n", {"call": "_match_sm_version", "position": 0}, id="other-position"),
        pytest.param('"""@supported_compute_capability([100])"""\n# supported_compute_capability([100])\n', CC, id="docstring-and-comment"),
        pytest.param("@supported_compute_capability([100])\ndef g():\n    pass\n", {**CC, "function": "f"}, id="other-function"),
        pytest.param("ok = _match_sm_version(dev, *lists, ['100'])\n", MATCH, id="position-unknown-after-spread"),
    ],
)
def test_noop_call_argument(source: str, selector: dict) -> None:
    data = dedent(source).encode()
    assert _rewrite(data, parse_archs("sm_120,sm_121"), **selector) == data


@pytest.mark.parametrize(
    "source, selector, reason",
    [
        pytest.param("@supported_compute_capability(_ALL_CCS)\ndef f():\n    pass\n", CC, "is not a list literal", id="a-name"),
        pytest.param("@supported_compute_capability([cc for cc in CCS])\ndef f():\n    pass\n", CC, "is not a list literal", id="comprehension"),
        pytest.param("ok = _match_sm_version(dev, [*BASE, '100'])\n", MATCH, "not a list of integer literals or arch strings", id="spread-inside"),
        pytest.param("ok = _match_sm_version(dev, ['90', '90a'])\n", MATCH, "mixes suffixes", id="mixed-suffixes"),
        pytest.param("@supported_compute_capability([9, 100])\ndef f():\n    pass\n", CC, "not a list of integer literals or arch strings", id="majors-and-capabilities"),
        pytest.param("@supported_compute_capability([])\ndef f():\n    pass\n", CC, "is empty", id="empty-has-no-style"),
        pytest.param("ok = _match_sm_version(dev, ['1' '00'])\n", MATCH, "not a list of integer literals or arch strings", id="concatenated-string"),
        pytest.param("ok = _match_sm_version(dev, ['sm_100', '120'])\n", MATCH, "not a list of integer literals or arch strings", id="two-spellings"),
    ],
)
def test_call_argument_refused_with_reason(source: str, selector: dict, reason: str) -> None:
    data = source.encode()
    [gate] = find(data, **selector)
    assert gate.line >= 1
    with pytest.raises(CannotWiden, match=reason) as caught:
        widen(data, gate, parse_archs("sm_120,sm_121"))
    assert str(caught.value).startswith(f"line {gate.line}: ")


def test_call_gate_detail_and_admits() -> None:
    source = b"def f(a):\n    return _match_sm_version(a.device, ['100', '103'])\n"
    [gate] = find(source, **MATCH)
    assert (gate.line, gate.context, gate.text) == (2, "f", "['100', '103']")
    assert gate.admits.names() == ["sm_100", "sm_103"]
    assert gate.detail == {"keyword": None, "majors": None, "call": "_match_sm_version", "position": 1, "style": "strings"}
    assert python_arch_list.admits("['100', '103']").names() == ["sm_100", "sm_103"]
    assert python_arch_list.admits("[120, 121]").names() == ["sm_120", "sm_121"]
    assert python_arch_list.admits('["12.0a"]').names() == ["sm_120"]


def test_known_calls_are_what_scan_lists() -> None:
    source = dedent(
        """\
        @supported_compute_capability([100, 103])
        def req(a):
            return _match_sm_version(a.device, ["120"]) and flags(supported_major_versions=[10])
        """
    ).encode()
    assert [(g.text, g.detail.get("call")) for g in python_arch_list.find_known(source)] == [
        ("[100, 103]", "supported_compute_capability"),
        ('["120"]', "_match_sm_version"),
        ("[10]", None),
    ]


_CAPABILITIES = [a for a in DEFAULT_ARCHS + (Arch(8, 7), Arch(10, 7))]


@given(
    listed=st.lists(st.sampled_from(_CAPABILITIES), max_size=5, unique=True).map(sorted),
    targets=st.lists(st.sampled_from(_CAPABILITIES), min_size=1, max_size=4),
    spelling=st.sampled_from(["int", "string", "sm", "dotted-a"]),
)
def test_widened_capability_list_admits_old_set_plus_targets(listed, targets, spelling) -> None:
    universe = tuple(dict.fromkeys(DEFAULT_ARCHS + tuple(_CAPABILITIES)))
    if not listed:
        listed = [Arch(10, 0)]
    spell = {
        "int": lambda a: str(a.code),
        "string": lambda a: f'"{a.code}"',
        "sm": lambda a: f'"sm_{a.code}"',
        "dotted-a": lambda a: f'"{a.major}.{a.minor}a"',
    }[spelling]
    source = f"@supported_compute_capability([{', '.join(spell(a) for a in listed)}])\ndef f():\n    pass\n".encode()
    [gate] = find(source, universe, **CC)
    widened = apply_edits(source, widen(source, gate, tuple(targets), universe))
    [after] = find(widened, universe, **CC)
    assert after.admits.admitted == gate.admits.admitted | {a for a in universe if a.plain in {t.plain for t in targets}}
    assert after.admits.admitted == {a for a in universe if a.plain in set(listed) | {t.plain for t in targets}}
    assert widen(widened, after, tuple(targets), universe) == []
    values = [int(x) for x in re.findall(r"\d+", after.text.replace(".", ""))]
    assert values == sorted(values), "entries stay in ascending order"


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("@supported_compute_capability([100, 103])\ndef f():\n    pass\n", id="decorator"),
        pytest.param("@fi.supported_compute_capability(\n    [100,  # b\n     103]\n)\nasync def f():\n    pass\n", id="attribute-multiline"),
        pytest.param("def f(a):\n    return _match_sm_version(a.device, ['100', \"103\"])\n", id="strings"),
        pytest.param("def f(a):\n    return _match_sm_version((a.device), (['100']))\n", id="parenthesized-arguments"),
        pytest.param("def f(a):\n    return _match_sm_version(a.device, CCS)\n", id="a-name-at-the-position"),
        pytest.param("def f(a):\n    return _match_sm_version(a.device, ['1' '00', 'x'])\n", id="concatenated"),
        pytest.param("def f(a):\n    return _match_sm_version(*args, ['100'])\n", id="after-a-spread"),
        pytest.param("@supported_compute_capability(CCS + [120])\ndef f():\n    pass\n", id="computed"),
        pytest.param("x = _match_sm_version(d, ['100'], extra=[1]) + f(supported_major_versions=(9,))\n", id="mixed-with-keyword"),
        pytest.param("def f(a):\n    return _match_sm_version(a.device, [(100), 0x64])\n", id="parenthesized-and-hex-entries"),
    ],
)
def test_find_known_spans_are_libcsts(source: str) -> None:
    import ast

    data = source.encode()
    found = python_arch_list.find_known(data)
    assert {(g.start, g.end) for g in found} <= _libcst_spans(data)
    assert _gates(python_arch_list.find_known(data, tree=ast.parse(data))) == _gates(found)


# ---------------------------------------------------------------- `assigns`, and a name standing for a module-level list


PARTIAL = {"call": "partial", "keyword": "device_capability_majors"}


@pytest.mark.parametrize(
    "before, after, archs, selector",
    [
        pytest.param(
            """\
            is_sm100_supported = lru_cache(maxsize=1)(
                partial(_check_device, device_capability_majors=[10], cuda_version=(12, 8))
            )
            is_blackwell_supported = is_blackwell = lru_cache(maxsize=1)(
                partial(
                    _check_device,
                    device_capability_majors=[10, 12],
                    cuda_version=(12, 8),
                )
            )
            """,
            """\
            is_sm100_supported = lru_cache(maxsize=1)(
                partial(_check_device, device_capability_majors=[10], cuda_version=(12, 8))
            )
            is_blackwell_supported = is_blackwell = lru_cache(maxsize=1)(
                partial(
                    _check_device,
                    device_capability_majors=[10, 11, 12],
                    cuda_version=(12, 8),
                )
            )
            """,
            "sm_110",
            {**PARTIAL, "assigns": "is_blackwell_supported"},
            id="assigns-one-module-level-partial-sglang-0.5.9",
        ),
        pytest.param(
            "is_hopper = is_h100 = partial(_check_device, device_capability_majors=[9])\n"
            "is_ada = partial(_check_device, device_capability_majors=[8])\n",
            "is_hopper = is_h100 = partial(_check_device, device_capability_majors=[9, 12])\n"
            "is_ada = partial(_check_device, device_capability_majors=[8])\n",
            "sm_120",
            {**PARTIAL, "assigns": "is_h100"},
            id="assigns-any-name-of-a-chained-assignment",
        ),
        pytest.param(
            """\
            def _pick_gemm_backend(suitable, a, b, backend):
                sm_ok = _match_sm_version(a.device, ["100", "103", "110"])
                sm12x_ok = _match_sm_version(a.device, ["120", "121"])
                return sm_ok or sm12x_ok
            """,
            """\
            def _pick_gemm_backend(suitable, a, b, backend):
                sm_ok = _match_sm_version(a.device, ["100", "103", "107", "110"])
                sm12x_ok = _match_sm_version(a.device, ["120", "121"])
                return sm_ok or sm12x_ok
            """,
            "sm_107",
            {**MATCH, "function": "_pick_gemm_backend", "assigns": "sm_ok"},
            id="assigns-one-call-among-several-290c09186",
        ),
        pytest.param(
            """\
            class Runner:
                def __init__(self, dev):
                    self.fp8_ok = _match_sm_version(dev, ["89", "90"])
                    self.fp4_ok: bool = _match_sm_version(dev, ["100"])
            """,
            """\
            class Runner:
                def __init__(self, dev):
                    self.fp8_ok = _match_sm_version(dev, ["89", "90"])
                    self.fp4_ok: bool = _match_sm_version(dev, ["100", "120"])
            """,
            "sm_120",
            {**MATCH, "assigns": "self.fp4_ok"},
            id="assigns-dotted-annotated-target",
        ),
        pytest.param(
            """\
            def _check(a):
                if not (fp8_ok := _match_sm_version(a.device, ["90"])) and not _match_sm_version(a.device, ["89"]):
                    raise ValueError("unsupported")
            """,
            """\
            def _check(a):
                if not (fp8_ok := _match_sm_version(a.device, ["90", "120"])) and not _match_sm_version(a.device, ["89"]):
                    raise ValueError("unsupported")
            """,
            "sm_120",
            {**MATCH, "assigns": "fp8_ok"},
            id="assigns-walrus-target",
        ),
        pytest.param(
            """\
            # portable across every tensor-core arch
            _TOPK_CCS = [80, 86, 89, 90, 100, 103, 110, 120, 121]


            @supported_compute_capability(_TOPK_CCS)
            def _check_topk_supported(scores):
                return True
            """,
            """\
            # portable across every tensor-core arch
            _TOPK_CCS = [80, 86, 89, 90, 100, 103, 107, 110, 120, 121]


            @supported_compute_capability(_TOPK_CCS)
            def _check_topk_supported(scores):
                return True
            """,
            "sm_107",
            {**CC, "function": "_check_topk_supported"},
            id="named-module-level-list-290c09186",
        ),
        pytest.param(
            """\
            _SM_VERSIONS: tuple[str, ...] = (
                "100",
                "103",
            )


            def _fp4_requirement(a):
                return _match_sm_version(a.device, _SM_VERSIONS)
            """,
            """\
            _SM_VERSIONS: tuple[str, ...] = (
                "100",
                "103",
                "120",
                "121",
            )


            def _fp4_requirement(a):
                return _match_sm_version(a.device, _SM_VERSIONS)
            """,
            "sm_120,sm_121",
            MATCH,
            id="named-annotated-tuple-one-per-line",
        ),
        pytest.param(
            "_CCS = (  # SM100 family\n    [100, 103]\n)\n\n\n@supported_compute_capability(_CCS)\ndef a():\n    pass\n\n\n"
            "@supported_compute_capability(_CCS)\ndef b():\n    pass\n",
            "_CCS = (  # SM100 family\n    [100, 103, 110]\n)\n\n\n@supported_compute_capability(_CCS)\ndef a():\n    pass\n\n\n"
            "@supported_compute_capability(_CCS)\ndef b():\n    pass\n",
            "sm_110",
            CC,
            id="named-by-two-decorators-widened-once",
        ),
        pytest.param(
            # FlashInfer 0.7.x spec modules: `supported_major_versions=_SUPPORTED_MAJOR_VERSIONS`, named once
            "_MAJORS = [10, 11]\n\n\ndef gen_m():\n    return gen_jit_spec(\"m\", [], supported_major_versions=_MAJORS)\n",
            "_MAJORS = [10, 11, 12]\n\n\ndef gen_m():\n    return gen_jit_spec(\"m\", [], supported_major_versions=_MAJORS)\n",
            "sm_120",
            {"function": "gen_m"},
            id="default-keyword-follows-a-name",
        ),
        pytest.param(
            # FlashInfer 0.7.4's cake_sampling.py: a copy of a module-level tuple that the file also reads elsewhere
            "SUPPORTED: tuple[int, ...] = (9, 10, 11)\n\n\ndef gen_m():\n    ok = 9 in SUPPORTED\n"
            "    return gen_jit_spec(\"m\", [], supported_major_versions=list(SUPPORTED))\n",
            "SUPPORTED: tuple[int, ...] = (9, 10, 11, 12)\n\n\ndef gen_m():\n    ok = 9 in SUPPORTED\n"
            "    return gen_jit_spec(\"m\", [], supported_major_versions=list(SUPPORTED))\n",
            "sm_120",
            {"function": "gen_m"},
            id="default-keyword-follows-a-copy-of-a-name",
        ),
    ],
)
def test_widen_assigned_or_named(before: str, after: str, archs: str, selector: dict) -> None:
    targets = tuple(Arch.parse(a) for a in archs.split(","))
    source = dedent(before).encode()
    universe = tuple(dict.fromkeys(DEFAULT_ARCHS + targets))
    found = find(source, universe, **selector)
    assert found, "the case must have a gate"
    edits = [edit for gate in found for edit in widen(source, gate, targets, universe)]
    widened = apply_edits(source, edits)
    assert widened == dedent(after).encode()
    again = find(widened, universe, **selector)
    assert [(g.start, g.line) for g in again] == [(g.start, g.line) for g in found]
    assert all(widen(widened, gate, targets, universe) == [] for gate in again)
    assert all(gate.admits.admits(t) for gate in again for t in targets)


@pytest.mark.parametrize(
    "source, selector",
    [
        pytest.param(
            "def pick(a):\n    sm_ok = _match_sm_version(a.device, ['100'])\n    sm12x_ok = _match_sm_version(a.device, ['120', '121'])\n",
            {**MATCH, "assigns": "sm12x_ok"},
            id="assigns-picks-the-list-that-already-admits",
        ),
        pytest.param(
            "def pick(a):\n    if _match_sm_version(a.device, ['100']):\n        sm_ok = True\n",
            {**MATCH, "assigns": "sm_ok"},
            id="assigns-only-the-value-assigned-not-an-if-around-it",
        ),
        pytest.param(
            "def pick(a):\n    sm_ok, other = _match_sm_version(a.device, ['100']), 1\n",
            {**MATCH, "assigns": "sm_ok"},
            id="assigns-not-an-unpacking-target",
        ),
        pytest.param(
            "is_sm100 = partial(_check_device, device_capability_majors=[10])\n",
            {**PARTIAL, "assigns": "is_blackwell_supported"},
            id="assigns-names-no-target-of-the-file",
        ),
        pytest.param(
            "_CCS = [100, 120, 121]\n\n\n@supported_compute_capability(_CCS)\ndef f():\n    pass\n",
            CC,
            id="named-list-already-admits",
        ),
        pytest.param(
            "_CCS = [100]\n\n\n@supported_compute_capability(_CCS)\ndef f():\n    pass\n",
            {**CC, "function": "g"},
            id="named-list-of-another-function",
        ),
        pytest.param(
            "def f():\n    return flags(supported_major_versions=None)\n",
            {},
            id="keyword-given-none-restricts-nothing",
        ),
    ],
)
def test_noop_assigned_or_named(source: str, selector: dict) -> None:
    data = source.encode()
    assert _rewrite(data, parse_archs("sm_120,sm_121"), **selector) == data


def test_keyword_given_a_computed_value_is_refused_with_reason() -> None:
    """Not "not found": the keyword is there, and its value is no list codemod can read."""
    data = b"def gen_m():\n    return gen_jit_spec(\"m\", [],\n        supported_major_versions=MAJORS + [12])\n"
    [gate] = find(data, function="gen_m")
    assert (gate.line, gate.text) == (3, "MAJORS + [12]") and gate.admits.unknown == frozenset(DEFAULT_ARCHS)
    with pytest.raises(CannotWiden) as caught:
        widen(data, gate, parse_archs("sm_120"))
    assert str(caught.value) == "line 3: MAJORS + [12] is not a list literal (a name or a computed value); widen it by hand"


@pytest.mark.parametrize(
    "source, reason",
    [
        pytest.param(
            "_CCS = [100]\nif _HAS_SM103:\n    _CCS = [100, 103]\n\n\n@supported_compute_capability(_CCS)\ndef f():\n    pass\n",
            "it is bound more than once in this file (lines 1, 3)",
            id="bound-twice",
        ),
        pytest.param(
            "_CCS = [100]\n_CCS += [103]\n\n\n@supported_compute_capability(_CCS)\ndef f():\n    pass\n",
            "it is bound more than once in this file (lines 1, 2)",
            id="augmented",
        ),
        pytest.param(
            "@supported_compute_capability(_CCS)\ndef f():\n    pass\n\n\ndef setup():\n    global _CCS\n    _CCS = [100]\n",
            "it is bound at line 8 other than by `_CCS = [...]` at module level",
            id="assigned-only-in-a-function",
        ),
        pytest.param(
            "def f(a, ccs):\n    return _match_sm_version(a.device, ccs)\n",
            "it is bound at line 1 other than by `ccs = [...]` at module level",
            id="a-parameter",
        ),
        pytest.param(
            "from .archs import _CCS\n\n\n@supported_compute_capability(_CCS)\ndef f():\n    pass\n",
            "it is bound at line 1 other than by `_CCS = [...]` at module level",
            id="imported",
        ),
        pytest.param(
            "_CCS, _OLD = [100], [90]\n\n\n@supported_compute_capability(_CCS)\ndef f():\n    pass\n",
            "it is bound at line 1 other than by `_CCS = [...]` at module level",
            id="unpacked",
        ),
        pytest.param(
            "_CCS = _BASE_CCS + [120]\n\n\n@supported_compute_capability(_CCS)\ndef f():\n    pass\n",
            "it is assigned a computed value at line 1",
            id="computed",
        ),
        pytest.param(
            "_CCS = [100]\n_CCS.append(103)\n\n\n@supported_compute_capability(_CCS)\ndef f():\n    pass\n",
            "it is changed after its assignment (line 2)",
            id="appended-to",
        ),
        pytest.param(
            "_CCS = [100]\n\n\ndef extend():\n    _CCS[0] = 103\n\n\n@supported_compute_capability(_CCS)\ndef f():\n    pass\n",
            "it is changed after its assignment (line 5)",
            id="item-assigned",
        ),
        pytest.param(
            "_CCS = [100]\nfrom .overrides import *\n\n\n@supported_compute_capability(_CCS)\ndef f():\n    pass\n",
            "`from ... import *` at line 2 may rebind it",
            id="star-import-after",
        ),
    ],
)
def test_named_list_refused_with_reason(source: str, reason: str) -> None:
    data = source.encode()
    call = {"call": "_match_sm_version", "position": 1} if "_match_sm_version" in source else CC
    [gate] = find(data, **call)
    named_at = next(i for i, line in enumerate(source.splitlines(), 1) if "(_CCS)" in line or "device, ccs)" in line)
    assert gate.line == named_at and gate.admits.unknown == frozenset(DEFAULT_ARCHS)
    with pytest.raises(CannotWiden) as caught:
        widen(data, gate, parse_archs("sm_120"))
    assert str(caught.value) == f"line {gate.line}: {gate.text} is not a list literal, and {reason}; widen it by hand"


def test_named_gate_is_the_literal_with_where_it_is_named() -> None:
    source = b"_CCS = [100, 103]\n\n\n@supported_compute_capability(_CCS)\ndef _req(a):\n    return True\n"
    [gate] = find(source, **CC, function="_req")
    assert (gate.line, gate.context, gate.text, source[gate.start : gate.end]) == (1, "_req", "[100, 103]", b"[100, 103]")
    assert gate.detail == {
        "keyword": None, "name": "_CCS", "named_at": 4, "majors": None,
        "call": "supported_compute_capability", "position": 0, "style": "capabilities",
    }
    assert gate.admits.names() == ["sm_100", "sm_103"]
    # scan lists the same gate
    assert [(g.line, g.text) for g in python_arch_list.find_known(source)] == [(1, "[100, 103]")]


@given(
    listed=st.lists(st.sampled_from(_CAPABILITIES), min_size=1, max_size=5, unique=True).map(sorted),
    targets=st.lists(st.sampled_from(_CAPABILITIES), min_size=1, max_size=3),
)
def test_a_named_list_widens_as_the_same_list_written_in_the_call(listed, targets) -> None:
    universe = tuple(dict.fromkeys(DEFAULT_ARCHS + tuple(_CAPABILITIES)))
    literal = "[" + ", ".join(str(a.code) for a in listed) + "]"
    inline = f"@supported_compute_capability({literal})\ndef f():\n    pass\n".encode()
    named = f"_CCS = {literal}\n\n\n@supported_compute_capability(_CCS)\ndef f():\n    pass\n".encode()

    def widened(source: bytes) -> bytes:
        [gate] = find(source, universe, **CC)
        return apply_edits(source, widen(source, gate, tuple(targets), universe))

    [inline_gate], [named_gate] = find(inline, universe, **CC), find(named, universe, **CC)
    assert named_gate.admits == inline_gate.admits
    after_inline = widened(inline)
    new_literal = after_inline[after_inline.index(b"(") + 1 : after_inline.index(b")")]
    assert widened(named) == named.replace(literal.encode(), new_literal, 1)


def test_a_statement_pythons_parser_rejects_is_left_out_when_it_holds_no_list() -> None:
    # libcst reads `[*a for a in b]`, Python's parser does not: the other statements are read alone
    source = b"X = [*a for a in b]\n\n\n@register(supported_major_versions=[10])\ndef gen_m():\n    pass\n"
    [gate] = find(source)
    assert (gate.line, gate.text, gate.context) == (4, "[10]", "gen_m")
    assert (gate.start, gate.end) in _libcst_spans(source)
    assert _rewrite(source, parse_archs("sm_120")) == source.replace(b"[10]", b"[10, 12]")
    with pytest.raises(SourceError, match="^not valid Python: line 1: iterable unpacking"):
        find(b"X = [*a for a in b]; flags(supported_major_versions=[10])\n")
    named = b"_CCS = [*a for a in [[100]]]\n\n\n@supported_compute_capability(_CCS)\ndef f():\n    pass\n"
    [gate] = find(named, **CC)
    with pytest.raises(CannotWiden, match="line 1, which Python's parser rejects, may bind it"):
        widen(named, gate, parse_archs("sm_120"))


# ---------------------------------------------------------------- (major, minor) pairs: the literal assigned to `assigns`


RESOLVER = {"function": "_BlockSparseResolver", "assigns": "supported_capabilities"}


@pytest.mark.parametrize(
    "before, after, archs, selector",
    [
        pytest.param(
            """\
            class _BlockSparseResolver(_CudaResolver):
                backend = Backend.BLOCK_SPARSE

                # Hopper and Blackwell datacenter only
                supported_capabilities = {(9, 0), (10, 0)}

                @classmethod
                def resolve(cls, platform) -> str:
                    cap = platform.get_device_capability()
                    if (cap.major, cap.minor) not in cls.supported_capabilities:
                        raise ValueError("unsupported")


            class _WindowResolver(_CudaResolver):
                supported_capabilities = {(9, 0), (10, 0)}
            """,
            """\
            class _BlockSparseResolver(_CudaResolver):
                backend = Backend.BLOCK_SPARSE

                # Hopper and Blackwell datacenter only
                supported_capabilities = {(9, 0), (10, 0), (12, 0)}

                @classmethod
                def resolve(cls, platform) -> str:
                    cap = platform.get_device_capability()
                    if (cap.major, cap.minor) not in cls.supported_capabilities:
                        raise ValueError("unsupported")


            class _WindowResolver(_CudaResolver):
                supported_capabilities = {(9, 0), (10, 0)}
            """,
            "sm_120",
            RESOLVER,
            id="class-attribute-set-sglang-0.5.20",
        ),
        pytest.param(
            """\
            class _BlockSparseResolver(_CudaResolver):
                supported_capabilities = {
                    (8, 0),
                    (9, 0),
                    (10, 3),
                }
            """,
            """\
            class _BlockSparseResolver(_CudaResolver):
                supported_capabilities = {
                    (8, 0),
                    (9, 0),
                    (10, 0),
                    (10, 3),
                    (12, 0),
                    (12, 1),
                }
            """,
            "sm_100,sm_120,sm_121",
            RESOLVER,
            id="one-pair-a-line-in-order",
        ),
        pytest.param(
            "_IHC_CAPABILITIES: tuple[tuple[int, int], ...] = ((9,0), (10,0))\n",
            "_IHC_CAPABILITIES: tuple[tuple[int, int], ...] = ((9,0), (10,0), (12,1))\n",
            "sm_121",
            {"assigns": "_IHC_CAPABILITIES"},
            id="module-level-annotated-tuple-keeps-its-spacing",
        ),
        pytest.param(
            "class R:\n    def __init__(self):\n        self.ok = [(9, 0)]\n",
            "class R:\n    def __init__(self):\n        self.ok = [(9, 0), (11, 0)]\n",
            "sm_110",
            {"assigns": "self.ok"},
            id="dotted-target-list",
        ),
        pytest.param(
            "SM_MAJORS = ALSO = [9, 10]\n",
            "SM_MAJORS = ALSO = [9, 10, 12]\n",
            "sm_120",
            {"assigns": "SM_MAJORS"},
            id="assigned-majors-chained",
        ),
    ],
)
def test_widen_assigned_literal(before: str, after: str, archs: str, selector: dict) -> None:
    test_widen_assigned_or_named(before, after, archs, selector)


@pytest.mark.parametrize(
    "source, selector",
    [
        pytest.param("class _BlockSparseResolver:\n    supported_capabilities = {(9, 0), (12, 0), (12, 1)}\n", RESOLVER, id="already-admits"),
        pytest.param("class _Other:\n    supported_capabilities = {(9, 0)}\n", RESOLVER, id="another-class"),
        pytest.param("class _BlockSparseResolver:\n    other = {(9, 0)}\n", RESOLVER, id="another-attribute"),
        pytest.param(
            "class _BlockSparseResolver:\n    def m(self):\n        if cap in {(9, 0)}:\n            pass\n", RESOLVER, id="not-assigned"
        ),
        pytest.param("supported_capabilities = {(9, 0)}\n", {"assigns": "supported_capabilities", "keyword": "archs"}, id="keyword-selects-call-lists"),
    ],
)
def test_noop_assigned_literal(source: str, selector: dict) -> None:
    data = source.encode()
    assert _rewrite(data, parse_archs("sm_120,sm_121"), **selector) == data


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("supported_capabilities = {(9, 0), (64, 8)}\n", id="not-a-capability"),
        pytest.param("supported_capabilities = {(9, 0), 100}\n", id="mixed-styles"),
        pytest.param("supported_capabilities = {(9, 0), (10, 0, 1)}\n", id="a-triple"),
        pytest.param("supported_capabilities = {(9,  # hopper\n    0)}\n", id="comment-in-a-pair"),
        pytest.param("supported_capabilities = {(9, 0), (MAJOR, 0)}\n", id="a-name-in-a-pair"),
    ],
)
def test_assigned_literal_not_in_one_style_is_refused(source: str) -> None:
    [gate] = find(source.encode(), assigns="supported_capabilities")
    assert gate.admits.unknown == frozenset(DEFAULT_ARCHS)
    with pytest.raises(CannotWiden, match="not a list of integer literals or arch strings in one style"):
        widen(source.encode(), gate, parse_archs("sm_120"))


def test_scan_lists_pairs_assigned_to_a_capability_name() -> None:
    import ast

    source = dedent(
        """\
        _HPC_CAPABILITIES = ((9, 0), (10, 0), (10, 3))
        _CONV_KERNEL_SIZES = ((3, 3), (3, 3))
        SUPPORTED_CAPABILITIES = [90, 100]


        class _Resolver:
            supported_capabilities = {(9, 0), (10, 0)}

            def resolve(self):
                self.capabilities = [(8, 0)]
                shapes = {(1, 2)}
        """
    ).encode()
    found = python_arch_list.find_known(source)
    assert [(g.line, g.text, g.context, g.detail["assigns"], g.detail["style"]) for g in found] == [
        (1, "((9, 0), (10, 0), (10, 3))", "", "_HPC_CAPABILITIES", "pairs"),
        (7, "{(9, 0), (10, 0)}", "_Resolver", "supported_capabilities", "pairs"),
        (10, "[(8, 0)]", "resolve", "self.capabilities", "pairs"),
    ]
    assert sorted(a.name for a in found[0].admits.admitted) == ["sm_100", "sm_103", "sm_90"]
    assert {(g.start, g.end) for g in found} <= _libcst_spans(source)
    assert _gates(python_arch_list.find_known(source, tree=ast.parse(source))) == _gates(found)


_PAIRS = [a for a in DEFAULT_ARCHS + (Arch(8, 7), Arch(10, 7))]


@given(
    listed=st.lists(st.sampled_from(_PAIRS), min_size=1, max_size=5, unique=True).map(sorted),
    targets=st.lists(st.sampled_from(_PAIRS), min_size=1, max_size=4),
    container=st.sampled_from(["{}", "[]", "()"]),
)
def test_widened_pairs_admit_old_set_plus_targets(listed, targets, container) -> None:
    universe = tuple(dict.fromkeys(DEFAULT_ARCHS + tuple(_PAIRS)))
    pairs = ", ".join(f"({a.major}, {a.minor})" for a in listed) + ("," if container == "()" and len(listed) == 1 else "")
    source = f"class R:\n    supported_capabilities = {container[0]}{pairs}{container[1]}\n".encode()
    [gate] = find(source, universe, assigns="supported_capabilities")
    widened = apply_edits(source, widen(source, gate, tuple(targets), universe))
    [after] = find(widened, universe, assigns="supported_capabilities")
    assert after.admits.admitted == {a for a in universe if a.plain in set(listed) | {t.plain for t in targets}}
    assert widen(widened, after, tuple(targets), universe) == []
    values = [tuple(map(int, pair)) for pair in re.findall(r"\((\d+), (\d+)\)", after.text)]
    assert values == sorted(values), "pairs stay in ascending order"


# ---------------------------------------------------------------- an assignment that outgrows the line, split as black splits it
# Each `after` is what black (and `ruff format`) write for the widened line; FlashInfer 0.7.2's cutile_backend.py
# for the first. Black drops the invisible parentheses around a value that is one call or display and splits at
# its brackets: a call keeps its argument on one line when it fits, a display goes one item a line.
@pytest.mark.parametrize(
    "before, after, archs, selector",
    [
        pytest.param(
            "_CUTILE_SUPPORTED_COMPUTE_CAPABILITIES = frozenset({(10, 0), (10, 3), (12, 0), (12, 1)})\n",
            "_CUTILE_SUPPORTED_COMPUTE_CAPABILITIES = frozenset(\n    {(10, 0), (10, 3), (10, 7), (12, 0), (12, 1)}\n)\n",
            "sm_107", {"call": "frozenset", "position": 0, "assigns": "_CUTILE_SUPPORTED_COMPUTE_CAPABILITIES"},
            id="call-argument-on-its-own-line",
        ),
        pytest.param(
            "class B:\n    def f(self):\n        supported_for_this_longer_feature_xx = [(9, 0), (10, 0), (10, 3), (12, 0)]\n",
            "class B:\n    def f(self):\n        supported_for_this_longer_feature_xx = [\n            (9, 0),\n            (10, 0),\n"
            "            (10, 3),\n            (11, 0),\n            (12, 0),\n        ]\n",
            "sm_110", {"assigns": "supported_for_this_longer_feature_xx"},
            id="display-one-item-a-line",
        ),
        pytest.param(
            'FMHA_ARCHS_OF_THE_DSL_BACKEND: tuple[str, ...] = ("sm_100a", "sm_103a", "sm_110a")\n',
            'FMHA_ARCHS_OF_THE_DSL_BACKEND: tuple[str, ...] = (\n    "sm_100a",\n    "sm_103a",\n    "sm_110a",\n'
            '    "sm_120a",\n)\n',
            "sm_120", {"assigns": "FMHA_ARCHS_OF_THE_DSL_BACKEND"},
            id="annotated-tuple",
        ),
    ],
)
def test_widened_assignment_is_split_as_black_splits_it(before: str, after: str, archs: str, selector: dict) -> None:
    widened = _rewrite(before.encode(), parse_archs(archs), **selector)
    assert widened.decode() == after
    assert _rewrite(widened, parse_archs(archs), **selector) == widened  # read again: admitted, no edit


@pytest.mark.parametrize(
    "before, archs, selector",
    [
        pytest.param(  # fits: one line, as before
            "SUPPORTED = frozenset({(10, 0), (12, 0)})\n", "sm_103", {"call": "frozenset", "position": 0, "assigns": "SUPPORTED"},
            id="fits",
        ),
        pytest.param(  # a comment on the line: black would move it; left for a human
            "SUPPORTED_FOR_THE_LONG_FEATURE = frozenset({(10, 0), (10, 3), (12, 0), (12, 1)})  # SM10x, SM12x\n",
            "sm_107", {"call": "frozenset", "position": 0, "assigns": "SUPPORTED_FOR_THE_LONG_FEATURE"},
            id="comment",
        ),
        pytest.param(  # an operator in the value: black puts it in parentheses, another split
            "SUPPORTED_FOR_THE_LONG_FEATURE_X = BASE | frozenset({(10, 0), (10, 3), (12, 0), (12, 1)})\n",
            "sm_107", {"call": "frozenset", "position": 0, "assigns": "SUPPORTED_FOR_THE_LONG_FEATURE_X"},
            id="operator",
        ),
        pytest.param(  # the one argument still too long: black splits it again inside; left on one line
            "SUPPORTED_X = set([(10, 0), (10, 3), (12, 0), (8, 0), (8, 6), (8, 9), (9, 0), (7, 5)])\n",
            "sm_107,sm_110,sm_121,sm_87", {"call": "set", "position": 0, "assigns": "SUPPORTED_X"},
            id="nested-split",
        ),
    ],
)
def test_widened_assignment_left_on_one_line(before: str, archs: str, selector: dict) -> None:
    widened = _rewrite(before.encode(), parse_archs(archs), **selector).decode()
    assert widened != before and widened.count("\n") == before.count("\n")


@settings(deadline=None, max_examples=25)
@given(
    name=st.text(alphabet="ABCDEFGHIJ_", min_size=20, max_size=45).map(lambda s: "X" + s),
    call=st.sampled_from(["", "frozenset", "set", "tuple"]),
    display=st.sampled_from(["[]", "()", "{}"]),
    count=st.integers(min_value=1, max_value=7),
    depth=st.integers(min_value=0, max_value=2),
)
def test_widened_assignment_is_what_ruff_format_writes(name: str, call: str, display: str, count: int, depth: int) -> None:
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff (the test extra) is not installed")
    if display == "()" and count == 1:
        count = 2  # `((9, 0))` is no tuple
    items = ", ".join(f"({major}, 0)" for major in range(1, count + 1))
    value = f"{display[0]}{items}{display[1]}"
    value = f"{call}({value})" if call else value
    indent_ = "    " * depth
    line = f"{indent_}{name} = {value}"
    assume(len(line) <= 88)  # black wrote the file: the line fits before widening
    body = "".join(f"{'    ' * d}if True:\n" for d in range(depth)) + line + "\n"
    selector = {"call": call, "position": 0, "assigns": name} if call else {"assigns": name}
    widened = _rewrite(body.encode(), parse_archs("sm_120"), **selector)
    assert b"(12, 0)" in widened
    formatted = subprocess.run([sys.executable, "-m", "ruff", "format", "--isolated", "-"], input=widened, capture_output=True, check=True).stdout
    assert widened.decode() == formatted.decode()
