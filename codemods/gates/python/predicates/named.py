"""One arch predicate as a Python gate names it: the number its name carries, its siblings' names, what it admits.

A predicate is spelled `is_smNN`, `is_smNN_supported`, FlashInfer's
`is_smNNa_supported` or a family's `is_smNNx_supported` (with or without a
leading underscore; python_arch_test's `has_smNN` build flags alike), as a name,
a call, an attribute or a method call. `Predicate.key` says where `meanings`
(read by `python.predicates.reading` from the project's source) holds what it admits, and
`admits_of` what a list of them admits. Shared by python_arch_or, which reads
its chains' operands into `Predicate`s, and python_arch_test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collections.abc import Mapping
from typing import TYPE_CHECKING

from codemods.core.arch import Arch, ArchSet
from codemods.core.lazy import LazyModule
from codemods.gates.python.predicates.reading import Meaning

if TYPE_CHECKING:
    import libcst as cst
else:  # imported on first use: `codemod list` needs no libcst
    cst = LazyModule("libcst")


# `has_smNNN` build flags are spelled here too, for python_arch_test; this kind's chains hold only `is_sm`.
PREDICATE_RE = re.compile(r"^(?P<head>_?(?:is|has)_sm)(?P<number>\d{2,3})(?P<tail>[afx]?(?:_supported)?)$")


def _number(match: re.Match[str]) -> int:
    """The arch number a predicate name's match carries: `is_sm120a_supported` 120, and a family's major as its
    first arch's number, `is_sm12x_supported` 120 (FlashInfer 0.6.5's predicate for every 12.x)."""
    return int(match["number"]) * (10 if match["tail"].startswith("x") else 1)


@dataclass(frozen=True)
class Predicate:
    operand: cst.BaseExpression
    ident: cst.Name  # the name that carries the number
    form: str  # "name", "call", "attribute" or "attribute_call"
    number: int | None  # None for a named predicate (is_blackwell_supported)
    majors: frozenset[int]  # what the name says; used only without meanings

    def meaning(self, meanings: Mapping[str, Meaning] | None) -> Meaning:
        """What the predicate admits: its definition's meaning, or the name's rule without meanings."""
        if meanings is None:
            return Meaning(frozenset((m, n) for m in self.majors for n in range(10)))
        key = self.key()
        found = meanings.get(key)
        if found is None and key.startswith("cls."):
            return Meaning(None, reason=f"no definition of `{key}()` was read in its class or a base class of its file")
        if found is None:
            return Meaning(None, reason=f"no definition of `{key}` was read")
        return found

    def key(self, name: str | None = None) -> str:
        """Where `meanings` holds what this predicate (or its sibling `name`) admits.

        An attribute (`get_platform().is_sm90`) is `.is_sm90`: the platform's own table. A method called on
        `cls` or `self` is `cls.is_sm90`, what the enclosing class defines (`scoped`). Any other method call
        is `.is_sm90()`, which nothing defines: its class is not known, so it is unknown (never a module's
        function of the same name).
        """
        name = self.ident.value if name is None else name
        if self.form == "attribute":
            return "." + name
        if self.form == "attribute_call":
            func = self.operand.func if isinstance(self.operand, cst.Call) else self.operand
            owner = func.value if isinstance(func, cst.Attribute) else None
            if isinstance(owner, cst.Name) and owner.value in ("cls", "self"):
                return "cls." + name
            return "." + name + "()"
        return name


def admits_of(
    predicates: list[Predicate], universe: tuple[Arch, ...], meanings: Mapping[str, Meaning] | None
) -> tuple[ArchSet, list[str]]:
    """The archs some predicate admits; with an unknown one, the rest of the universe is unknown.

    The second value says, per unknown predicate, why (`is_sm130_supported: no definition ... was read`).
    """
    admitted: set[Arch] = set()
    unknown: list[str] = []
    for predicate in predicates:
        meaning = predicate.meaning(meanings)
        if meaning.known:
            admitted |= meaning.admitted(universe)
        else:
            where = f" ({meaning.where})" if meaning.where else ""
            unknown.append(f"`{predicate.ident.value}`{where}: {meaning.reason}")
    if unknown:
        return ArchSet(universe, frozenset(admitted), frozenset(universe) - admitted), unknown
    return ArchSet(universe, frozenset(admitted)), unknown


def renamed(name: str, number: int) -> str:
    return PREDICATE_RE.sub(lambda m: f"{m['head']}{number // 10 if m['tail'].startswith('x') else number}{m['tail']}", name)


def number_of(name: str) -> int:
    """The arch number a predicate's name carries (`is_sm120a_supported`: 120); -1 for a named one."""
    match = PREDICATE_RE.match(name)
    return _number(match) if match else -1
