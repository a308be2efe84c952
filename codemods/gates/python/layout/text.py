"""Where things are and where text goes in a Python file's bytes, without parsing it.

The trivia between two tokens inside brackets (`TRIVIA`, `skip_trivia`), the
lone carriage return libcst counts no line at (`LONE_CR`), a line's start, end
and line ending; the line length black formatted the file at (`line_length`);
and, among the places an insertion gives the same bytes, the one a reader
would put it at (`tidy_insertion`).
"""

from __future__ import annotations

import io
import re
import tokenize

from codemods.gates import Edit

# What may stand between two tokens inside brackets: blanks, line breaks, continuations, comments.
TRIVIA = re.compile(rb"(?:[ \t\f\r\n]+|\\\r?\n|#[^\r\n]*)*")
# A carriage return that ends a line on its own: Python's tokenizer counts a line there, libcst does not.
LONE_CR = re.compile(rb"\r(?!\n)")


def skip_trivia(source: bytes, at: int) -> int:
    """The offset just past the TRIVIA that starts at `at` (`at` itself when there is none)."""
    match = TRIVIA.match(source, at)
    assert match is not None  # TRIVIA matches the empty string, so it matches anywhere
    return match.end()


def line_start(source: bytes, offset: int) -> int:
    """Offset of the start of the line holding `offset`."""
    return source.rfind(b"\n", 0, offset) + 1


def line_end(source: bytes, offset: int) -> int:
    """Offset just past the line ending of the line holding `offset` (end of file if none)."""
    newline = source.find(b"\n", offset)
    return len(source) if newline < 0 else newline + 1


def eol(source: bytes, offset: int) -> bytes:
    """The line ending of the line holding `offset`: CRLF or LF (LF at end of file)."""
    newline = source.find(b"\n", offset)
    if newline > 0 and source[newline - 1 : newline] == b"\r":
        return b"\r\n"
    return b"\n"


def tidy_insertion(source: bytes, edit: Edit) -> Edit:
    """The same insertion, moved to where a reader would put it.

    The shortest edit from `a, is_sm100_supported, is_hip` to
    `a, is_sm100_supported, is_sm120_supported, is_hip` inserts
    `sm120_supported, is_` after the second `is_`: inside repeated text an
    insertion can slide and still give the same bytes. Slide it to the start
    of a line, or else to a place that splits no word
    (`, is_sm120_supported` right after `is_sm100_supported`).
    """
    if edit.start != edit.end or not edit.text:
        return edit
    at, text = edit.start, edit.text
    while at > 0 and source[at - 1] == text[-1]:
        at, text = at - 1, text[-1:] + text[:-1]
    candidates = [(at, text)]
    while at < len(source) and source[at] == text[0]:
        at, text = at + 1, text[1:] + text[:1]
        candidates.append((at, text))

    def line_start(candidate: tuple[int, bytes]) -> bool:
        at, text = candidate
        return (at == 0 or source[at - 1 : at] == b"\n") and text.endswith(b"\n")

    def splits_no_word(candidate: tuple[int, bytes]) -> bool:
        at, text = candidate
        return not (_word(source[at - 1 : at]) and _word(text[:1])) and not (
            _word(text[-1:]) and _word(source[at : at + 1])
        )

    for prefer in (line_start, splits_no_word):
        for at, text in candidates:
            if prefer((at, text)):
                return Edit(at, at, text)
    return edit


def _word(char: bytes) -> bool:
    return bool(char) and (char.isalnum() or char == b"_")


# black's and ruff format's default line length, which SGLang and FlashInfer keep
BLACK_LINE_LENGTH = 88
_NOT_CODE = {tokenize.STRING, tokenize.COMMENT} | {
    getattr(tokenize, name) for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, name)
}


def line_length(source: bytes) -> int:
    """The file's line length: its longest line that is long for its code and that black splits, 88 at least.

    A wheel has no black/ruff settings. Black leaves strings and comments long,
    so a line counts only when it is past 88 without them: in SGLang 0.5.16
    (black, 88) 93% of the files have none. Nor does a line count that black
    leaves long at any limit, having no place to split it: one with no
    brackets opened and closed on it around something that is an `import`, the
    head black split a statement at (`from a.long.module import (`, `if not Kernel.is_valid_dtypes_and_scale(`,
    `name=lambda a, b, ...: (`: a lambda's parameters are no place to split;
    SGLang 0.5.23's fp8_utils.py:585 is such a 125-column line in a file
    formatted at 88), or a line inside brackets (`name=self.attribute.chain,`).
    A statement's own line still counts (`n = self.a.b + 1`: black would put
    its value in parentheses). The longest one, not a count: a file with such
    lines up to 120 was formatted at 120, or not at all.
    """
    text = source.decode("utf-8", "replace")
    lines = text.splitlines()
    not_code = [0] * (len(lines) + 2)  # per line number: columns taken by strings and comments
    splittable = [False] * (len(lines) + 2)  # per line number: a place black splits at
    opened: list[tuple[int, int]] = []  # (line number, index of the token after it) of each open bracket
    first: dict[int, tuple[str, int]] = {}  # per line number: its first code token and the bracket depth there
    last: dict[int, str] = {}  # per line number: its last code token
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        for index, token in enumerate(tokens):
            number = token.start[0]
            if token.type in _NOT_CODE:
                end = token.end[0]
                for line in range(number, min(end, len(lines)) + 1):
                    not_code[line] += token.end[1] - token.start[1] if number == end else len(lines[line - 1])
            if token.type in _NOT_CODE - {tokenize.COMMENT} or token.type in (tokenize.NAME, tokenize.NUMBER, tokenize.OP):
                first.setdefault(number, (token.string, len(opened)))
                last[token.end[0]] = token.string
            if token.type == tokenize.OP and token.string in "([{":
                opened.append((number, index + 1))
            elif token.type == tokenize.OP and token.string in ")]}" and opened:
                line, inside = opened.pop()
                if line == number and inside < index:
                    splittable[number] = True
    except (tokenize.TokenError, SyntaxError):
        return BLACK_LINE_LENGTH
    for number, (word, depth) in first.items():
        head = last.get(number, "") in ("(", "[", "{")
        if depth == 0 and not head and word != "import":
            splittable[number] = True
    long_for_code = (
        len(line)
        for number, line in enumerate(lines, 1)
        if splittable[number] and len(line) - not_code[number] > BLACK_LINE_LENGTH
    )
    return max([BLACK_LINE_LENGTH, *long_for_code])
