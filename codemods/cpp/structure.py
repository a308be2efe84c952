"""The one `#if` structure of a C, C++ or CUDA file: its conditional groups, their bodies, per-arch verdicts.

`structure(source)` finds every `#if`/`#elif`/`#else` branch with its body,
nesting, whether the body holds code and which instruction-family tokens
(`instructions.TOKEN_FAMILIES`) it holds: the first place of each distinct
token in each body, and at file level (`Structure.top`). It is built from the
directives the lexer finds (`lexer.find_directives`) without masking the
file; `build_structure` builds it for a caller that has them already, with
the tokens of some families only. Branch conditions are evaluated per arch
with `evaluate.evaluate` (true, false or unknown). Comments are ignored;
string literals are kept, since inline PTX lives in them.

A `Structure` and its `Branch`es are immutable (tuples, frozen records), so
the one `structure()` caches can be shared by every caller; the per-arch
verdicts it remembers are a private memo. Nothing here reads files.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache

from codemods.core.arch import Arch, is_arch_macro
from codemods.core.source import decode
from codemods.cpp import instructions
from codemods.cpp.evaluate import evaluate
from codemods.cpp.instructions import Hit, TokenFamily
from codemods.cpp.lexer import WORD, Comments, Directive, Lines, find_directives, has_code

_OPENING = {"if", "ifdef", "ifndef"}
_CONTINUING = {"elif", "elifdef", "elifndef", "else"}


@dataclass(frozen=True)
class Branch:
    """One branch of a conditional group: the `#if`, an `#elif` or the `#else`, and its body."""

    index: int  # position in Structure.branches
    chain: int  # the conditional group it belongs to
    position: int  # 0 for the opening #if, then each #elif/#else
    parent: int | None  # the branch whose body holds this group, None at file level
    line: int  # 1-based line of the directive
    directive: str  # "#if", "#ifdef", "#ifndef", "#elif", "#elifdef", "#elifndef" or "#else"
    condition: str  # the condition (macro name for #ifdef), comments masked, on one line
    start: int  # byte offset of the directive's logical line
    body_start: int  # byte offset just after the directive's logical line
    body_end: int = -1  # byte offset of the next directive of the group (end of file when unclosed)
    own_code: bool = False  # a non-directive, non-blank line directly in the body
    hits: tuple[Hit, ...] = field(default=())  # family tokens directly in the body
    children: tuple[int, ...] = field(default=())  # first branch of each group nested in the body

    def __post_init__(self) -> None:
        object.__setattr__(self, "hits", tuple(self.hits))  # given as lists (a cache entry), kept as tuples
        object.__setattr__(self, "children", tuple(self.children))

    @property
    def names_arch(self) -> bool:
        """Whether the condition tells archs apart: it names an arch macro other than in `defined(__CUDA_ARCH__)`.

        `defined(__CUDA_ARCH__)` (and `#ifdef __CUDA_ARCH__`) only tells the
        device pass from the host pass, so alone it selects no arch.
        """
        return _names_arch(self.directive, self.condition)


@lru_cache(maxsize=8192)
def _names_arch(directive: str, condition: str) -> bool:
    """Branch.names_arch; conditions repeat over a library, so the answers are cached."""
    if directive in ("#ifdef", "#ifndef", "#elifdef", "#elifndef"):
        return is_arch_macro(condition.strip()) and condition.strip() != "__CUDA_ARCH__"
    condition = _DEFINED_CUDA_ARCH_RE.sub(" ", condition)
    return any(is_arch_macro(name) for name in re.findall(r"[A-Za-z_]\w*", condition))


_DEFINED_CUDA_ARCH_RE = re.compile(r"\bdefined\s*(?:\(\s*__CUDA_ARCH__\s*\)|__CUDA_ARCH__\b)")


class Structure:
    """The conditional groups of one file and per-arch verdicts over them."""

    def __init__(
        self, branches: Iterable[Branch], chains: Iterable[Iterable[int]], top: Iterable[Hit] = ()
    ) -> None:
        self.branches = tuple(branches)
        self.chains = tuple(tuple(chain) for chain in chains)
        self.top = tuple(top)  # family tokens outside every conditional group
        self._starts = [branch.start for branch in branches]
        self._own: dict[tuple[int, Arch], bool | None] = {}
        self._code: dict[int, bool] = {}
        self._selecting: dict[int, int | None] = {}

    def with_hits(self, top: Iterable[Hit], hits: dict[int, list[Hit]]) -> Structure:
        """This structure with more family tokens: `top` at file level, `hits[i]` in branch i's body, by line."""
        branches = [
            replace(branch, hits=tuple(sorted((*branch.hits, *hits[branch.index]), key=_line))) if branch.index in hits else branch
            for branch in self.branches
        ]
        return Structure(branches, self.chains, sorted((*self.top, *top), key=_line))

    def at(self, offset: int) -> Branch | None:
        """The branch whose directive line holds byte `offset`."""
        i = bisect.bisect_right(self._starts, offset) - 1
        if i >= 0 and self.branches[i].start <= offset < self.branches[i].body_start:
            return self.branches[i]
        return None

    def at_line(self, line: int) -> Branch | None:
        for branch in self.branches:
            if branch.line == line:
                return branch
        return None

    def own(self, branch: Branch, arch: Arch) -> bool | None:
        """The branch's own condition on `arch`: True, False or None (unknown)."""
        key = (branch.index, arch)
        if key not in self._own:
            self._own[key] = _verdict(branch.directive, branch.condition, arch)
        return self._own[key]

    def taken(self, branch: Branch, arch: Arch) -> bool | None:
        """Whether the preprocessor takes this branch of its group on `arch` (None: depends on other macros)."""
        decided = True
        for j in self.chains[branch.chain][: branch.position]:
            prior = self.own(self.branches[j], arch)
            if prior is True:
                return False
            if prior is None:
                decided = False
        mine = self.own(branch, arch)
        if mine is False:
            return False
        return True if mine is True and decided else None

    def reachable(self, branch: Branch, arch: Arch) -> bool:
        """Whether the body may be compiled on `arch`: this branch and every enclosing one may be taken."""
        current: Branch | None = branch
        while current is not None:
            if self.taken(current, arch) is False:
                return False
            current = None if current.parent is None else self.branches[current.parent]
        return True

    def group(self, branch: Branch) -> list[Branch]:
        return [self.branches[j] for j in self.chains[branch.chain]]

    def has_code(self, branch: Branch) -> bool:
        """Whether the body, nested groups included, holds any line of code."""
        pending = [branch]  # a stack, not recursion: groups may nest thousands deep
        while pending:
            current = pending[-1]
            if current.index in self._code:
                pending.pop()
                continue
            members = [member for child in current.children for member in self.group(self.branches[child])]
            if current.own_code:
                self._code[current.index] = True
            elif any(self._code.get(member.index) for member in members):
                self._code[current.index] = True
            else:
                unknown = [member for member in members if member.index not in self._code]
                if unknown:
                    pending += unknown
                    continue
                self._code[current.index] = False
            pending.pop()
        return self._code[branch.index]

    def arch_selected(self, branch: Branch) -> bool:
        """Whether an arch decides this branch: it, or an earlier branch of its group, tells archs apart."""
        return any(member.names_arch for member in self.group(branch)[: branch.position + 1])

    def gives_code(self, branch: Branch, arch: Arch) -> bool:
        """Whether some branch of this group that `arch` may take holds code."""
        return any(self.taken(member, arch) is not False and self.has_code(member) for member in self.group(branch))

    def region_hits(self, branch: Branch, arch: Arch, families: tuple[TokenFamily, ...]) -> list[Hit]:
        """Family tokens compiled on `arch` when `branch` is taken: its body minus nested branches `arch` skips."""
        names = {family.name for family in families}
        found: list[Hit] = []
        pending = [branch]  # a stack, not recursion: groups may nest thousands deep
        while pending:
            current = pending.pop()
            found += [hit for hit in current.hits if hit.family in names]
            for child in current.children:
                pending += [member for member in self.group(self.branches[child]) if self.taken(member, arch) is not False]
        return sorted(found, key=lambda hit: hit.line)

    def selecting(self, branch: Branch) -> Branch | None:
        """The innermost arch-selected branch among `branch` and the branches around it."""
        # Remembered per branch: asked for every branch, a walk up each costs the depth (quadratic in nested #ifs).
        path = []
        current: Branch | None = branch
        while current is not None and current.index not in self._selecting:
            path.append(current.index)
            if self.arch_selected(current):
                break
            current = None if current.parent is None else self.branches[current.parent]
        if current is None:
            found = None
        elif current.index in self._selecting:
            found = self._selecting[current.index]
        else:
            found = current.index
        for index in path:
            self._selecting[index] = found
        return None if found is None else self.branches[found]


@lru_cache(maxsize=4096)
def _verdict(directive: str, condition: str, arch: Arch) -> bool | None:
    """One directive's condition on `arch`; guards repeat, so the answers are cached."""
    if directive == "#else":
        return True
    macros = arch.macros()
    if directive in ("#if", "#elif"):
        if not any(is_arch_macro(name) for name in re.findall(r"[A-Za-z_]\w*", condition)):
            return None
        return evaluate(condition, macros)
    name = condition.strip()
    if not is_arch_macro(name):
        return None
    defined = name in macros
    return defined if directive in ("#ifdef", "#elifdef") else not defined


def _line(hit: Hit) -> int:
    return hit.line


@lru_cache(maxsize=16)
def structure(source: bytes) -> Structure:
    """The conditional groups of `source` (bytes of a C, C++ or CUDA file); immutable, so cached and shared."""
    comments = Comments(source)
    return build_structure(source, comments, find_directives(source, comments), instructions.TOKEN_FAMILIES, everywhere=True)


def file_structure(data: bytes) -> Structure:
    """structure(data) of a file's bytes; raises SourceError when they are not UTF-8."""
    decode(data)
    return structure(data)


def build_structure(
    data: bytes, comments: Comments, directives: list[Directive], families, everywhere: bool = False
) -> Structure:
    """The structure of `data` from the directives found, with the tokens of `families` only.

    Each branch keeps the first place of each token, which is all that
    blockers and hazards report. Tokens are looked for only where an arch
    decides, unless `everywhere` (file level included, in Structure.top).
    """
    found = ((d.start, d.end, d.keyword, lambda d=d: d.condition(comments)) for d in directives)
    branches, chains, segments = assemble(found, data, lambda a, b: has_code(data, a, b, comments))
    return collect_hits(data, comments, Structure(branches, chains), segments, families, everywhere)


def assemble(directives, text: bytes, has_code: Callable[[int, int], bool]):
    """Group directive lines into #if/#elif/#else chains: (branches, chains, segments).

    `directives` yields `(start, end, keyword, condition)` in source order,
    `condition()` giving the directive's condition text on demand; `text` is
    the source (for line numbers); `has_code(start, end)` says whether a
    stretch between directives holds code. Segments are `(start, end,
    innermost open branch)` for the stretches between directives.
    """
    drafts, chains, segments = _group(directives, text, has_code)
    return _freeze(drafts), chains, segments


# A draft is a branch's fields in Branch order but hits; these three are filled in as its group goes on.
_BODY_END, _OWN_CODE, _CHILDREN = 9, 10, 11


def _group(directives, text: bytes, has_code: Callable[[int, int], bool]):
    """assemble() with each branch still a draft (a list), whose body end, code and children fill in as it goes."""
    drafts: list[list] = []
    chains: list[list[int]] = []
    stack: list[int] = []  # the open branch of each open group, innermost last
    segments: list[tuple[int, int, int | None]] = []
    pos, line_no = 0, 1
    for start, end, keyword, condition in directives:
        owner = stack[-1] if stack else None
        segments.append((pos, start, owner))
        if owner is not None and not drafts[owner][_OWN_CODE] and has_code(pos, start):
            drafts[owner][_OWN_CODE] = True
        line_no += text.count(b"\n", pos, start)
        if keyword in _OPENING or (keyword in _CONTINUING and stack):
            if keyword in _CONTINUING:
                previous = drafts[stack.pop()]
                previous[_BODY_END] = start
                chain, position, parent = previous[1], previous[2] + 1, previous[3]
            else:
                chain, position = len(chains), 0
                parent = stack[-1] if stack else None
                chains.append([])
                if parent is not None:
                    drafts[parent][_CHILDREN].append(len(drafts))
            index = len(drafts)
            drafts.append([index, chain, position, parent, line_no, "#" + keyword, condition(), start, end, -1, False, []])
            chains[chain].append(index)
            stack.append(index)
        elif keyword == "endif" and stack:
            drafts[stack.pop()][_BODY_END] = start
        line_no += text.count(b"\n", start, end)
        pos = end
    owner = stack[-1] if stack else None
    segments.append((pos, len(text), owner))
    if owner is not None and not drafts[owner][_OWN_CODE] and has_code(pos, len(text)):
        drafts[owner][_OWN_CODE] = True
    for index in stack:
        drafts[index][_BODY_END] = len(text)
    return drafts, chains, segments


def _freeze(drafts: list[list]) -> list[Branch]:
    """The drafts as Branches; their tokens join later (Structure.with_hits)."""
    branches = []
    for index, chain, position, parent, line, directive, condition, start, body_start, body_end, code, children in drafts:
        branches.append(
            Branch(index, chain, position, parent, line, directive, condition, start, body_start, body_end, code, (), children)
        )
    return branches


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
    return tuple(_token_pattern(family, wrapper, pattern) for family, wrapper, pattern in instructions.TOKEN_PATTERNS)


def _token_pattern(family: instructions.TokenFamily, wrapper: bool, compiled: re.Pattern) -> _TokenPattern:
    """A family's regex (instructions.TOKEN_PATTERNS) as the search for it runs."""
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
