"""The one C/CUDA lexer: which files are C, the tokens of a directive line, comments, logical lines, includes.

Everything here works on bytes and keeps offsets: masking turns bytes into
spaces (newlines stay), it never removes them. Nothing here reads files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Every C, C++ and CUDA file (and FlashInfer's .jinja templates of them).
C_SUFFIXES = (
    ".cu", ".cuh", ".h", ".hpp", ".inl", ".cpp", ".cc", ".cxx", ".c", ".hh", ".hxx", ".ipp", ".tcc", ".inc",
    ".jinja",
)  # fmt: skip
# The C files read with the CUDA grammar; every other one is read as C++.
CUDA_SUFFIXES = (".cu", ".cuh")


def language(path: str) -> str:
    """The grammar a C file is read with: "cuda" for `.cu`/`.cuh`, else "cpp"."""
    return "cuda" if path.endswith(CUDA_SUFFIXES) else "cpp"


# ---------------------------------------------------------------- tokens of a directive line

_TOKEN_RE = re.compile(
    rb"""
      (?P<space>[ \t\f\v\r]+ | \\[ \t]*\r?\n | /\*.*?\*/ | //(?:\\\r?\n|[^\n])* )
    | (?P<newline>\n)
    | (?P<number>\.?[0-9](?:[eEpP][+-]|[0-9A-Za-z_.])*)
    | (?P<char>(?:u8|[uUL])?'(?:[^'\\\n]|\\.)*')
    | (?P<ident>[A-Za-z_$][A-Za-z0-9_$]*)
    | (?P<punct>&&|\|\||<<|>>|<=|>=|==|!=|[-+*/%<>&^|!~?:(),])
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # number, char, ident, punct, or stray for a byte no C token starts with
    text: str  # an alternative token is given as the operator it spells (`and` -> `&&`)
    start: int
    end: int
    alternative: bool = False  # spelled as a C++ alternative token (`and`, `or`, `not` ...)


# C++ [lex.digraph]: in C++ (and so in CUDA) these are the operators, in #if as anywhere.
ALTERNATIVE_TOKENS = {
    "and": "&&", "or": "||", "not": "!", "bitand": "&", "bitor": "|",
    "xor": "^", "compl": "~", "not_eq": "!=",
}  # fmt: skip


def scan_line(source: bytes, pos: int) -> tuple[list[Token], int]:
    """Tokens of the logical line from `pos`, and the offset just past its newline.

    Continuation backslashes, comments and whitespace separate tokens and are
    not tokens themselves, as in translation phases 2 and 3.
    """
    tokens = []
    while pos < len(source):
        match = _TOKEN_RE.match(source, pos)
        if match is None:
            tokens.append(Token("stray", source[pos : pos + 1].decode("latin-1"), pos, pos + 1))
            pos += 1
            continue
        kind = match.lastgroup or ""  # every alternative of _TOKEN_RE is a named group
        pos = match.end()
        if kind == "newline":
            break
        if kind == "ident" and match.group().decode("latin-1") in ALTERNATIVE_TOKENS:
            spelled = ALTERNATIVE_TOKENS[match.group().decode("latin-1")]
            tokens.append(Token("punct", spelled, match.start(), pos, alternative=True))
        elif kind != "space":
            tokens.append(Token(kind, match.group().decode("latin-1"), match.start(), pos))
    return tokens, pos


_CONTINUATION_RE = re.compile(r"\\[ \t]*\r?\n")


def one_line(text: str) -> str:
    """A condition on one line: continuations and runs of whitespace become one space."""
    return " ".join(_CONTINUATION_RE.sub(" ", text).split())


# ---------------------------------------------------------------- comments and string literals

# Closed comments and string/character literals: what a line start or a cut inside them is not.
OPAQUE_RE = re.compile(rb"""/\*.*?\*/|//(?:\\\r?\n|[^\n])*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""", re.DOTALL)

_LEXEME_RE = re.compile(
    rb"""
      (?P<comment>/\*.*?(?:\*/|\Z) | //(?:\\\r?\n|[^\n])*)
    | "(?:\\.|[^"\\\n])*"
    | '(?:\\.|[^'\\\n])*'
    """,
    re.VERBOSE | re.DOTALL,
)
_NOT_NEWLINE_RE = re.compile(rb"[^\n]")


def mask_comments(source: bytes) -> bytes:
    """`source` with every comment byte but newlines turned into a space; offsets are kept."""

    def mask(match: re.Match) -> bytes:
        text = match.group()
        return _NOT_NEWLINE_RE.sub(b" ", text) if match.group("comment") else text

    return _LEXEME_RE.sub(mask, source)


# ---------------------------------------------------------------- logical lines

_STOP_RE = re.compile(rb"""/[*/]|["'\n]""")
_LITERAL_RE = {
    ord('"'): re.compile(rb'"(?:\\.|[^"\\\n])*"?'),
    ord("'"): re.compile(rb"'(?:\\.|[^'\\\n])*'?"),
}


def logical_end(source: bytes, pos: int) -> int:
    """Offset just past the newline that ends the logical line holding `pos` (end of file if none).

    A newline after a backslash continues the line; one inside a block
    comment does not end it; string and character literals are skipped.
    """
    n = len(source)
    while True:
        match = _STOP_RE.search(source, pos)
        if match is None:
            return n
        at = match.start()
        byte = source[at]
        if byte == 0x0A:  # inlined continues(source, at + 1): this runs once per directive line
            before = at - 2 if at >= 2 and source[at - 1] == 0x0D else at - 1
            if before >= 0 and source[before] == 0x5C:
                pos = at + 1
                continue
            return at + 1
        if byte == 0x2F and source[at + 1] == 0x2A:  # /*
            close = source.find(b"*/", at + 2)
            if close < 0:
                return n
            pos = close + 2
        elif byte == 0x2F:  # //
            newline = source.find(b"\n", at)
            if newline < 0:
                return n
            pos = newline  # a backslash before it continues the comment and the line
        else:
            literal = _LITERAL_RE[byte].match(source, at)  # a quote always matches: the closing one is optional
            pos = literal.end() if literal is not None else at + 1


def continues(source: bytes, line_start: int) -> bool:
    """Whether the line before the one at `line_start` ends with a continuation backslash."""
    end = line_start - 2  # the byte before that line's newline
    if end >= 0 and source[end] == ord("\r"):
        end -= 1
    return end >= 0 and source[end] == ord("\\")


def starts_logical_line(source: bytes, offset: int) -> bool:
    """Whether only blanks (or a BOM) precede `offset` on its line, and no backslash continues the line before."""
    line_start = source.rfind(b"\n", 0, offset) + 1
    blanks = source[line_start:offset]
    if line_start == 0:
        blanks = blanks.removeprefix(b"\xef\xbb\xbf")
    if blanks.strip(b" \t\f\v"):
        return False
    return not continues(source, line_start)


_MACRO_LINE_RE = re.compile(
    rb"""/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|^[ \t]*\#[ \t]*(?P<macro>define|undef)\b""",
    re.DOTALL | re.MULTILINE,
)


def mask_macros(source: bytes) -> bytes:
    """The source with each `#define`/`#undef` (continuation lines and comments included) blanked."""
    out = bytearray(source)
    pos = 0
    while True:
        match = _MACRO_LINE_RE.search(source, pos)
        if match is None:
            return bytes(out)
        if match.group("macro") is None:
            pos = max(match.end(), pos + 1)
            continue
        end = logical_end(source, match.end())
        for i in range(match.start(), end):
            if out[i] not in b"\r\n":
                out[i] = 0x20
        pos = end


# ---------------------------------------------------------------- includes

_INCLUDE_RE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)', re.MULTILINE)


def includes(source: bytes) -> list[tuple[str, bool]]:
    """Every `#include`, as (path, quoted): `"x.h"` is quoted, `<x.h>` is not. Commented-out ones are left out."""
    last = None
    for last in _INCLUDE_RE.finditer(source):
        pass
    if last is None:
        return []
    found = []  # comments are masked only up to the last candidate: includes sit near the top
    for match in _INCLUDE_RE.finditer(mask_comments(source[: last.end()])):
        quoted, angled = match.groups()
        found.append(((quoted or angled).decode("utf-8", "replace").strip(), quoted is not None))
    return found
