"""lexer: file kinds, directive-line tokens, logical lines, comment and macro masking, includes."""

from __future__ import annotations

import pytest

from codemods.cpp.lexer import (
    C_SUFFIXES,
    continues,
    includes,
    language,
    logical_end,
    mask_comments,
    mask_macros,
    one_line,
    scan_line,
    starts_logical_line,
)


@pytest.mark.parametrize(
    "path, expected",
    [
        pytest.param("csrc/a.cu", "cuda", id="cu"),
        pytest.param("include/a.cuh", "cuda", id="cuh"),
        pytest.param("include/a.h", "cpp", id="header-is-cpp"),
        pytest.param("csrc/a.cpp", "cpp", id="cpp"),
        pytest.param("csrc/a.cu.jinja", "cpp", id="template-is-cpp"),
    ],
)
def test_language_of_a_path(path, expected):
    assert language(path) == expected


def test_every_cuda_suffix_is_a_c_suffix():
    assert {".cu", ".cuh"} <= set(C_SUFFIXES)


@pytest.mark.parametrize(
    "source, expected",
    [
        pytest.param(b"#if A\nx\n", 6, id="one-line"),
        pytest.param(b"#if A \\\n  && B\nx\n", 15, id="continued"),
        pytest.param(b"#if A \\\r\n  && B\r\nx\n", 17, id="continued-crlf"),
        pytest.param(b"#if A /* a\n b */ && B\nx\n", 22, id="block-comment-spans-lines"),
        pytest.param(b"#if A // c \\\n still comment\nx\n", 28, id="line-comment-continued"),
        pytest.param(b'#define S "a\\\\" \nx\n', 17, id="string-ends-with-escaped-backslash"),
        pytest.param(b'#define U "a/*" B\nx\n', 18, id="comment-opener-in-a-string"),
        pytest.param(b"#if A", 5, id="no-newline"),
        pytest.param(b"#if A /* open", 13, id="unclosed-comment"),
    ],
)
def test_logical_end(source, expected):
    assert logical_end(source, 1) == expected


def test_continues_and_line_starts():
    source = b"#if A \\\n#x\n  #if B\n a #if\n"
    assert continues(source, 8)
    assert not continues(source, 11)
    assert not starts_logical_line(source, 8)  # the tail of a continued line
    assert starts_logical_line(source, 13)
    assert not starts_logical_line(source, 23)
    assert starts_logical_line(b"\xef\xbb\xbf#if A\n", 3)


def test_scan_line_tokens_skip_comments_and_spell_alternatives():
    source = b" A and /* x */ not B \\\n || 0x10u // c\nnext"
    tokens, stop = scan_line(source, 0)
    assert [(t.kind, t.text, t.alternative) for t in tokens] == [
        ("ident", "A", False),
        ("punct", "&&", True),
        ("punct", "!", True),
        ("ident", "B", False),
        ("punct", "||", False),
        ("number", "0x10u", False),
    ]
    assert stop == source.index(b"next")  # just past the newline


def test_one_line():
    assert one_line("A \\\n   &&  B\\\r\n|| C") == "A && B || C"


def test_masking_keeps_offsets():
    source = b'a /* x\ny */ "/* s */" // z\n#define M(x) \\\n  (x) /* q */\nint m;\n'
    masked = mask_comments(source)
    assert len(masked) == len(source)
    assert masked == b'a     \n     "/* s */"     \n#define M(x) \\\n  (x)        \nint m;\n'
    blanked = mask_macros(source)
    assert len(blanked) == len(source)
    assert blanked.endswith(b"\n" + b" " * len(b"#define M(x) \\") + b"\n" + b" " * len(b"  (x) /* q */") + b"\nint m;\n")
    assert blanked.startswith(source[:27])


def test_includes():
    source = b'#include "a.cuh"\n// #include "b.cuh"\n  #  include <c/d.h>\n/* #include "e.h" */\nint x;\n'
    assert includes(source) == [("a.cuh", True), ("c/d.h", False)]
    assert includes(b"int x;\n") == []
