"""The gate-kind contract: a `GateKind` record declares a kind's selectors and hooks.

A kind module (`cuda_guard`, `python_arch_list`, ...) keeps its own
functions with the arguments it needs; `codemods.gates.registry` declares one
`GateKind` per module, whose hooks all take the same arguments, so the
planner calls every kind alike and never asks a kind's name or signature:

- `find(source, universe, where, selector) -> [Gate]`: the gates the selectors pick;
- `admits(text, universe, where, detail) -> ArchSet`: what a gate's text admits;
- `widen(source, gate, targets, universe, where) -> [Edit]`: `[]` when it admits them already;
- `blockers(source, gate, targets) -> [str]`: why widening would break the build (`[]`: nothing);
- `missing_symbols(source, gate, targets, universe, where) -> [str]`: names the
  widened code takes from other modules, which its file cannot vouch for;
- `has_edit(gate, arch) -> bool`: whether `widen` writes an edit for this gate at all (for `arch`, when given)
  (`GateKind.editable`: scan calls a gate the arch gets nothing from widenable, else a blocker);
- an *edit kind* has `rewrite(source, where, selector) -> [Edit]` instead of find/widen/admits.

`Where` is what the planner knows of the file: its name (and so its
language) and, for a kind that `reads_predicates`, what each arch predicate
the file can use admits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from codemods.core.arch import Arch, ArchSet
from codemods.cpp.lexer import language
from codemods.gates import Edit, Gate
from codemods.gates.python.predicates.reading import Meaning

@dataclass(frozen=True)
class Where:
    """The file a kind's hook reads: its repository path and the predicate meanings read for it."""

    file: str = ""
    meanings: Mapping[str, Meaning] | None = None
    number_membership: str = ""  # the project's brackets for numbers in a file with no example (Project)
    # the spellings the nearest file in the same folder shows, for a file that shows none (GateKind.style)
    styles: Mapping[str, str] = field(default_factory=dict)

    @property
    def language(self) -> str:
        """The grammar for the file: "cuda" for .cu/.cuh, else "cpp"."""
        return language(self.file)


@dataclass(frozen=True)
class Selector:
    """A recipe key that picks a kind's gates (`function = "..."`)."""

    name: str
    required: bool = False
    hint: str = ""  # how to write it, for an error about its value


def strings_only(name: str, value: object) -> str:
    """The default selector check: a selector is a string."""
    return "" if isinstance(value, str) else f"{name!r} must be a string"


def no_blockers(source: bytes, gate: Gate, targets: tuple[Arch, ...]) -> list[str]:
    return []


def every_gate(gate: Gate, arch: Arch | None = None) -> bool:
    return True


def no_symbols(source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...], where: Where) -> list[str]:
    return []


# A selector's value is a recipe's TOML value that the kind's check_selector accepted, and a
# gate's detail is what its kind's find recorded: their types are each kind's own, hence Any.
Find = Callable[[bytes, tuple[Arch, ...], Where, Mapping[str, Any]], list[Gate]]
Admits = Callable[[str, tuple[Arch, ...], Where, Mapping[str, Any]], ArchSet]
Widen = Callable[[bytes, Gate, tuple[Arch, ...], tuple[Arch, ...], Where], list[Edit]]
Rewrite = Callable[[bytes, Where, Mapping[str, Any]], list[Edit]]


@dataclass(frozen=True)
class GateKind:
    """One kind of gate (or edit), as the planner and the recipe loader see it."""

    name: str
    selectors: tuple[Selector, ...] = ()
    find: Find | None = None
    admits: Admits | None = None
    widen: Widen | None = None
    rewrite: Rewrite | None = None  # an edit kind: the same fixed rewrite on every arch
    blockers: Callable[[bytes, Gate, tuple[Arch, ...]], list[str]] = no_blockers
    missing_symbols: Callable[[bytes, Gate, tuple[Arch, ...], tuple[Arch, ...], Where], list[str]] = no_symbols
    check_selector: Callable[[str, object], str] = strings_only
    reads_predicates: bool = False  # its hooks read `Where.meanings`: the planner reads the project's predicates
    selects_kernels: bool = False  # its gates pick which JIT modules a device builds (kernel_paths checks them)
    widens: bool = True  # False: scan reads its gates, `run` refuses them (its `widen` says why)
    # which of its gates `widen` writes an edit for, for an arch when given (the rest it refuses)
    has_edit: Callable[[Gate, Arch | None], bool] = every_gate
    # its selectors name a shape across a file, not one place: a change widens every match (plan.picks)
    every_match: bool = False
    # the spellings a file shows ({"negation": "parentheses"}): the planner reads them from the nearest file in the
    # same folder for a file that shows none (Where.styles)
    style: Callable[[bytes], Mapping[str, str]] | None = None
    # what widening a gate had to guess, said with the gate in the run's output
    notes: Callable[[bytes, Gate, tuple[Arch, ...], tuple[Arch, ...], Where], list[str]] = no_symbols
    doc: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        edit = self.rewrite is not None
        gate = (self.find, self.admits, self.widen)
        if edit == any(hook is not None for hook in gate) or (not edit and None in gate):
            raise TypeError(f"gate kind {self.name}: give either rewrite, or find, admits and widen")

    @property
    def edit_kind(self) -> bool:
        """An edit kind rewrites code the same on every arch instead of widening gates."""
        return self.rewrite is not None

    def editable(self, gate: Gate, arch: Arch | None = None) -> bool:
        """Whether `codemod run` has an edit for `gate` (for `arch`, when given): a kind that widens, and a gate
        its `has_edit` accepts."""
        return self.widen is not None and self.widens and self.has_edit(gate, arch)

    @property
    def selector_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.selectors)

    @property
    def required_selectors(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.selectors if s.required)

    def hint(self, name: str) -> str:
        """How to write selector `name`, for an error about its value."""
        for selector in self.selectors:
            if selector.name == name and selector.hint:
                return selector.hint
        return f'{name} = "..."'
