"""A changed file's `#if` branches before and after, and the evaluator that judges guard conditions without nvcc.

The branches are codemods.cpp's one `#if` structure (`structure.structure`);
this module adds each branch's line span and the `cuda_guard` gate that
decides it, tells which branches a change made active (gained) or inactive
(lost) on an arch, and maps a line back to the guard that holds it. The
evaluator refuses a file with any change outside arch guards.
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from codemods.core.arch import Arch
from codemods.cpp import structure
from codemods.cpp.structure import Branch, Structure
from codemods.gates import Gate, SourceError
from codemods.gates.cpp import cuda_guard
from codemods.prove.results import TEXT_LINES, Region, Verdict

_CONDITIONAL_LINE_RE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b")


@dataclass(frozen=True)
class Span:
    """A branch's lines: its body's first line and the line of the next directive of its chain (1-based)."""

    body: int
    end: int


@dataclass
class FileSide:
    """One version of a changed file: its lines, its `#if` branches with their spans, and its arch gates."""

    source: bytes
    lines: list[str]
    branches: list[Branch] | None  # None when the file cannot be read or its #if and #endif do not balance
    spans: list[Span]  # per branch
    chains: Sequence[Sequence[int]]  # branch indices of each #if/#elif/#else chain
    gates: dict[int, Gate]  # by directive line
    error: str = ""

    @classmethod
    def read(cls, source: bytes, universe: tuple[Arch, ...]) -> FileSide:
        try:
            gates = cuda_guard.find(source, universe)
        except SourceError as exc:
            return cls(source, [], None, [], [], {}, str(exc))
        text = source.decode("utf-8")
        shape: Structure = structure.structure(source)
        lines = text.split("\n")
        if any(branch.body_end == len(source) for branch in shape.branches):
            return cls(source, lines, None, [], [], {}, "#if and #endif do not balance")
        newlines = [match.start() for match in re.finditer(b"\n", source)]

        def line_of(offset: int) -> int:
            return bisect.bisect_left(newlines, offset) + 1

        spans = [Span(line_of(branch.body_start), line_of(branch.body_end)) for branch in shape.branches]
        return cls(source, lines, list(shape.branches), spans, shape.chains, {gate.line: gate for gate in gates})

    @property
    def read_branches(self) -> list[Branch]:
        """The branches of a side that was read: callers look at `error` (or `FilePair.problem`) first."""
        assert self.branches is not None, self.error
        return self.branches

    def gate(self, branch: Branch) -> Gate | None:
        return self.gates.get(branch.line) if branch.directive != "#else" else None

    def previous(self, index: int) -> int:
        """The branch before this one in its chain, -1 for the `#if`."""
        branch = self.read_branches[index]
        return self.chains[branch.chain][branch.position - 1] if branch.position else -1

    def possible(self, arch: Arch) -> set[int]:
        """Branches that may be active on `arch`; a condition naming other macros may go either way."""
        truths = []
        for branch in self.read_branches:
            gate = self.gate(branch)
            truths.append(True if branch.directive == "#else" else gate.admits.admits(arch) if gate else None)
        possible: set[int] = set()
        for index, branch in enumerate(self.read_branches):
            reached = branch.parent is None or branch.parent in possible
            earlier = self.previous(index)
            while reached and earlier != -1:
                reached = truths[earlier] is not True
                earlier = self.previous(earlier)
            if reached and truths[index] is not False:
                possible.add(index)
        return possible

    def region(self, path: str, index: int) -> Region:
        branch, span = self.read_branches[index], self.spans[index]
        gate = self.gate(branch)
        body = [line.strip() for line in self.lines[span.body - 1 : span.end - 1]]
        body = [line for line in body if line and not _CONDITIONAL_LINE_RE.match(line)]
        return Region(path, branch.line, "\n".join(body[:TEXT_LINES]), gate.text if gate else "", "\n".join(body))

    def innermost(self, line: int, among: set[int]) -> int | None:
        inside = [i for i in among if self.spans[i].body <= line < self.spans[i].end]
        return max(inside, key=lambda i: self.spans[i].body, default=None)

    def deciding(self, lines: set[int]) -> list[int]:
        """The branches whose conditions decide whether any of `lines` is compiled.

        Those holding a line (from their directive to the next directive of
        their chain) and, for each, the branches before it in its chain.
        """
        found: set[int] = set()
        for index, branch in enumerate(self.branches or []):
            if any(branch.line <= line < self.spans[index].end for line in lines):
                while index != -1 and index not in found:
                    found.add(index)
                    index = self.previous(index)
        return sorted(found)


@dataclass
class FilePair:
    """A changed file's base and work versions, and the branches a change flips per arch."""

    path: str
    base: FileSide
    work: FileSide
    _flips: dict = field(default_factory=dict)
    _lines: tuple[set[int], set[int]] | None = None

    @classmethod
    def read(cls, path: str, base: bytes, work: bytes, universe: tuple[Arch, ...]) -> FilePair:
        return cls(path, FileSide.read(base, universe), FileSide.read(work, universe))

    def problem(self) -> str:
        """Why the evaluator cannot judge this pair, or ""."""
        for side in (self.base, self.work):
            if side.error:
                return f"{self.path}: {side.error}"
        if [(b.directive) for b in self.base.read_branches] != [(b.directive) for b in self.work.read_branches]:
            return f"{self.path}: the #if structure changed; the evaluator judges guard conditions only"
        if _skeleton(self.base) != _skeleton(self.work):
            return f"{self.path}: changes outside arch guards; the evaluator judges guard conditions only"
        return ""

    def changed_lines(self) -> tuple[set[int], set[int]]:
        """1-based lines only the base has, and lines only the work version has."""
        if self._lines is None:
            matcher = difflib.SequenceMatcher(None, self.base.lines, self.work.lines, autojunk=False)
            base: set[int] = set()
            work: set[int] = set()
            for op, i1, i2, j1, j2 in matcher.get_opcodes():
                if op != "equal":
                    base.update(range(i1 + 1, i2 + 1))
                    work.update(range(j1 + 1, j2 + 1))
            self._lines = (base, work)
        return self._lines

    def flips(self, arch: Arch) -> tuple[set[int], set[int], str]:
        """Branch indices gained and lost on `arch`, and why they cannot be told ("" when they can)."""
        if arch not in self._flips:
            self._flips[arch] = self._find_flips(arch)
        return self._flips[arch]

    def _find_flips(self, arch: Arch) -> tuple[set[int], set[int], str]:
        problem = self.problem()
        if problem:
            return set(), set(), problem
        for before, after in zip(self.base.read_branches, self.work.read_branches):
            old, new = self.base.gate(before), self.work.gate(after)
            if (old.text if old else None) == (new.text if new else None):
                continue
            for side, gate in (("base", old), ("work", new)):
                if gate is not None and gate.admits.admits(arch) is None:
                    return set(), set(), (
                        f"{self.path}:{gate.line}: cannot evaluate `{gate.text}` on {arch.name} ({side})"
                    )
        possible_before, possible_after = self.base.possible(arch), self.work.possible(arch)
        return possible_after - possible_before, possible_before - possible_after, ""


def _skeleton(side: FileSide) -> bytes:
    """The source with every gate's condition cut out."""
    out, position = [], 0
    for gate in sorted(side.gates.values(), key=lambda g: g.start):
        out += [side.source[position : gate.start], b"\0"]
        position = gate.end
    return b"".join(out + [side.source[position:]])


def evaluate(structures: dict[str, FilePair], arch: Arch) -> Verdict:
    """The evaluator's verdict on `arch`: the branches each file's gates gained and lost there."""
    verdict = Verdict()
    for path, pair in structures.items():
        gained, lost, problem = pair.flips(arch)
        if problem:
            verdict.errors.append(problem)
            continue
        verdict.gained += [pair.work.region(path, i) for i in sorted(gained)]
        verdict.lost += [pair.base.region(path, i) for i in sorted(lost)]
    return verdict
