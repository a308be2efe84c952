from contextlib import suppress
from textwrap import dedent

import pytest

from conftest import crlf, rewrite
from hypothesis import given
from hypothesis import strategies as st

from codemods.arch import DEFAULT_ARCHS, Arch, parse_archs
from codemods.gates import CannotWiden, SourceError, apply_edits
from codemods.gates import python_arch_list
from codemods.gates.python_arch_list import KIND, find, widen


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
    assert gate.detail == {"keyword": "supported_major_versions", "majors": [9, 10]}


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
    from codemods.arch import DEFAULT_ARCHS
    from codemods.gates.python_arch_list import admits

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
def test_find_in_tree_agrees_with_find(source: str) -> None:
    import ast

    data = source.encode()
    fast = python_arch_list.find_in_tree(data, ast.parse(data))
    assert fast is not None
    assert _gates(fast) == _gates(find(data))


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("x = 1\ry = 2\ndef g():\n    f(supported_major_versions=[9])\n", id="lone-carriage-return"),
        pytest.param("def g():\n    s = f'{f(supported_major_versions=[9, 10])}'\n", id="inside-an-f-string"),
    ],
)
def test_find_in_tree_declines_what_it_cannot_vouch_for(source: str) -> None:
    import ast

    data = source.encode()
    assert python_arch_list.find_in_tree(data, ast.parse(data)) is None
    assert len(find(data)) == 1
