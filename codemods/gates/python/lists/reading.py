"""Reading a Python list of GPU archs: its entries, its style, what it admits, and the list a name stands for.

The one reader of arch lists: `python_arch_list` finds the lists with it
and widens them (from a stdlib `ast` parse), and `jit.specs`
reads a spec's `supported_major_versions` through `python_arch_list`. Majors
are integers below 20 (`[9, 10]`), capabilities integers from 20 (`[90,
120]`), strings one spelling (`["100", "103"]`, `["sm_100a"]`, `["12.0a"]`),
`(major, minor)` pairs (`{(9, 0), (10, 0)}`, a set too); anything else makes
the list unknown. `Names` follows a name given where a
list is expected to the literal it is assigned once at module level.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias, cast

from codemods.core.arch import Arch, ArchSet
from codemods.gates.python.layout.text import skip_trivia

# One string entry: a prefix, a capability (`120`) or `major.minor` (`12.0`), a variant suffix.
_ENTRY_RE = re.compile(r"^(?P<prefix>(?:sm|compute)_?|)(?:(?P<major>\d{1,2})\.(?P<minor>\d)|(?P<code>\d{1,3}))(?P<suffix>[af]?)$")
# A string literal libcst and ast read alike: one token, no escapes, no prefix but r/u.
_STRING_RE = re.compile(r"""^[rRuU]?(?:'([^'\\\n]*)'|"([^"\\\n]*)")$""")


@dataclass(frozen=True)
class Style:
    """How a list spells its entries."""

    kind: str  # "majors", "capabilities", "strings" or "pairs"
    majors_only: bool = False  # strings: `"9"`, `"10"`
    prefix: str = ""
    dotted: bool = False  # strings: `12.0` rather than `120`
    suffix: str = ""
    quote: str = '"'
    comma: str = ", "  # pairs: what stands between major and minor, `(9, 0)`

    def spell(self, major: int, minor: int | None) -> str:
        if self.kind == "majors":
            return str(major)
        if self.kind == "capabilities":
            assert minor is not None, "a capability spells a minor"
            return str(major * 10 + minor)
        if self.kind == "pairs":
            assert minor is not None, "a pair spells a minor"
            return f"({major}{self.comma}{minor})"
        if self.majors_only:
            body = str(major)
        else:
            assert minor is not None, "a per-minor string spells a minor"
            body = f"{major}.{minor}" if self.dotted else str(major * 10 + minor)
        return f"{self.quote}{self.prefix}{body}{self.suffix}{self.quote}"


Value = tuple[int, "int | None"]  # (major, minor); minor None for a whole major


@dataclass(frozen=True)
class Pair:
    """A `(major, minor)` tuple of two integer literals, and what stands between them."""

    major: int
    minor: int
    comma: str


Entry: TypeAlias = "int | tuple[str, str] | Pair | None"  # an int literal, a string's (quote, body), a pair, or anything else


@dataclass(frozen=True)
class Listed:
    """A list's entries read: its style (None when mixed or empty) and values, or unreadable."""

    values: tuple[Value, ...] | None  # None: some entry is not a literal of the style
    style: Style | None


def read_entries(entries: list[Entry], majors_default: bool) -> Listed:
    """Entries as ints, `(raw string text)` tuples, or None for anything else."""
    if any(entry is None for entry in entries):
        return Listed(None, None)
    if not entries:
        return Listed((), Style("majors") if majors_default else None)
    if all(type(entry) is int for entry in entries):
        ints = cast("list[int]", entries)  # the all() above checked each entry; mypy does not narrow through all()
        if all(0 < entry < 20 for entry in ints):
            return Listed(tuple((entry, None) for entry in ints), Style("majors"))
        if all(20 <= entry < 200 for entry in ints):
            return Listed(tuple(divmod(entry, 10) for entry in ints), Style("capabilities"))
        return Listed(None, None)
    if all(isinstance(entry, Pair) for entry in entries):
        pairs = cast("list[Pair]", entries)
        if not all(0 < pair.major < 20 and 0 <= pair.minor < 10 for pair in pairs):
            return Listed(None, None)
        return Listed(tuple((pair.major, pair.minor) for pair in pairs), Style("pairs", comma=pairs[0].comma))
    if not all(isinstance(entry, tuple) for entry in entries):
        return Listed(None, None)
    strings = cast("list[tuple[str, str]]", entries)  # as above: the all() checked each is a tuple
    matches = []
    for quote, text in strings:
        match = _ENTRY_RE.match(text)
        if match is None:
            return Listed(None, None)
        matches.append((quote, match))
    prefixes = {m.group("prefix") for _, m in matches}
    dotted = {m.group("major") is not None for _, m in matches}
    if len(prefixes) != 1 or len(dotted) != 1:
        return Listed(None, None)
    values: list[Value] = []
    for _, m in matches:
        if m.group("major") is not None:
            values.append((int(m.group("major")), int(m.group("minor"))))
        else:
            code = int(m.group("code"))
            values.append((code, None) if code < 20 else divmod(code, 10))
    if len({minor is None for _, minor in values}) != 1 or (values[0][1] is None and any(m.group("suffix") for _, m in matches)):
        return Listed(None, None)
    suffixes = {m.group("suffix") for _, m in matches}
    quotes = [quote for quote, _ in matches]
    style = Style(
        "strings",
        majors_only=values[0][1] is None,
        prefix=prefixes.pop(),
        dotted=dotted.pop(),
        suffix=next(iter(suffixes)) if len(suffixes) == 1 else "",
        quote=max(set(quotes), key=quotes.count),
    )
    return Listed(tuple(values), style if len(suffixes) == 1 else None)


def admits_of(listed: Listed, universe: tuple[Arch, ...]) -> ArchSet:
    if listed.values is None:
        return ArchSet(universe, frozenset(), frozenset(universe))
    return ArchSet(universe, frozenset(a for a in universe if _admitted(listed.values, a)))


def _admitted(values: tuple[Value, ...], arch: Arch) -> bool:
    return any(major == arch.major and minor in (None, arch.minor) for major, minor in values)


def majors_detail(listed: Listed) -> list[int] | None:
    """What jit_specs reads: the listed majors, None unless the list is integer majors."""
    if listed.values is None or listed.style is None or listed.style.kind != "majors":
        return None if listed.values != () else []
    return [major for major, _ in listed.values]


def _string_entry(text: str) -> tuple[str, str] | None:
    match = _STRING_RE.match(text)
    if match is None:
        return None
    body = match.group(1) if match.group(1) is not None else match.group(2)
    return (text[-1], body)


def _ast_pair(source: bytes, node: ast.Tuple, offset) -> Pair | None:
    if len(node.elts) != 2 or not all(isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts):
        return None
    first, second = cast("list[ast.Constant]", node.elts)
    between = source[offset(first.end_lineno, first.end_col_offset) : offset(second.lineno, second.col_offset)].decode("utf-8")
    if between.strip() != ",":  # a comment, a line break or a parenthesis in the pair
        return None
    return Pair(cast(int, first.value), cast(int, second.value), between)


def ast_entries(source: bytes, node: ast.AST, offset) -> list[Entry] | None:
    if not isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return None
    entries: list[Entry] = []
    for element in node.elts:
        if isinstance(element, ast.Constant) and type(element.value) is int:
            entries.append(element.value)
        elif isinstance(element, ast.Constant) and type(element.value) is str:
            start, end = offset(element.lineno, element.col_offset), offset(element.end_lineno, element.end_col_offset)
            entries.append(_string_entry(source[start:end].decode("utf-8")))
        elif isinstance(element, ast.Tuple):
            entries.append(_ast_pair(source, element, offset))
        else:
            entries.append(None)
    return entries


# Where Python's tokenizer ends a line: a lone CR too (libcst counts it as no line end; byte offsets agree).
_LINE_END = re.compile(rb"\r\n|\r|\n")


class Lines:
    """Byte offsets in `source` of the stdlib `ast` positions (UTF-8 byte columns; line 1 starts after a BOM)."""

    def __init__(self, source: bytes) -> None:
        self.source = source
        bom = 3 if source.startswith(b"\xef\xbb\xbf") else 0
        self.starts = [bom] + [match.end() for match in _LINE_END.finditer(source)]

    def offset(self, line: int | None, column: int | None) -> int:
        # typeshed allows None for end positions, which ast.parse sets on every node it makes
        assert line is not None and column is not None
        return self.starts[line - 1] + column

    def span(self, node: ast.expr) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)


def outer_span(source: bytes, at: int | None, start: int, end: int) -> tuple[int, int]:
    """The span `start:end` widened to the parentheses written around it, reading on from `at`.

    libcst's outer span, which `widen` locates the list by: `=([9, 10])`
    keeps its parentheses. The bare span when anything else stands between.
    """
    if at is None:
        return start, end
    outer, opened = start, 0
    while (at := skip_trivia(source, at)) < start:
        if source[at : at + 1] != b"(":
            return start, end
        outer = min(outer, at)
        opened += 1
        at += 1
    if at != start:
        return start, end
    closed = end
    for _ in range(opened):
        closed = skip_trivia(source, closed)
        if source[closed : closed + 1] != b")":
            return start, end
        closed += 1
    return outer, closed


def past(source: bytes, at: int | None, token: bytes) -> int | None:
    """Just past the `token` (`,` `=`) after what ends at `at` (maybe inside parentheses); None if another stands there."""
    if at is None:
        return None
    while True:
        at = skip_trivia(source, at)
        if source[at : at + 1] == b")":
            at += 1
            continue
        return at + 1 if source[at : at + 1] == token else None


# Methods that change a list in place: a list changed after its assignment is not what its literal says.
_MUTATORS = frozenset({"append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse"})


class Names:
    """The module-level list literals that a selected argument's name stands for.

    `@supported_compute_capability(_HASH_TOPK_SUPPORTED_CC)` with
    `_HASH_TOPK_SUPPORTED_CC = [80, 86, 100]` at module level is the gate
    `[80, 86, 100]`: widening it widens every use of the name, as upstream
    does. Followed only when the file binds the name once, in any scope, by
    `NAME = [...]` or `NAME: T = [...]` (a list or tuple literal) directly at
    module level, and never changes it in place (`NAME.append(...)`,
    `NAME[0] = ...`, `NAME += ...`) nor may rebind it by a later `import *`;
    otherwise the reason, which `widen` refuses with.
    """

    def __init__(self, tree: ast.Module, lines: Lines, left_out: Sequence[tuple[int, bytes]] = ()) -> None:
        self.tree = tree
        self.lines = lines
        self.left_out = left_out  # top-level statements Python's parser rejects, not in `tree`
        self._followed: dict[str, tuple[ast.expr, tuple[int, int]] | str] = {}

    def follow(self, name: str) -> tuple[ast.expr, tuple[int, int]] | str:
        """The literal and its outer span, or why the name cannot be followed."""
        if name not in self._followed:
            self._followed[name] = self._follow(name)
        return self._followed[name]

    def _follow(self, name: str) -> tuple[ast.expr, tuple[int, int]] | str:
        for line, piece in self.left_out:
            if name.encode() in piece:
                return f"line {line}, which Python's parser rejects, may bind it"
        bound, changed, star = _uses(self.tree, name)
        if not bound:
            return "it is not assigned in this file"
        if len(bound) > 1:
            return f"it is bound more than once in this file (lines {', '.join(map(str, sorted(bound)))})"
        assignment: tuple[ast.expr, ast.expr | None] | None = None  # what stands before the `=`, the value
        for statement in self.tree.body:
            if isinstance(statement, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == name for target in statement.targets
            ):
                assignment = statement.targets[-1], statement.value
            elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.target.id == name:
                assignment = statement.annotation, statement.value
        if assignment is None or assignment[1] is None:
            return f"it is bound at line {bound[0]} other than by `{name} = [...]` at module level"
        before, value = assignment
        if not isinstance(value, (ast.List, ast.Tuple)):
            return f"it is assigned a computed value at line {bound[0]}"
        if changed:
            return f"it is changed after its assignment (line {min(changed)})"
        later = [line for line in star if line > bound[0]]
        if later:
            return f"`from ... import *` at line {later[0]} may rebind it"
        source = self.lines.source
        at = past(source, self.lines.offset(before.end_lineno, before.end_col_offset), b"=")
        return value, outer_span(source, at, *self.lines.span(value))


def _uses(tree: ast.Module, name: str) -> tuple[list[int], list[int], list[int]]:
    """The lines where `name` is bound (any scope), changed in place, and where `import *` stands."""
    bound: list[int] = []
    changed: list[int] = []
    star: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id == name and not isinstance(node.ctx, ast.Load):
                bound.append(node.lineno)
        elif isinstance(node, ast.arg):
            if node.arg == name:
                bound.append(node.lineno)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                bound.append(node.lineno)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    star.append(node.lineno)
                elif (alias.asname or alias.name.split(".")[0]) == name:
                    bound.append(node.lineno)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
            if node.name == name:
                bound.append(node.lineno)
        elif isinstance(node, ast.MatchMapping):
            if node.rest == name:
                bound.append(node.lineno)
        elif isinstance(node, ast.Subscript):
            if isinstance(node.value, ast.Name) and node.value.id == name and not isinstance(node.ctx, ast.Load):
                changed.append(node.lineno)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == name and func.attr in _MUTATORS:
                changed.append(node.lineno)
    return bound, changed, star
