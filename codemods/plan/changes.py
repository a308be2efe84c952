"""A plan's records: each change planned on a project tree, its gates, and its half-patches.

`codemods.plan.planner` fills them; `apply`, `render` and `verify` read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from codemods.core.arch import Arch, ArchSet
from codemods.gates import Edit, Gate
from codemods.recipes.model import Change, ProjectTree, Recipe


@dataclass
class GateChange:
    gate: Gate
    outcome: str  # changed / unchanged / failed / skipped (cannot tell whether it has the change's shape)
    after_text: str = ""
    admits_after: ArchSet | None = None
    reason: str = ""
    forced: list[str] = field(default_factory=list)  # blockers overridden with --force
    warnings: list[str] = field(default_factory=list)  # potential blockers: what codemod could not follow
    refused_by: str = ""  # "dispatch": the branch rule (plan.dispatch)


@dataclass
class PlannedChange:
    change: Change
    file: str
    outcome: str = "unchanged"
    reason: str = ""
    before: bytes = b""
    after: bytes = b""
    gates: list[GateChange] = field(default_factory=list)
    edits: list[Edit] = field(default_factory=list)  # on `before`; what report builds the diff from
    selector: dict | None = None  # the matched location's selectors (default: the change's)
    tried: list[str] = field(default_factory=list)  # candidates that did not hold the gate, and why
    missed: bool = False  # the file holds no gate the selectors pick (another candidate may)
    too_deep: bool = False  # the file nests deeper than codemod reads
    # why it failed, when a catalogued error says it: "ambiguous" (plan.picks: several gates to widen,
    # errors.AmbiguousSelector), "dispatch" (plan.dispatch: a later arm handles the arch, errors.ChangesDispatch)
    failure: str = ""
    rewrites: list[tuple[int, str, str]] = field(default_factory=list)  # edit kinds: (line, before, after) per edited line

    @property
    def id(self) -> str:
        return self.change.id


@dataclass
class Plan:
    recipe: Recipe
    tree: ProjectTree
    universe: tuple[Arch, ...]
    targets: tuple[Arch, ...]
    changes: list[PlannedChange]
    # changes left out by --only/--skip that a selected change `needs`, planned to see whether they would change
    unselected: list[PlannedChange] = field(default_factory=list)

    @property
    def failed(self) -> list[PlannedChange]:
        return [c for c in self.changes if c.outcome == "failed"]

    @property
    def changed(self) -> list[PlannedChange]:
        return [c for c in self.changes if c.outcome == "changed"]

    def files(self) -> list[str]:
        """The files the plan writes."""
        return list(dict.fromkeys(c.file for c in self.changed))

    def jit_modules(self) -> list[str]:
        return list(dict.fromkeys(m for c in self.changed for m in c.change.jit_modules))


def half_patches(plan: Plan, selected: list[PlannedChange], others: Sequence[Plan] = ()) -> list[tuple[str, str, str]]:
    """Why applying only `selected` would leave a half-patch: (change, needed change, why) for each need left unmet.

    A needed change that would change nothing (its gates already admit the
    target) is no reason; one that would change files, or cannot be planned,
    is: a JIT spec widened without its kernels' guards builds empty kernels.
    A need on another project's change (vLLM's fusion on FlashInfer's JIT gate) is read in `others`, the plans
    of the run's other trees; when none of them is that project, the need is unmet: nothing says the
    installed FlashInfer admits the arch.
    """
    chosen = {c.id for c in selected}
    by_id = {c.id: c for c in [*plan.changes, *plan.unselected]}
    elsewhere = {c.id: c for other in others if other is not plan for c in [*other.changes, *other.unselected]}
    chosen |= {c.id for other in others if other is not plan for c in other.changes}
    projects = {other.tree.project.name for other in others}
    changes = {c.id: c for c in plan.recipe.changes}
    problems = []
    for pc in selected:
        for needed in pc.change.needs:
            other = by_id.get(needed) or elsewhere.get(needed)
            if other is None and needed in changes and changes[needed].project != pc.change.project:
                project = changes[needed].project
                if project not in projects:
                    problems.append((pc.id, needed, f"is in {project}, a project this run does not touch (give its tree too: --repo or --package {project})"))
                continue
            if other is None or needed in chosen or other.outcome in ("unchanged", "skipped"):
                continue
            state = "is left out" if other.outcome == "changed" else f"cannot be applied ({other.reason})"
            problems.append((pc.id, needed, state))
    return problems

