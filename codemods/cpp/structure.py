"""The one `#if` structure of a C, C++ or CUDA file: its conditional groups, their bodies, per-arch verdicts.

`structure(source)` finds every `#if`/`#elif`/`#else` branch with its body,
nesting, whether the body holds code and which instruction-family tokens
(`instructions.TOKEN_FAMILIES`) it holds. Branch conditions are evaluated per
arch with `evaluate.evaluate` (true, false or unknown). Comments are ignored
(masked); string literals are kept, since inline PTX lives in them.

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
from codemods.cpp.evaluate import evaluate
from codemods.cpp.instructions import PREFIXED_PATTERNS, Hit, TokenFamily
from codemods.cpp.lexer import continues, logical_end, mask_comments, one_line

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
    masked = mask_comments(source)

    def directives():
        for match in _DIRECTIVE_LINE_RE.finditer(masked):
            start = match.start()
            if start > 0 and continues(masked, start):
                continue  # the line is the tail of a continued line, not a directive
            end = logical_end(masked, match.end())
            yield start, end, match.group(1).decode(), lambda head=match.end(), end=end: _condition(masked[head:end])

    drafts, chains, segments = _group(directives(), masked, lambda a, b: _has_code(masked, a, b))
    top, hits = _collect_hits(masked, segments)
    return Structure(_freeze(drafts, hits), chains, top)


def _condition(text: bytes) -> str:
    return one_line(text.decode("utf-8", "replace"))


def assemble(directives, text: bytes, has_code: Callable[[int, int], bool]):
    """Group directive lines into #if/#elif/#else chains: (branches, chains, segments).

    `directives` yields `(start, end, keyword, condition)` in source order,
    `condition()` giving the directive's condition text on demand; `text` is
    the source (for line numbers); `has_code(start, end)` says whether a
    stretch between directives holds code. Segments are `(start, end,
    innermost open branch)` for the stretches between directives.
    """
    drafts, chains, segments = _group(directives, text, has_code)
    return _freeze(drafts, {}), chains, segments


# A draft is a branch's fields in Branch order but hits; these three are filled in as its group goes on.
_BODY_END, _OWN_CODE, _CHILDREN = 9, 10, 11


def _group(directives, text: bytes, has_code: Callable[[int, int], bool]):
    """assemble() with each branch still a draft (a list), so that hits can join it before it is frozen."""
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


def _freeze(drafts: list[list], hits: dict[int, list[Hit]]) -> list[Branch]:
    return [Branch(*draft[:_CHILDREN], hits.get(draft[0], ()), draft[_CHILDREN]) for draft in drafts]


# Other directives (#define, #pragma, #error ...), with their continuation lines.
_OTHER_DIRECTIVE_RE = re.compile(rb"^[ \t\f\v]*#(?:[^\n]*\\\r?\n)*[^\n]*", re.MULTILINE)


def _has_code(masked: bytes, start: int, end: int) -> bool:
    """Whether `masked[start:end]` (whole lines) holds anything but blanks and directives."""
    return bool(_OTHER_DIRECTIVE_RE.sub(b"", masked[start:end]).strip())


_DIRECTIVE_LINE_RE = re.compile(
    rb"^[ \t\f\v]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b", re.MULTILINE | re.ASCII
)


def _collect_hits(
    masked: bytes, segments: list[tuple[int, int, int | None]]
) -> tuple[list[Hit], dict[int, list[Hit]]]:
    """Each family token, at file level or in the body of the innermost branch around it: (top, by branch).

    Tokens in directives do not count. A pattern whose literal start is not
    in the file is not run (most files hold no token of most families).
    """
    starts = [segment[0] for segment in segments]
    line_starts: list[int] | None = None
    top: list[Hit] = []
    hits: dict[int, list[Hit]] = {}
    for family, wrapper, pattern, prefix in PREFIXED_PATTERNS:
        if prefix not in masked:
            continue
        named = "token" in pattern.groupindex
        for match in pattern.finditer(masked):
            at = match.start("token") if named else match.start()
            i = bisect.bisect_right(starts, at) - 1
            if i < 0:
                continue
            _, seg_end, owner = segments[i]
            if at >= seg_end:
                continue  # inside a directive
            if line_starts is None:
                line_starts = [0] + [m.end() for m in re.finditer(rb"\n", masked)]
            token = (match.group("token") if named else match.group()).decode("utf-8", "replace")
            hit = Hit(family.name, token, bisect.bisect_right(line_starts, at), wrapper)
            (top if owner is None else hits.setdefault(owner, [])).append(hit)
    for found in hits.values():
        found.sort(key=_line)
    top.sort(key=_line)
    return top, hits
