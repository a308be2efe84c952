"""The one C/CUDA lexer: which files are C, the tokens of a directive line, comments, logical lines, directives, includes.

Everything here works on bytes and keeps offsets: masking turns bytes into
spaces (newlines stay), it never removes them. Nothing here reads files.
Directives and includes are found with byte searches and small regexes
anchored at what they look for; comments are found lazily (`Comments`):
block comments by following each `/*`, line comments by lexing one line. A
file is never masked whole to find its directives, which is what lets
`codemod scan` read a CUDA tree in seconds.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from codemods.core.source import SourceError

# Every C, C++ and CUDA file (and FlashInfer's .jinja templates of them).
C_SUFFIXES = (
    ".cu", ".cuh", ".h", ".hpp", ".inl", ".cpp", ".cc", ".cxx", ".c", ".hh", ".hxx", ".ipp", ".tcc", ".inc",
    ".jinja",
)  # fmt: skip
# The C files read with the CUDA grammar; every other one is read as C++.
CUDA_SUFFIXES = (".cu", ".cuh")
# What every arch macro's name starts with (`__CUDA_ARCH__`, `__CUDA_ARCH_FEAT_SM90_ALL`, ...): the byte search.
ARCH_TOKEN = b"__CUDA_ARCH"


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
# A C++ raw string literal: `R"delim(` ... `)delim"`, the delimiter up to 16 characters ([lex.string]).
_RAW_STRING_RE = re.compile(rb'(?<![A-Za-z0-9_])(?:u8|[uUL])?R"([^()\\ \t\r\n"]{0,16})\((.*?)\)\1"', re.DOTALL)


def _mask(match: re.Match) -> bytes:
    text = match.group()
    return _NOT_NEWLINE_RE.sub(b" ", text) if match.group("comment") else text


def mask_comments(source: bytes) -> bytes:
    """`source` with every comment byte but newlines turned into a space; offsets are kept."""
    return _LEXEME_RE.sub(_mask, source)


# ---------------------------------------------------------------- logical lines

BOM = b"\xef\xbb\xbf"


def spliced_start(data: bytes, pos: int) -> int:
    """Offset of the first byte of the line holding `pos`, backslash-newlines joined (translation phase 2)."""
    start = data.rfind(b"\n", 0, pos) + 1
    while start >= 2:
        end = start - 2
        if data[end] == 0x0D and end > 0:
            end -= 1
        if data[end] != 0x5C:
            break
        start = data.rfind(b"\n", 0, end) + 1
    return start


def spliced_end(data: bytes, pos: int) -> int:
    """Offset just past the newline ending the line holding `pos`, backslash-newlines joined (end of file if none).

    Unlike `logical_end`, a newline inside a block comment ends the line:
    the #if structure and scan's guard lines read directive lines this way.
    """
    while True:
        newline = data.find(b"\n", pos)
        if newline < 0:
            return len(data)
        end = newline - 1
        if end >= pos and data[end] == 0x0D:
            end -= 1
        if end >= pos and data[end] == 0x5C:
            pos = newline + 1
            continue
        return newline + 1


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
        blanks = blanks.removeprefix(BOM)
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


# ---------------------------------------------------------------- comments, found lazily


class Comments:
    """Where the comments of one C-family source are (string literals are code: inline PTX lives in them)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._pos = 0  # every block comment starting before this is in _starts/_ends
        self._anchor = 0  # a point in code at or before _pos
        self._raw: list[tuple[int, int]] | None = None  # the raw string literals (in_raw_string)

    def _index(self, upto: int) -> None:
        """Index the block comments that start at or before `upto` (most lookups are near the top: includes)."""
        data, starts, ends = self.data, self._starts, self._ends
        pos, anchor = self._pos, self._anchor
        while pos <= upto:
            at = data.find(b"/*", pos)
            if at < 0:
                pos = len(data) + 1
                break
            if at > upto:
                pos = at
                break
            holder = self._lexeme_at(max(anchor, spliced_start(data, at)), at)
            if holder is None:
                end = data.find(b"*/", at + 2)
                end = len(data) if end < 0 else end + 2
                starts.append(at)
                ends.append(end)
                anchor = pos = end
            else:
                pos = max(holder.end(), at + 1)  # inside a string or a line comment
        self._pos, self._anchor = pos, anchor

    def _lexeme_at(self, begin: int, target: int) -> re.Match | None:
        """The string or comment that holds `target`, lexing from `begin` (a point in code)."""
        for match in _LEXEME_RE.finditer(self.data, begin):
            if match.start() >= target:
                return None
            if match.end() > target:
                return match
        return None

    def block_end(self, pos: int) -> int:
        """The end of the block comment holding `pos`, or -1."""
        if pos >= self._pos:
            self._index(pos)
        i = bisect.bisect_right(self._starts, pos) - 1
        return self._ends[i] if i >= 0 and pos < self._ends[i] else -1

    def in_raw_string(self, pos: int) -> bool:
        """Whether `pos` lies inside a C++ raw string literal (`R"(...)"`, which may span lines: a `#if` on one of
        its lines is text, not a directive). Found once per source, only in one that spells `R"`."""
        if self._raw is None:
            self._raw = []
            if b'R"' in self.data:
                for match in _RAW_STRING_RE.finditer(self.data):
                    if not self.in_comment(match.start()):
                        self._raw.append((match.start(), match.end()))
        i = bisect.bisect_right(self._raw, (pos, 1 << 62)) - 1
        return i >= 0 and pos < self._raw[i][1]

    def in_comment(self, pos: int) -> bool:
        if self.block_end(pos) >= 0:
            return True
        begin = spliced_start(self.data, pos)
        i = bisect.bisect_right(self._starts, pos) - 1
        if i >= 0 and self._ends[i] > begin:
            begin = self._ends[i]
        holder = self._lexeme_at(begin, pos)
        return holder is not None and holder.group("comment") is not None

    def masked(self, start: int, end: int) -> bytes:
        """`data[start:end]` (from a point in code) masked as `mask_comments` masks it."""
        piece = self.data[start:end]
        return mask_comments(piece) if b"/" in piece else piece


class NoComments(Comments):
    """Python source: `#` starts no C comment that would hide a guard line in a string."""

    def __init__(self) -> None:
        super().__init__(b"")
        self._pos = 1 << 62  # nothing to index


class Lines:
    """Line numbers of increasing offsets, counted incrementally."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.line = 1

    def at(self, pos: int) -> int:
        if pos < self.pos:
            self.pos, self.line = 0, 1
        self.line += self.data.count(b"\n", self.pos, pos)
        self.pos = pos
        return self.line


# ---------------------------------------------------------------- conditional directives

_CONDITIONAL_RE = re.compile(rb"#[ \t]*(ifdef|ifndef|if|elifdef|elifndef|elif|else|endif)\b")
_OPENING = {"if", "ifdef", "ifndef"}
_BLANKS_RE = re.compile(rb"[ \t\f\v\r\n]+")
WORD = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


@dataclass(frozen=True)
class Directive:
    start: int  # the line start
    keyword_end: int
    end: int  # just past the line (spliced_end)
    keyword: str  # if, ifdef, ..., else, endif
    hash: int  # offset of the `#`

    def condition(self, comments: Comments) -> str:
        """What follows the keyword, comments masked, on one line."""
        return one_line(comments.masked(self.keyword_end, self.end).decode("utf-8", "replace"))


def find_directives(data: bytes, comments: Comments) -> list[Directive]:
    """Every conditional directive (`#if` ... `#endif`) outside comments, in order."""
    found = []
    for match in _CONDITIONAL_RE.finditer(data):
        at = match.start()
        if not starts_logical_line(data, at) or comments.block_end(at) >= 0:
            continue
        line_start = data.rfind(b"\n", 0, at) + 1
        found.append(Directive(line_start, match.end(), spliced_end(data, match.end()), match.group(1).decode(), at))
    return found


def check_balanced(directives: list[Directive]) -> None:
    opened = sum(1 for d in directives if d.keyword in _OPENING)
    closed = sum(1 for d in directives if d.keyword == "endif")
    if opened != closed:
        raise SourceError(f"unbalanced preprocessor conditionals: {opened} #if/#ifdef/#ifndef but {closed} #endif")


def has_code(data: bytes, start: int, end: int, comments: Comments) -> bool:
    """Whether `data[start:end]` (whole lines) holds anything but blanks, comments and directives."""
    pos, line_start = start, True
    while pos < end:
        block = comments.block_end(pos)
        if block >= 0:
            line_start = line_start or b"\n" in data[pos:block]
            pos = block
            continue
        blanks = _BLANKS_RE.match(data, pos, end)
        if blanks is not None:
            line_start = line_start or b"\n" in blanks.group()
            pos = blanks.end()
            continue
        if data.startswith(b"//", pos):
            newline = spliced_end(data, pos)
            pos = newline - 1 if newline <= len(data) and data[newline - 1 : newline] == b"\n" else newline
            continue
        if data[pos] == 0x23 and line_start:
            pos = spliced_end(data, pos)
            line_start = True
            continue
        return True
    return False


# ---------------------------------------------------------------- includes

_INCLUDE_LINE_RE = re.compile(rb'#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)')


def includes(data: bytes) -> list[tuple[str, bool]]:
    """Every `#include`, as (path, quoted): `"x.h"` is quoted, `<x.h>` is not. Commented-out ones are left out."""
    found = []
    comments = Comments(data)
    for match in _INCLUDE_LINE_RE.finditer(data):
        at = match.start()
        line_start = data.rfind(b"\n", 0, at) + 1
        if data[line_start:at].strip(b" \t") or comments.block_end(at) >= 0:
            continue
        quoted, angled = match.groups()
        found.append(((quoted or angled).decode("utf-8", "replace").strip(), quoted is not None))
    return found
