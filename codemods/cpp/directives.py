"""The lines of a C-family file that matter to arch gates, found with byte searches: comments, logical lines, directives, includes.

Everything here works on the raw bytes with byte searches and small regexes
anchored at what they look for; Python runs only per directive. Comments are
found lazily: block comments by following each `/*`, line comments by lexing
one line. A file is never masked or handed whole to tree-sitter, which is
what lets `codemod scan` read a CUDA tree in seconds.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from codemods.gates import SourceError

_LEXEME_RE = re.compile(
    rb"""/\*.*?(?:\*/|\Z)|//(?:\\\r?\n|[^\n])*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""", re.DOTALL
)
_CONDITIONAL_RE = re.compile(rb"#[ \t]*(ifdef|ifndef|if|elifdef|elifndef|elif|else|endif)\b")
_INCLUDE_LINE_RE = re.compile(rb'#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)')
_CONTINUATION_RE = re.compile(rb"\\[ \t]*\r?\n")
_BLANKS_RE = re.compile(rb"[ \t\f\v\r\n]+")
BOM = b"\xef\xbb\xbf"
_OPENING = {"if", "ifdef", "ifndef"}
WORD = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def logical_start(data: bytes, pos: int) -> int:
    """Offset of the first byte of the logical line holding `pos` (backslash-newlines joined)."""
    start = data.rfind(b"\n", 0, pos) + 1
    while start >= 2:
        end = start - 2
        if data[end] == 0x0D and end > 0:
            end -= 1
        if data[end] != 0x5C:
            break
        start = data.rfind(b"\n", 0, end) + 1
    return start


def logical_end(data: bytes, pos: int) -> int:
    """Offset just past the newline that ends the logical line holding `pos` (end of file if none)."""
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


class Comments:
    """Where the comments of one C-family source are (string literals are code, as in hazards)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._pos = 0  # every block comment starting before this is in _starts/_ends
        self._anchor = 0  # a point in code at or before _pos

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
            holder = self._lexeme_at(max(anchor, logical_start(data, at)), at)
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

    def in_comment(self, pos: int) -> bool:
        if self.block_end(pos) >= 0:
            return True
        begin = logical_start(self.data, pos)
        i = bisect.bisect_right(self._starts, pos) - 1
        if i >= 0 and self._ends[i] > begin:
            begin = self._ends[i]
        holder = self._lexeme_at(begin, pos)
        return holder is not None and holder.group().startswith(b"//")

    def masked(self, start: int, end: int) -> bytes:
        """`data[start:end]` (from a point in code) with comment bytes but newlines made spaces."""
        piece = self.data[start:end]
        if b"/" not in piece:
            return piece
        out = bytearray(piece)
        for match in _LEXEME_RE.finditer(self.data, start, end):
            if match.group().startswith(b"/"):
                for i in range(match.start() - start, match.end() - start):
                    if out[i] != 0x0A:
                        out[i] = 0x20
        return bytes(out)


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


@dataclass(frozen=True)
class Directive:
    start: int  # the line start
    keyword_end: int
    end: int  # just past the logical line
    keyword: str  # if, ifdef, ..., else, endif
    hash: int  # offset of the `#`


def find_directives(data: bytes, comments: Comments) -> list[Directive]:
    """Every conditional directive (`#if` ... `#endif`) outside comments, in order."""
    found = []
    for match in _CONDITIONAL_RE.finditer(data):
        at = match.start()
        line_start = data.rfind(b"\n", 0, at) + 1
        before = data[line_start:at]
        if before and before.strip(b" \t\f\v") and not (line_start == 0 and before.startswith(BOM)):
            continue
        if line_start and logical_start(data, at) != line_start:
            continue  # the tail of a continued line
        if comments.block_end(at) >= 0:
            continue
        found.append(Directive(line_start, match.end(), logical_end(data, match.end()), match.group(1).decode(), at))
    return found


def check_balanced(directives: list[Directive]) -> None:
    opened = sum(1 for d in directives if d.keyword in _OPENING)
    closed = sum(1 for d in directives if d.keyword == "endif")
    if opened != closed:
        raise SourceError(f"unbalanced preprocessor conditionals: {opened} #if/#ifdef/#ifndef but {closed} #endif")


def condition_text(masked: bytes) -> str:
    return " ".join(_CONTINUATION_RE.sub(b" ", masked).decode("utf-8", "replace").split())


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
            newline = logical_end(data, pos)
            pos = newline - 1 if newline <= len(data) and data[newline - 1 : newline] == b"\n" else newline
            continue
        if data[pos] == 0x23 and line_start:
            pos = logical_end(data, pos)
            line_start = True
            continue
        return True
    return False


def includes(data: bytes) -> list[tuple[str, bool]]:
    """hazards.includes(data), found with a byte search: `#include "x"` (quoted) and `<x>`, outside comments."""
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


class NoComments(Comments):
    """Python source: `#` starts no C comment that would hide a guard line in a string."""

    def __init__(self) -> None:
        super().__init__(b"")
        self._pos = 1 << 62  # nothing to index
