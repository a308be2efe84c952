"""Reading a Python list of GPU archs: its entries, its style, and what it admits.

The one reader of arch lists: `python_arch_list` finds and widens the lists
with it (from libcst or from a stdlib `ast` parse), and `jit.specs` reads a
spec's `supported_major_versions` through `python_arch_list`. Majors are
integers below 20 (`[9, 10]`), capabilities integers from 20 (`[90, 120]`),
strings one spelling (`["100", "103"]`, `["sm_100a"]`, `["12.0a"]`); anything
else makes the list unknown.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import TypeAlias, cast, overload

from typing import TYPE_CHECKING

from codemods.core.lazy import LazyModule

if TYPE_CHECKING:
    import libcst as cst
else:  # imported on first use: `codemod list` needs no libcst
    cst = LazyModule("libcst")

from codemods.core.arch import Arch, ArchSet

# One string entry: a prefix, a capability (`120`) or `major.minor` (`12.0`), a variant suffix.
_ENTRY_RE = re.compile(r"^(?P<prefix>(?:sm|compute)_?|)(?:(?P<major>\d{1,2})\.(?P<minor>\d)|(?P<code>\d{1,3}))(?P<suffix>[af]?)$")
# A string literal libcst and ast read alike: one token, no escapes, no prefix but r/u.
_STRING_RE = re.compile(r"""^[rRuU]?(?:'([^'\\\n]*)'|"([^"\\\n]*)")$""")


@dataclass(frozen=True)
class Style:
    """How a list spells its entries."""

    kind: str  # "majors", "capabilities" or "strings"
    majors_only: bool = False  # strings: `"9"`, `"10"`
    prefix: str = ""
    dotted: bool = False  # strings: `12.0` rather than `120`
    suffix: str = ""
    quote: str = '"'

    def spell(self, major: int, minor: int | None) -> str:
        if self.kind == "majors":
            return str(major)
        if self.kind == "capabilities":
            assert minor is not None, "a capability spells a minor"
            return str(major * 10 + minor)
        if self.majors_only:
            body = str(major)
        else:
            assert minor is not None, "a per-minor string spells a minor"
            body = f"{major}.{minor}" if self.dotted else str(major * 10 + minor)
        return f"{self.quote}{self.prefix}{body}{self.suffix}{self.quote}"


Value = tuple[int, "int | None"]  # (major, minor); minor None for a whole major
Entry: TypeAlias = "int | tuple[str, str] | None"  # an int literal, a string's (quote, body), or anything else


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


@overload
def cst_entries(node: cst.List | cst.Tuple) -> list[Entry]: ...
@overload
def cst_entries(node: cst.BaseExpression) -> list[Entry] | None: ...
def cst_entries(node: cst.BaseExpression) -> list[Entry] | None:
    """A list's or tuple's entries as `read_entries` takes them; None when `node` is no list literal."""
    if not isinstance(node, (cst.List, cst.Tuple)):
        return None
    entries: list[Entry] = []
    for element in node.elements:
        value = element.value if isinstance(element, cst.Element) else None
        if isinstance(value, cst.Integer):
            entries.append(value.evaluated_value)
        elif isinstance(value, cst.SimpleString):
            entries.append(_string_entry(value.value))
        else:
            entries.append(None)
    return entries


def ast_entries(source: bytes, node: ast.AST, offset) -> list[Entry] | None:
    if not isinstance(node, (ast.List, ast.Tuple)):
        return None
    entries: list[Entry] = []
    for element in node.elts:
        if isinstance(element, ast.Constant) and type(element.value) is int:
            entries.append(element.value)
        elif isinstance(element, ast.Constant) and type(element.value) is str:
            start, end = offset(element.lineno, element.col_offset), offset(element.end_lineno, element.end_col_offset)
            entries.append(_string_entry(source[start:end].decode("utf-8")))
        else:
            entries.append(None)
    return entries
