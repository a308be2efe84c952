"""Gate kinds: pure functions over source text.

The kinds live in their language's folder, `python/` and `cpp/`, each in a
module named as the kind (`python/python_arch_list.py`), beside the folders
of the concepts they share (`python/capability/`, `python/predicates/`,
`cpp/checks/` ...). This module holds the records every kind uses (`Gate`,
`Edit`, the errors); `base` the kind contract; `registry` the list of kinds.

Each kind's module exposes:

- `KIND`: the kind's name as used in recipes and output (`cuda_guard`, ...).
- `find(source: bytes, universe, **selector) -> list[Gate]`: every gate of this
  kind in the source, each with the `ArchSet` it admits.
- `widen(source: bytes, gate: Gate, targets: tuple[Arch, ...]) -> list[Edit]`:
  the smallest edits that make the gate also admit `targets`. Returns `[]`
  when the gate already admits them (idempotent). Raises `CannotWiden` when
  the gate cannot be rewritten safely (unknown macro, computed list ...).

A module may instead be an *edit kind*: a fixed rewrite that admits no arch
(a host-side fix that belongs with a recipe). It exposes `KIND`,
`EDIT_KIND = True` and:

- `rewrite(source: bytes, **selector) -> list[Edit]`: the smallest edits that
  make the rewrite. Returns `[]` when the source already has it (idempotent).
  Raises `NotFound` when the selectors match nothing, in neither the old nor
  the new form (the message names what is missing).
- optionally `check_selector(name, value) -> str`: why a recipe's selector
  value is unusable ("" when it is fine); selectors are strings otherwise.

Either way `codemods.gates.registry` declares the kind for the planner: its
selectors (the keyword-only parameters of `find` or `rewrite`) and its hooks,
a `GateKind` record (`codemods.gates.base`) whose hooks all take the same
arguments; what a kind reads besides the source (the language the file name
gives, the predicates' meanings) is declared there, not discovered.

No module here does I/O, reads the clock or the environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from codemods.core.arch import Arch, ArchSet
from codemods.core.source import SourceError, decode


@dataclass(frozen=True, order=True)
class Edit:
    """Replace `source[start:end]` (byte offsets) with `text` (bytes)."""

    start: int
    end: int
    text: bytes


@dataclass(frozen=True)
class Gate:
    """One arch gate found in a source file."""

    kind: str
    start: int  # byte offset of the gate's text (the condition or the list)
    end: int
    line: int  # 1-based line of `start`
    text: str  # the gate's source text, as written
    admits: ArchSet
    context: str = ""  # enclosing function / symbol, when known
    detail: dict = field(default_factory=dict, compare=False, hash=False)


class CannotWiden(Exception):
    """The gate cannot be rewritten safely; the message says why."""


class NotFound(Exception):
    """An edit kind's selectors match nothing in the source; the message says what is missing."""


class TooDeep(SourceError):
    """The source nests deeper than codemod reads (libcst's parser would crash on it)."""


def apply_edits(source: bytes, edits: list[Edit]) -> bytes:
    """Splice non-overlapping edits into `source` in one pass."""
    out = []
    pos = 0
    for edit in sorted(set(edits)):
        if edit.start < pos:
            raise ValueError(f"overlapping edits at byte {edit.start}")
        out.append(source[pos:edit.start])
        out.append(edit.text)
        pos = edit.end
    out.append(source[pos:])
    return b"".join(out)


def drop_operands(spans: list[tuple[int, int]], dropped: list[bool]) -> list[Edit]:
    """The cuts that remove the dropped operands of a chain (`a and b and c`, spans in order, at least one kept):
    each with the operator before it, or after it when no kept operand precedes it."""
    cuts, kept_before = [], False
    for i, drop in enumerate(dropped):
        if not drop:
            kept_before = True
        elif kept_before:
            cuts.append(Edit(spans[i - 1][1], spans[i][1], b""))
        else:
            cuts.append(Edit(spans[i][0], spans[i + 1][0], b""))
    return cuts


def edit_between(old: bytes, new: bytes) -> Edit | None:
    """The single edit that turns `old` into `new`: the span between their common prefix and suffix."""
    if old == new:
        return None
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while (
        suffix < limit - prefix
        and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]
    ):
        suffix += 1
    return Edit(prefix, len(old) - suffix, new[prefix : len(new) - suffix])


def line_of(source: bytes, offset: int) -> int:
    return source.count(b"\n", 0, offset) + 1


__all__ = [
    "Arch",
    "ArchSet",
    "CannotWiden",
    "Edit",
    "Gate",
    "NotFound",
    "SourceError",
    "TooDeep",
    "apply_edits",
    "decode",
    "edit_between",
    "line_of",
]
