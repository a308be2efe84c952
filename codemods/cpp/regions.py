"""The #if structure of a C-family file built from its directives, with the instruction tokens of the regions an arch decides.

`structure.assemble` groups the directives `cpp.directives` finds into
branches; this module adds each family token (instructions.TOKEN_FAMILIES) to the
innermost branch around it, looking only where an arch decides unless asked
for everywhere.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass


from codemods.cpp import structure

from codemods.cpp import instructions
from codemods.cpp.directives import (
    WORD,
    Comments,
    Directive,
    Lines,
    condition_text,
    find_directives,
    has_code,
)
from codemods.cpp.instructions import Hit
from codemods.cpp.structure import Structure
from codemods.gates import decode


def build_structure(
    data: bytes, comments: Comments, directives: list[Directive], families, everywhere: bool = False
) -> Structure:
    """structure.structure(data), built from the directives found, with the hits of `families` only.

    Each branch keeps the first hit of each token, which is all that
    blockers and hazards report. Tokens are looked for only where an arch
    decides, unless `everywhere` (file level included, in Structure.top).
    """
    found = (
        (d.start, d.end, d.keyword, lambda d=d: condition_text(comments.masked(d.keyword_end, d.end)))
        for d in directives
    )
    branches, chains, segments = structure.assemble(found, data, lambda a, b: has_code(data, a, b, comments))
    return collect_hits(data, comments, Structure(branches, chains), segments, families, everywhere)


def file_structure(data: bytes) -> Structure:
    """structure.structure(data) the fast way, every family's first token per branch and at file level.

    What kernel_paths reads a file a JIT module compiles with. Raises
    SourceError when the bytes are not UTF-8.
    """
    decode(data)
    comments = Comments(data)
    return build_structure(data, comments, find_directives(data, comments), instructions.TOKEN_FAMILIES, everywhere=True)


@dataclass(frozen=True)
class _TokenPattern:
    family: instructions.TokenFamily
    wrapper: bool
    pattern: re.Pattern  # without a leading \b, which `boundary` checks instead (a \b defeats re's prefix search)
    boundary: bool
    named: bool
    prefix: bytes  # every match starts with these bytes: bytes.find jumps to candidates far faster than re.search

    def search(self, data: bytes, pos: int, end: int) -> re.Match | None:
        """The first match of `pattern` starting in [pos, end), tried only where the prefix occurs."""
        prefix, match = self.prefix, self.pattern.match
        stop = end + len(prefix) - 1
        at = data.find(prefix, pos, stop)
        while at >= 0:
            found = match(data, at)
            if found is not None:
                return found
            at = data.find(prefix, at + 1, stop)
        return None


def _token_patterns() -> tuple[_TokenPattern, ...]:
    out = []
    for family in instructions.TOKEN_FAMILIES:
        for wrapper, sources in ((False, family.instructions), (True, family.wrappers)):
            out += [_token_pattern(family, wrapper, re.compile(source.encode())) for source in sources]
    return tuple(out)


def _token_pattern(family: instructions.TokenFamily, wrapper: bool, compiled: re.Pattern) -> _TokenPattern:
    """A family's regex as the fast search runs it (hazards compiles the same regexes in the same order)."""
    source = compiled.pattern
    boundary = source.startswith(rb"\b") and source[2:3].isalnum()
    pattern = re.compile(source[2:], compiled.flags) if boundary else compiled
    prefix = instructions.literal_prefix(pattern.pattern)
    assert prefix and not _top_level_alternation(pattern.pattern), f"{source!r}: needs one literal start"
    return _TokenPattern(family, wrapper, pattern, boundary, "token" in compiled.groupindex, prefix)


def _top_level_alternation(pattern: bytes) -> bool:
    depth, escaped = 0, False
    for byte in pattern:
        if escaped:
            escaped = False
        elif byte == 0x5C:  # backslash
            escaped = True
        elif byte in b"([":
            depth += 1
        elif byte in b")]":
            depth -= 1
        elif byte == 0x7C and depth == 0:  # |
            return True
    return False


TOKEN_PATTERNS = _token_patterns()
_FAMILY_PREFIXES = tuple(dict.fromkeys(p.prefix for p in TOKEN_PATTERNS))


def has_family_token(data: bytes) -> bool:
    """Whether any instruction or wrapper token could be in `data` (a byte search per literal start)."""
    return any(prefix in data for prefix in _FAMILY_PREFIXES)


# A named token (`kind::mxf4` in `mma.sync ... kind::mxf4`) lies at most this far after its match's start.
_NAMED_REACH = 512


def collect_hits(data, comments, shape: Structure, segments, families, everywhere: bool = False) -> Structure:
    """`shape` with the first of each family token in the body of the innermost branch around it.

    Only bodies an arch decides (an arch-selected branch and everything
    nested in one) are searched: hazards and blockers look nowhere else.
    With `everywhere`, every body is, and the file level too (Structure.top).
    """
    names = {family.name for family in families}
    starts = [segment[0] for segment in segments]
    branches = shape.branches
    relevant = [everywhere or shape.selecting(branch) is not None for branch in branches]
    ranges: list[list[int]] = []
    for low, high, owner in segments:
        if (everywhere if owner is None else relevant[owner]) and high > low:
            if ranges and ranges[-1][1] == low:
                ranges[-1][1] = high
            else:
                ranges.append([low, high])
    found: list[tuple[int, str, str, bool, int | None]] = []
    for token_pattern in TOKEN_PATTERNS if ranges else ():
        family = token_pattern.family.name
        if family not in names:
            continue
        pattern, boundary, named, wrapper = (
            token_pattern.pattern, token_pattern.boundary, token_pattern.named, token_pattern.wrapper
        )
        seen: set[tuple[int | None, bytes]] = set()

        def accept(match: re.Match, owner: int | None) -> None:
            begin = match.start()
            if boundary and begin > 0 and data[begin - 1] in WORD:
                return
            at = match.start("token") if named else begin
            key = (owner, match.group("token") if named else match.group())
            if key in seen or comments.in_comment(begin) or (named and comments.in_comment(at)):
                return
            seen.add(key)
            found.append((at, family, key[1].decode("utf-8", "replace"), wrapper, owner))

        for range_low, range_high in ranges:
            pos = max(0, range_low - _NAMED_REACH) if named else range_low
            while pos < range_high:
                match = token_pattern.search(data, pos, range_high)
                if match is None:
                    break
                i = bisect.bisect_right(starts, match.start("token") if named else match.start()) - 1
                low, high, owner = segments[i] if i >= 0 else (0, match.end(), None)
                if not (everywhere if owner is None else relevant[owner]) or high <= match.start():
                    pos = max(high, match.start() + 1)
                    continue
                if named:
                    accept(match, owner)
                    pos = max(match.end(), match.start() + 1)
                    continue
                # Instruction tokens repeat by the thousand in one body: take each distinct one once,
                # at its first place that passes the checks.
                for token in sorted(set(pattern.findall(data, match.start(), high))):
                    place = data.find(token, match.start(), high)
                    while place >= 0 and (owner, token) not in seen:
                        again = pattern.match(data, place)
                        if again is not None and again.group() == token:
                            accept(again, owner)
                        place = data.find(token, place + 1, high)
                pos = high
    if not found:
        return shape
    lines = Lines(data)
    line_of = {at: lines.at(at) for at in sorted({item[0] for item in found})}
    top: list[Hit] = []
    hits: dict[int, list[Hit]] = {}
    for at, family, token, wrapper, owner in found:
        (top if owner is None else hits.setdefault(owner, [])).append(Hit(family, token, line_of[at], wrapper))
    return shape.with_hits(top, hits)
