"""What breaks when a guarded CUDA region is compiled for an arch: the `#if` structure, the instructions it lacks.

Two pure pieces, over source bytes:

- `TOKEN_FAMILIES`, the table of instructions and wrapper names that ptxas
  rejects on some archs (shared ARCH_FACTS section 3 A, and the reverse
  direction of section 3 B). Each family says which majors have it; on
  every other major its tokens are *blockers*: widening a guard over them
  to that arch breaks the build.
- `structure(source)`, the preprocessor conditional structure of a file:
  every `#if`/`#elif`/`#else` branch with its body, nesting, whether the
  body holds code and which family tokens it holds. Branch conditions are
  evaluated per arch with `cuda_guard.evaluate` (true, false or unknown).

Comments are ignored (masked); string literals are kept, since inline PTX
lives in them. `blockers_for(source, gate, arch)` is what a planner asks
before widening `gate` to `arch`. Nothing here reads files.
"""

from __future__ import annotations

import bisect
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from codemods.core.arch import Arch, is_arch_macro
from codemods.gates import Gate, cuda_guard


@dataclass(frozen=True)
class TokenFamily:
    """Instructions (and the wrapper names that emit them) only some majors have."""

    name: str
    majors: frozenset[int]  # the arch majors that have them; every other major lacks them
    instructions: tuple[str, ...]  # regexes for what ptxas rejects; group `token` (or all) is reported
    wrappers: tuple[str, ...]  # regexes for CuTe/CUTLASS names that emit them (may compile to a trap instead)
    reason: str

    def lacked_by(self, arch: Arch) -> bool:
        return arch.major not in self.majors


# ARCH_FACTS section 3 A: fails on every SM120/121 variant; section 2: wgmma needs exactly
# sm_90a, tcgen05 and 2-SM TMA exist on sm_100/103/110 only, block-scaled mma.sync on
# sm_120/121 only. Section 3 C: the CuTe wrappers compile to CUTE_INVALID_CONTROL_PATH
# (a trap at run time) where the instruction is missing, cuda::ptx::tcgen05_* fails in ptxas.
TOKEN_FAMILIES: tuple[TokenFamily, ...] = (
    TokenFamily(
        "wgmma",
        frozenset({9}),
        (r"\bwgmma\.[a-z_]+",),
        (r"\bSM90::GMMA\b", r"\bwarpgroup_(?:arrive|wait|commit_batch)\b", r"\bMMA_64x\d+"),
        "wgmma exists only on sm_90a; ptxas rejects it on every other target (ARCH_FACTS §2, §3A)",
    ),
    TokenFamily(
        "tcgen05",
        frozenset({10, 11}),
        (r"\btcgen05\.[a-z_]+", r"\bcuda::ptx::tcgen05_\w+"),
        (r"\bTMEM(?:::\w+)?\b", r"\btmem_\w+", r"\bUMMA\b", r"\bSM100_(?:MMA|TMEM|UTCCP)_\w*"),
        "tcgen05/TMEM exists only on sm_100/103/110 (a/f targets); ptxas rejects it elsewhere (ARCH_FACTS §2, §3A)",
    ),
    TokenFamily(
        "cta_group",
        frozenset({10, 11}),
        (r"\.cta_group::[12]",),
        (r"\bSM100_TMA_2SM_\w*",),
        "2-SM TMA (.cta_group::N) exists only on sm_100/103/110 (a/f targets) (ARCH_FACTS §2, §3A)",
    ),
    TokenFamily(
        "block-scaled mma.sync",
        frozenset({12}),
        (
            r"\bmma\.sync[^;]{0,200}?(?P<token>kind::(?:mxf8f6f4|mxf4nvf4|mxf4|f8f6f4))",
            r"\bmma\.sync[^;]{0,200}?(?P<token>\.block_scale)\b",
        ),
        (),
        "mma.sync kind::*/block_scale exists only on sm_120/121 (a/f targets); sm_100/103/110 do "
        "block-scaled MMA through tcgen05 (ARCH_FACTS §2, §3B)",
    ),
)

_COMPILED = tuple(
    (family, wrapper, re.compile(pattern.encode()))
    for family in TOKEN_FAMILIES
    for wrapper, patterns in ((False, family.instructions), (True, family.wrappers))
    for pattern in patterns
)
_FAMILY = {family.name: family for family in TOKEN_FAMILIES}


def literal_prefix(pattern: bytes) -> bytes:
    """The literal bytes a regex starts with (after `\\b`), for a cheap search before the regex."""
    out = bytearray()
    i = 2 if pattern.startswith(rb"\b") else 0
    while i < len(pattern):
        c = pattern[i : i + 1]
        if c == b"\\" and i + 1 < len(pattern) and pattern[i + 1 : i + 2] in b".:-_":
            out += pattern[i + 1 : i + 2]
            i += 2
        elif c.isalnum() or c in b"_:":
            out += c
            i += 1
        else:
            break
    # a quantifier after the last literal makes it optional
    if i < len(pattern) and pattern[i : i + 1] in b"?*{" and out:
        out = out[:-1]
    return bytes(out)


_PREFIXED = tuple((family, wrapper, pattern, literal_prefix(pattern.pattern)) for family, wrapper, pattern in _COMPILED)


def may_hold(data: bytes, families: tuple[TokenFamily, ...], *, instructions: bool = False) -> bool:
    """Whether `data` may hold a token of `families` (a byte search for each pattern's literal start).

    With `instructions`, wrapper names do not count.
    """
    names = {family.name for family in families}
    return any(
        family.name in names and prefix in data and not (instructions and wrapper)
        for family, wrapper, _, prefix in _PREFIXED
    )


def family_reason(name: str) -> str:
    """Why the family's tokens break a build (its row of TOKEN_FAMILIES)."""
    return _FAMILY[name].reason


def lacking(arch: Arch) -> tuple[TokenFamily, ...]:
    """The token families `arch` lacks."""
    return tuple(family for family in TOKEN_FAMILIES if family.lacked_by(arch))


def jit_target(arch: Arch, *, all_specific: bool = False) -> Arch:
    """The target FlashInfer's JIT compiles for a GPU of `arch` (ARCH_FACTS section 1).

    Newer FlashInfer: 9.x -> `a`, 10.x and 11.x -> `a`, 12.0 -> `120f`,
    12.1 -> `121a`. FlashInfer up to 0.6.x appends `a` to every major >= 9
    (`all_specific`). Older archs build plain.
    """
    if arch.major < 9:
        return arch.plain
    if all_specific or arch.major in (9, 10, 11) or arch.minor != 0:
        return Arch(arch.major, arch.minor, "a")
    return Arch(arch.major, arch.minor, "f")


# ---------------------------------------------------------------- the #if structure

_LEXEME_RE = re.compile(
    rb"""
      (?P<comment>/\*.*?(?:\*/|\Z) | //(?:\\\r?\n|[^\n])*)
    | "(?:\\.|[^"\\\n])*"
    | '(?:\\.|[^'\\\n])*'
    """,
    re.VERBOSE | re.DOTALL,
)
_NOT_NEWLINE_RE = re.compile(rb"[^\n]")
_CONTINUATION_RE = re.compile(rb"\\[ \t]*\r?\n")
_INCLUDE_RE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)', re.MULTILINE)
_OPENING = {"if", "ifdef", "ifndef"}
_CONTINUING = {"elif", "elifdef", "elifndef", "else"}


def mask_comments(source: bytes) -> bytes:
    """`source` with every comment byte but newlines turned into a space; offsets are kept."""

    def mask(match: re.Match) -> bytes:
        text = match.group()
        return _NOT_NEWLINE_RE.sub(b" ", text) if match.group("comment") else text

    return _LEXEME_RE.sub(mask, source)


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


@dataclass(frozen=True)
class Hit:
    family: str
    token: str
    line: int
    wrapper: bool = False  # a CuTe/CUTLASS name, not the instruction itself


@dataclass
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
    hits: list[Hit] = field(default_factory=list)  # family tokens directly in the body
    children: list[int] = field(default_factory=list)  # first branch of each group nested in the body

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

    def __init__(self, branches: list[Branch], chains: list[list[int]], top: list[Hit] | None = None) -> None:
        self.branches = branches
        self.chains = chains
        self.top = top if top is not None else []  # family tokens outside every conditional group
        self._starts = [branch.start for branch in branches]
        self._own: dict[tuple[int, Arch], bool | None] = {}
        self._code: dict[int, bool] = {}
        self._selecting: dict[int, int | None] = {}

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
        return cuda_guard.evaluate(condition, macros)
    name = condition.strip()
    if not is_arch_macro(name):
        return None
    defined = name in macros
    return defined if directive in ("#ifdef", "#elifdef") else not defined


@lru_cache(maxsize=16)
def structure(source: bytes) -> Structure:
    """The conditional groups of `source` (bytes of a C, C++ or CUDA file)."""
    masked = mask_comments(source)

    def directives():
        for match in _DIRECTIVE_LINE_RE.finditer(masked):
            start = match.start()
            if start > 0 and _continues(masked, start):
                continue  # the line is the tail of a continued line, not a directive
            end = _logical_end(masked, match.end())
            yield start, end, match.group(1).decode(), lambda head=match.end(), end=end: _condition(masked[head:end])

    branches, chains, segments = assemble(directives(), masked, lambda a, b: _has_code(masked, a, b))
    top = _collect_hits(masked, branches, segments)
    return Structure(branches, chains, top)


def _condition(text: bytes) -> str:
    return " ".join(_CONTINUATION_RE.sub(b" ", text).decode("utf-8", "replace").split())


def assemble(directives, text: bytes, has_code: Callable[[int, int], bool]):
    """Group directive lines into #if/#elif/#else chains: (branches, chains, segments).

    `directives` yields `(start, end, keyword, condition)` in source order,
    `condition()` giving the directive's condition text on demand; `text` is
    the source (for line numbers); `has_code(start, end)` says whether a
    stretch between directives holds code. Segments are `(start, end,
    innermost open branch)` for the stretches between directives.
    """
    branches: list[Branch] = []
    chains: list[list[int]] = []
    stack: list[int] = []  # the open branch of each open group, innermost last
    segments: list[tuple[int, int, int | None]] = []
    pos, line_no = 0, 1
    for start, end, keyword, condition in directives:
        owner = stack[-1] if stack else None
        segments.append((pos, start, owner))
        if owner is not None and not branches[owner].own_code and has_code(pos, start):
            branches[owner].own_code = True
        line_no += text.count(b"\n", pos, start)
        if keyword in _OPENING or (keyword in _CONTINUING and stack):
            if keyword in _CONTINUING:
                previous = branches[stack.pop()]
                previous.body_end = start
                chain, position, parent = previous.chain, previous.position + 1, previous.parent
            else:
                chain, position = len(chains), 0
                parent = stack[-1] if stack else None
                chains.append([])
                if parent is not None:
                    branches[parent].children.append(len(branches))
            branch = Branch(
                index=len(branches),
                chain=chain,
                position=position,
                parent=parent,
                line=line_no,
                directive="#" + keyword,
                condition=condition(),
                start=start,
                body_start=end,
            )
            chains[chain].append(branch.index)
            branches.append(branch)
            stack.append(branch.index)
        elif keyword == "endif" and stack:
            branches[stack.pop()].body_end = start
        line_no += text.count(b"\n", start, end)
        pos = end
    owner = stack[-1] if stack else None
    segments.append((pos, len(text), owner))
    if owner is not None and not branches[owner].own_code and has_code(pos, len(text)):
        branches[owner].own_code = True
    for index in stack:
        branches[index].body_end = len(text)
    return branches, chains, segments


# Other directives (#define, #pragma, #error ...), with their continuation lines.
_OTHER_DIRECTIVE_RE = re.compile(rb"^[ \t\f\v]*#(?:[^\n]*\\\r?\n)*[^\n]*", re.MULTILINE)


def _has_code(masked: bytes, start: int, end: int) -> bool:
    """Whether `masked[start:end]` (whole lines) holds anything but blanks and directives."""
    return bool(_OTHER_DIRECTIVE_RE.sub(b"", masked[start:end]).strip())


_DIRECTIVE_LINE_RE = re.compile(
    rb"^[ \t\f\v]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b", re.MULTILINE | re.ASCII
)


def _continues(masked: bytes, start: int) -> bool:
    """Whether the line before `start` ends with a continuation backslash."""
    end = start - 2  # the byte before that line's newline
    if end >= 0 and masked[end] == ord("\r"):
        end -= 1
    return end >= 0 and masked[end] == ord("\\")


def _logical_end(masked: bytes, pos: int) -> int:
    """Offset just past the newline that ends the logical line holding `pos` (end of file if none)."""
    while True:
        newline = masked.find(b"\n", pos)
        if newline < 0:
            return len(masked)
        if masked[pos:newline].rstrip(b"\r").endswith(b"\\"):
            pos = newline + 1
            continue
        return newline + 1


def _collect_hits(masked: bytes, branches: list[Branch], segments: list[tuple[int, int, int | None]]) -> list[Hit]:
    """Put each family token in the body of the innermost branch around it; return those outside every branch.

    Tokens in directives do not count. A pattern whose literal start is not
    in the file is not run (most files hold no token of most families).
    """
    starts = [segment[0] for segment in segments]
    line_starts: list[int] | None = None
    top: list[Hit] = []
    for family, wrapper, pattern, prefix in _PREFIXED:
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
            (top if owner is None else branches[owner].hits).append(hit)
    for branch in branches:
        branch.hits.sort(key=lambda hit: hit.line)
    top.sort(key=lambda hit: hit.line)
    return top


def blockers_for(source: bytes, gate: Gate, arch: Arch) -> list[str]:
    """Why widening the cuda_guard `gate` to `arch` would break the build: one line per distinct token.

    Scans the body the gate guards (up to its `#elif`/`#else`/`#endif`),
    minus nested branches that `arch` would still not take, for tokens of the
    families `arch` lacks. `[]` when nothing blocks (or the gate is no
    directive of this source).
    """
    shape = structure(source)
    branch = shape.at(gate.start)
    if branch is None:
        branch = shape.at_line(gate.line)
    if branch is None:
        return []
    return describe(shape.region_hits(branch, arch, lacking(arch)), arch)


def describe(hits: list[Hit], arch: Arch) -> list[str]:
    """One message per distinct token, at its first line."""
    seen: dict[str, Hit] = {}
    for hit in hits:
        seen.setdefault(hit.token, hit)
    return [f"{hit.token} (line {hit.line}): {_FAMILY[hit.family].reason}; not on {arch.name}" for hit in seen.values()]


def tokens(hits: list[Hit]) -> list[str]:
    """The distinct tokens of `hits`, in order of first appearance."""
    return list(dict.fromkeys(hit.token for hit in hits))


# ---------------------------------------------------------------- what a target compiles

# CUTLASS/CuTe feature switches (cute/arch/config.hpp, cutlass/arch/config.h) are defined only for the
# targets that have the instructions they guard; elsewhere the #else is CUTE_INVALID_CONTROL_PATH, whose
# message names the instruction (ARCH_FACTS §3C). A group such a switch opens is the library choosing
# per arch itself: none of its branches counts.
FEATURE_SWITCH_RE = re.compile(r"\b(?:CUTE|CUTLASS)_ARCH_\w*ENABLED\b")


def _switched(shape: Structure, branch: Branch) -> bool:
    """Whether the branch's group is opened by a CUTLASS/CuTe feature switch (or its negation)."""
    opening = shape.group(branch)[0]
    return bool(FEATURE_SWITCH_RE.search(opening.condition))


def compiled(
    shape: Structure, target: Arch, families: tuple[TokenFamily, ...], *, definitions: bool = False
) -> tuple[list[tuple[Hit, Branch | None]], list[tuple[Hit, Branch]]]:
    """Family tokens of a whole file that `target` compiles: (surely, and under a guard that may or may not admit it).

    Each sure token comes with the innermost guard that tells archs apart and
    admits `target` around it (None: no arch guard, e.g. at file level); each
    undecided one with the guard that cannot be decided. A branch `target`
    does not take is skipped with everything in it, and so is every branch of
    a group a CUTLASS/CuTe feature switch opens. A branch whose condition
    names no arch macro (an include guard, `#ifndef ONLY_SOFTMAX`) is taken as
    compiled; one that tells archs apart but cannot be decided for `target`
    (other macros too) makes its tokens undecided. With `definitions` (a
    library such as CUTLASS, whose headers define the wrappers rather than use
    them) wrapper names do not count, only instructions.
    """
    names = {family.name for family in families}

    def wanted(hits: list[Hit]) -> list[Hit]:
        return [hit for hit in hits if hit.family in names and not (definitions and hit.wrapper)]

    sure: list[tuple[Hit, Branch | None]] = [(hit, None) for hit in wanted(shape.top)]
    unsure: list[tuple[Hit, Branch]] = []

    def walk(branch: Branch, guard: Branch | None, undecided: bool) -> None:
        taken = shape.taken(branch, target)
        if taken is False or _switched(shape, branch):
            return
        if shape.arch_selected(branch) and not undecided:
            guard, undecided = branch, taken is None
        if undecided:
            unsure.extend((hit, guard) for hit in wanted(branch.hits))
        else:
            sure.extend((hit, guard) for hit in wanted(branch.hits))
        for child in branch.children:
            for member in shape.group(shape.branches[child]):
                walk(member, guard, undecided)

    for branch in shape.branches:
        if branch.parent is None:
            walk(branch, None, False)
    sure.sort(key=lambda pair: pair[0].line)
    unsure.sort(key=lambda pair: pair[0].line)
    return sure, unsure


# ---------------------------------------------------------------- include closures


@dataclass
class Closure:
    """The files one JIT spec compiles, and what could not be followed."""

    files: list[str]  # its sources and every file they include inside the tree, sources first
    missing: list[str]  # named sources that are not in the tree
    unresolved: list[tuple[str, str]]  # (including file, include) of FOLLOWED_INCLUDES found nowhere
    library: set[str] = field(default_factory=set)  # files found only through a library dir (CUTLASS)


# First components of includes a closure must follow: FlashInfer's own headers and CUTLASS/CuTe,
# where the arch-specific atoms and instructions live. Others (<cuda_runtime.h>, <vector>, <torch/...>)
# are the toolkit's or the system's.
FOLLOWED_INCLUDES = ("flashinfer", "cutlass", "cute")


class Closures:
    """Resolve JIT spec sources and follow their `#include`s inside a tree, caching per file.

    `exists(rel)` says whether a tree-relative path is a file of the tree,
    `read(rel)` gives its bytes (OSError when it cannot). Quoted includes are
    looked up in the including file's folder first, then, like angled ones,
    in the include root, the csrc folder, the spec's include dirs and the
    library dirs (CUTLASS's include folders). No I/O of its own.
    """

    def __init__(
        self,
        csrc: str,
        include: str,
        exists: Callable[[str], bool],
        read: Callable[[str], bytes],
        libraries: tuple[str, ...] = (),
        parse: Callable[[bytes], list[tuple[str, bool]]] = includes,
    ) -> None:
        self.csrc, self.include, self.libraries = csrc, include, tuple(libraries)
        self.exists = exists
        self._read, self._parse = read, parse
        self._includes: dict[str, list[tuple[str, bool]]] = {}
        self._resolved: dict[tuple, str | None] = {}  # (including folder for "", path, dirs) -> file

    def place(self, root_name: str, path: str) -> str:
        base = self.csrc if root_name == "csrc" else self.include
        return posixpath.normpath(posixpath.join(base, path))

    def closure(self, spec, *, libraries: bool = True) -> Closure:
        """The files `spec` (a jit_specs.JitSpec) compiles and includes, and what could not be followed.

        Without `libraries`, includes are not looked up in the library dirs.
        """
        dirs = [self.include, self.csrc] + [self.place(*d) for d in spec.include_dirs]
        all_dirs = dirs + list(self.libraries if libraries else ())
        queue, missing = [], []
        for source in spec.sources:
            rel = self.place(*source)
            (queue if self.exists(rel) else missing).append(rel)
        seen = dict.fromkeys(queue)
        unresolved: dict[tuple[str, str], None] = {}
        library: set[str] = set()
        key_dirs = tuple(all_dirs)
        while queue:
            current = queue.pop()
            for path, quoted in self.includes_of(current):
                here = posixpath.dirname(current) if quoted else None
                key = (here, path, key_dirs)
                if key not in self._resolved:
                    self._resolved[key] = None
                    for folder in ([here] if quoted else []) + all_dirs:
                        rel = posixpath.normpath(posixpath.join(folder, path))
                        if self.exists(rel):
                            self._resolved[key] = rel
                            break
                rel = self._resolved[key]
                if rel is None:
                    if path.split("/", 1)[0] in FOLLOWED_INCLUDES:
                        unresolved.setdefault((current, path))
                    continue
                if rel not in seen:
                    seen[rel] = None
                    queue.append(rel)
                    if any(_under(rel, folder) for folder in self.libraries):
                        library.add(rel)
        return Closure(list(seen), missing, list(unresolved), library)

    def includes_of(self, rel: str) -> list[tuple[str, bool]]:
        if rel not in self._includes:
            try:
                self._includes[rel] = self._parse(self._read(rel))
            except OSError:
                self._includes[rel] = []
        return self._includes[rel]


def _under(rel: str, folder: str) -> bool:
    return rel == folder or rel.startswith(folder.rstrip("/") + "/")
