"""Needles: literal text one of which every match of a regular expression contains (a rule's fast pre-check).

Most lines of a server log match no rule, and `needle in line` is many times
faster than a regex search, so a rule first looks for its needles. The needles
are read from the pattern's own text by a small reader of Python's regex
syntax. It only has to be right, not complete: anything it does not fully
understand (a backreference, a conditional group, case-insensitive or verbose
flags) makes it give no needles, and the rule is then searched on every line,
with the same results, only slower.
"""

from __future__ import annotations

import re

MIN_LENGTH = 3  # shorter needles would not make the pre-check cheaper than the search

# A pattern read as a sequence of items: a literal character (str), something that is not a
# literal character (None: a class, `.`, an anchor, a repeated item), or a group (a list of
# alternatives, each a sequence).
Item = str | None | list

_SPECIAL_ESCAPES = {"a": "\a", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_NOT_LITERAL_ESCAPES = frozenset("AZbBdDsSwW")
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_REPEAT = re.compile(r"\{(\d*)(?:,(\d*))?\}")
_FLAGS = re.compile(r"\(\?([aiLmsux]*)(?:-([imsx]+))?([:)])")


class _Unknown(Exception):
    """Syntax the reader does not take apart: no needles for this pattern."""


def required(pattern: str) -> tuple[str, ...]:
    """Literal strings one of which every match of pattern must contain; () when that cannot be told.

    Of the candidates (a run of literal characters, or the alternatives of a
    group when each has needles of its own), the one whose shortest needle is
    longest wins; needles shorter than MIN_LENGTH are not worth checking.
    """
    try:
        flags = re.compile(pattern).flags
    except (re.error, TypeError):
        return ()
    if flags & (re.IGNORECASE | re.VERBOSE):
        return ()
    try:
        alternatives, end = _alternatives(pattern, 0)
    except (_Unknown, IndexError):
        return ()
    if end != len(pattern):
        return ()
    return _best_of_group(alternatives)


def _alternatives(pattern: str, pos: int) -> tuple[list[list[Item]], int]:
    """The alternatives from pos to the `)` that closes the group (not consumed) or the end."""
    alternatives: list[list[Item]] = [[]]
    while pos < len(pattern):
        c = pattern[pos]
        if c == ")":
            break
        if c == "|":
            alternatives.append([])
            pos += 1
            continue
        items = alternatives[-1]
        if c in "*+?" or c == "{" and _REPEAT.match(pattern, pos) and not pattern.startswith("{}", pos):
            end = pos + 1 if c != "{" else _REPEAT.match(pattern, pos).end()  # type: ignore[union-attr]
            if end < len(pattern) and pattern[end] in "?+":  # lazy or possessive
                end += 1
            if items:
                items[-1] = None  # a repeated item may be absent, or its run broken
            pos = end
            continue
        item, pos = _atom(pattern, pos)
        if item != "":  # "" stands for a comment or a global flag group: nothing at all
            items.append(item)
    return alternatives, pos


def _atom(pattern: str, pos: int) -> tuple[Item, int]:
    c = pattern[pos]
    if c == "\\":
        return _escape(pattern, pos)
    if c == "[":
        return _char_class(pattern, pos)
    if c in ".^$":
        return None, pos + 1
    if c == "(":
        return _group(pattern, pos)
    return c, pos + 1


def _escape(pattern: str, pos: int) -> tuple[Item, int]:
    c = pattern[pos + 1]
    if c in _NOT_LITERAL_ESCAPES:
        return None, pos + 2
    if c in _SPECIAL_ESCAPES:
        return _SPECIAL_ESCAPES[c], pos + 2
    if c in _HEX_ESCAPES:
        digits = pattern[pos + 2:pos + 2 + _HEX_ESCAPES[c]]
        return chr(int(digits, 16)), pos + 2 + len(digits)
    if c.isalnum():  # a backreference, an octal escape, \N{...}
        raise _Unknown(pattern)
    return c, pos + 2


def _char_class(pattern: str, pos: int) -> tuple[Item, int]:
    """A [...] set: not a literal, unless it holds one character only (`[.]`, as sre reads it)."""
    start = pos + 1
    negated = pattern.startswith("^", start)
    pos = start + negated
    tokens: list[str] = []
    while True:
        token = pattern[pos:pos + 2] if pattern[pos] == "\\" else pattern[pos]
        if token == "]" and tokens:
            break
        tokens.append(token)
        pos += len(token)
    single = tokens[0] if len(set(tokens)) == 1 else ""
    if not negated and (len(single) == 1 or len(single) == 2 and not single[1].isalnum()):
        return single[-1], pos + 1
    return None, pos + 1


def _group(pattern: str, pos: int) -> tuple[Item, int]:
    if not pattern.startswith("(?", pos):
        return _group_body(pattern, pos + 1)
    if pattern.startswith("(?#", pos):
        return "", pattern.index(")", pos) + 1
    if pattern.startswith(("(?:", "(?P<"), pos):
        body = pos + 3 if pattern[pos + 2] == ":" else pattern.index(">", pos) + 1
        return _group_body(pattern, body)
    if pattern.startswith(("(?=", "(?!", "(?>"), pos) or pattern.startswith(("(?<=", "(?<!"), pos):
        _, end = _group_body(pattern, pattern.index(pattern[pos + 2], pos + 2) + 1 + (pattern[pos + 2] == "<"))
        return None, end  # a lookaround matches no text; an atomic group is left alone
    flags = _FLAGS.match(pattern, pos)
    if flags is None:  # (?P=name), (?(1)yes|no)
        raise _Unknown(pattern)
    added, removed, closer = flags.group(1), flags.group(2) or "", flags.group(3)
    if "x" in added + removed:
        raise _Unknown(pattern)
    if closer == ")":
        return "", flags.end()  # global flags, at the start: already in re.compile's flags
    group, after = _group_body(pattern, flags.end())
    return (None if "i" in added else group), after


def _group_body(pattern: str, pos: int) -> tuple[Item, int]:
    alternatives, end = _alternatives(pattern, pos)
    if pattern[end] != ")":
        raise _Unknown(pattern)
    return alternatives, end + 1


def _best_of_group(alternatives: list[list[Item]]) -> tuple[str, ...]:
    each = [_best_of_sequence(items) for items in alternatives]
    if not all(each):
        return ()
    return tuple(n for needles in each for n in needles)


def _best_of_sequence(items: list[Item]) -> tuple[str, ...]:
    best: tuple[str, ...] = ()

    def shortest(needles: tuple[str, ...]) -> int:
        return min(map(len, needles), default=0)

    run = ""
    for item in [*_spliced(items), None]:
        if isinstance(item, str):
            run += item
            continue
        if run and len(run) > shortest(best):
            best = (run,)
        run = ""
        if isinstance(item, list):
            inner = _best_of_group(item)
            if inner and (not best or shortest(inner) > shortest(best)):
                best = inner
    return best if best and shortest(best) >= MIN_LENGTH else ()


def _spliced(items: list[Item]) -> list[Item]:
    """Groups of one alternative opened in place: `x(?:ab)c` reads as the run "xabc"."""
    out: list[Item] = []
    for item in items:
        if isinstance(item, list) and len(item) == 1:
            out += _spliced(item[0])
        else:
            out.append(item)
    return out
