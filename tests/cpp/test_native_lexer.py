"""The compiled lexer (codemods/cpp/_lex.c, through native.mask): comments and literal insides masked, byte for byte.

The specification is the regex below, which functions.mask ran before the
lexer was compiled; the product has only the compiled one, and every case
here is checked against both the expected bytes and this specification.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.core.errors import InstallBroken
from codemods.cpp import functions, native

_SPEC_RE = re.compile(
    rb"""
      /\*.*?(?:\*/|\Z) | //(?:\\\r?\n|[^\n])*
    | R"(?P<delim>[^(\s"\\]{0,16})\(.*?(?:\)(?P=delim)"|\Z)
    | "(?:\\.|[^"\\\n])*"?
    | '(?:\\.|[^'\\\n])*'?
    """,
    re.VERBOSE | re.DOTALL,
)
_BLANK = bytes(0x0A if b == 0x0A else 0x20 for b in range(256))


def _spec_one(match: re.Match) -> bytes:
    text = match.group()
    quote = text[:1]
    if quote in (b'"', b"'") and len(text) >= 2 and text[-1:] == quote:
        return quote + text[1:-1].translate(_BLANK) + quote
    return text.translate(_BLANK)


def spec(source: bytes) -> bytes:
    return _SPEC_RE.sub(_spec_one, source)


# mask_comments: closed comments only, every closed literal kept (plan.dispatch read them with this before)
_COMMENTS_SPEC_RE = re.compile(rb"""/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""", re.DOTALL)


def comments_spec(source: bytes) -> bytes:
    return _COMMENTS_SPEC_RE.sub(lambda m: m.group() if m.group()[:1] in (b'"', b"'") else m.group().translate(_BLANK), source)


CASES = [
    (b"", b""),
    (b"a /* { */ b", b"a         b"),
    (b"a /* open {\n}", b"a          \n "),  # unclosed: to the end
    (b"/*/ x */y", b"        y"),  # `/*/` does not close itself
    (b"x // c {\\\n still } \ny", b"x        \n         \ny"),  # a spliced line comment goes on
    (b"x // c {\\\r\n still }\r\ny", b"x         \n         \ny"),  # CR is blanked too
    (b'extern "C" {', b'extern " " {'),
    (b'"a\\"}" {', b'"    " {'),  # an escaped quote stays inside
    (b'"open {\n}', b"       \n}"),  # unclosed at the line's end: blanked whole
    (b'"ends \\"\n', b'"      "\n'),  # ends on its quote (escaped): read as closed, as the regex reads it
    (b"c = '{'; d = '\\''", b"c = ' '; d = '  '"),
    (b'R"x( ) } )y" )x" {', b"                 {"),  # a raw string ends at `)delim"` only
    (b'R"( open', b"        "),
    # a 17-byte delimiter makes no raw string: the `"` after the R starts a plain one
    (b'R"0123456789abcdefg(x)0123456789abcdefg" {', b'R"                                     " {'),
    (b'BAR"}" R "x"', b'BAR" " R " "'),
    (b"\x00/*\xff*/\x00", b"\x00     \x00"),  # any byte, NULs too
    (b"'", b" "),
    (b"/", b"/"),
]




_ALPHABET = st.sampled_from([b"/", b"*", b"\\", b"\n", b"\r", b'"', b"'", b"R", b"(", b")", b"x", b" ", b"{", b"}", b"d", b"\x00", b"\xe2"])


@pytest.mark.parametrize("compiled, specification", [(native.mask, spec), (native.mask_comments, comments_spec)])
@settings(max_examples=3000, deadline=None)
@given(source=st.lists(_ALPHABET, max_size=60).map(b"".join))
def test_each_mask_is_its_specification(compiled, specification, source):
    masked = compiled(source)
    assert masked == specification(source)
    assert len(masked) == len(source)
    assert [i for i, b in enumerate(masked) if b == 0x0A] == [i for i, b in enumerate(source) if b == 0x0A]


COMMENT_CASES = [
    (b'asm("trap;"); // x {', b'asm("trap;");       '),  # strings kept
    (b'a /* open', b"a /* open"),  # unclosed: not a comment
    (b"a /* x */ /* open", b"a         /* open"),
    (b"x // c \\\n y", b"x       \n y"),  # a backslash does not carry a line comment on
    (b'"open /* x */\n', b'"open        \n'),  # an unclosed string is no string: the comment in it is one
    (b'"/* kept */"', b'"/* kept */"'),
    (b"'\\'' // c", b"'\\''     "),
]


@pytest.mark.parametrize(
    "compiled, specification, source, expected",
    [(native.mask, spec, *case) for case in CASES] + [(native.mask_comments, comments_spec, *case) for case in COMMENT_CASES],
)
def test_mask_bytes(compiled, specification, source, expected):
    assert compiled(source) == expected
    assert specification(source) == expected
    if compiled is native.mask:
        assert functions.mask(source) == expected  # the walk's mask is the compiled one


def test_a_missing_library_is_an_install_error(monkeypatch, tmp_path):
    monkeypatch.setattr(native, "LIBRARY", tmp_path / "_lex.so")
    native._library.cache_clear()
    try:
        with pytest.raises(InstallBroken, match="compiled lexer .*_lex.so is missing"):
            native.mask(b"x")
    finally:
        native._library.cache_clear()


def test_what_a_head_reader_raises_reaches_the_caller(monkeypatch):
    def broken(self, head, brace):
        raise ValueError(f"head at {head}")

    monkeypatch.setattr(functions._Heads, "_classify", broken)
    with pytest.raises(ValueError, match="head at 0"):
        functions.enclosing_functions(b"void f() { int x; }", [12])


def test_the_walk_names_offsets_in_any_order_and_reports_every_body():
    source = b"namespace n {\nvoid a() {\n#if X\n}\n#else\n}\n#endif\nint b(int x) { return x; }\n}\n"
    at_b = source.index(b"return")
    at_a = source.index(b"#if")
    assert functions.enclosing_functions(source, [at_b, at_a, 0, at_b]) == ["b", "a", None, "b"]
    assert [(d.name, source[d.body_start : d.body_start + 1]) for d in functions.definitions(source)] == [("a", b"{"), ("b", b"{")]
