"""Plan a recipe on a project tree: which changes, which candidate files; it reads, never writes.

`plan` picks the recipe's changes for the tree's project (--only, --skip,
`default = "off"`), tries each change's candidate locations in order, and
plans the first that holds its gate (codemods.plan.widen). A change that
needs another one left out is planned too, to tell a half-patch.
"""

from __future__ import annotations

import re

from codemods.core.source import NotRegularFile
from codemods.core import errors
from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates.base import GateKind
from codemods.gates.registry import KINDS
from codemods.plan.changes import Plan, PlannedChange
from codemods.plan.widen import Read, plan_change
from codemods.recipes.model import Change, ProjectTree, Recipe


def plan(
    recipe: Recipe,
    tree: ProjectTree,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    only: list[str] | None = None,
    skip: list[str] | None = None,
    read: Read | None = None,
    force: bool = False,
    offer_off: bool = False,
) -> Plan:
    """Plan every change of the recipe for the project at tree.root. Reads, never writes.

    A gate whose kind finds blockers (a CUDA guard around instructions a target
    arch lacks) is not widened unless `force`; forced gates keep their blockers in `GateChange.forced`.
    A change with `default = "off"` is planned only when `only` names it, or
    with `offer_off` (--interactive asks about it).
    """
    targets, universe = recipe.scope(tuple(universe))
    read = read or (lambda rel: (tree.root / rel).read_bytes())
    relevant = [c for c in recipe.changes if c.project == tree.project.name]
    if not relevant:
        raise errors.PlanFailed(
            f"recipe {recipe.id} has no changes for {tree.project.title}",
            where=str(tree.root),
            hint=f"it targets: {', '.join(sorted({c.project for c in recipe.changes}))}",
        )
    for selected in (only or []) + (skip or []):
        if selected not in {c.id for c in recipe.changes}:
            raise errors.UnknownRecipe(
                f"no change {selected!r} in recipe {recipe.id}",
                hint=f"changes: {', '.join(c.id for c in recipe.changes)}",
            )
    every = relevant
    if only:
        relevant = [c for c in relevant if c.id in only]
    elif not offer_off:
        relevant = [c for c in relevant if c.default != "off"]
    if skip:
        relevant = [c for c in relevant if c.id not in skip]
    wanted = {n for c in relevant for n in c.needs}
    left_out = [c for c in every if c not in relevant and c.id in wanted]

    current: dict[str, bytes] = {}
    planned = []
    for change in relevant:
        pc = _plan_locations(change, tree, KINDS[change.kind], universe, targets, current, read, force)
        if pc.outcome == "failed" and change.default == "off" and not only:  # offered, not asked for: no reason to stop
            pc.outcome, pc.reason = "skipped", f"off by default, and cannot be made here: {pc.reason}"
        planned.append(pc)
        if pc.outcome == "changed":
            current[pc.file] = pc.after
    unselected = [
        _plan_locations(change, tree, KINDS[change.kind], universe, targets, dict(current), read, force)
        for change in left_out
    ]
    return Plan(recipe, tree, universe, targets, planned, unselected)



def _plan_locations(
    change: Change,
    tree: ProjectTree,
    kind: GateKind,
    universe: tuple[Arch, ...],
    targets: tuple[Arch, ...],
    current: dict[str, bytes],
    read: Read,
    force: bool,
) -> PlannedChange:
    """Try the change's candidate locations in order; the first that holds its gate is planned.

    A candidate misses when its file does not exist or holds no such gate.
    When all miss, the change fails naming each candidate and why; with
    `optional = "absent"` it is skipped instead, but only if no candidate's
    file and function (or, with `assigns` and no `function`, a binding of that name) exist at all (a gate that moved
    away must not pass silently).
    """
    tried: list[str] = []
    anchors_absent = True
    last: PlannedChange | None = None
    for location in change.locations:
        file = tree.resolve(location.file)
        pc = PlannedChange(change, file, selector=location.selector)
        last = pc
        if file not in current:
            try:
                current[file] = read(file)
            except FileNotFoundError:
                tried.append(f"{file}: not found")
                continue
            except IsADirectoryError:
                tried.append(f"{file}: is a directory")
                continue
            except NotRegularFile:
                tried.append(f"{file}: not a regular file")
                anchors_absent = False  # it exists; codemod will not read a FIFO or a device
                continue
            except PermissionError:
                tried.append(f"{file}: permission denied")
                anchors_absent = False  # it exists; we just cannot read it
                continue
        pc.before = current[file]
        plan_change(pc, kind, universe, targets, tree, read, force)
        if not pc.missed:
            pc.tried = tried
            return pc
        function, assigns = location.selector.get("function"), location.selector.get("assigns")
        present: object
        if function is not None:
            present = re.search(rb"def\s+" + re.escape(function.encode()) + rb"\b", pc.before)
        elif isinstance(assigns, str):  # a name the file never binds (a size table before it existed) is absent
            present = re.search(rb"(?m)^[ \t]*" + re.escape(assigns.encode()) + rb"[ \t]*(?::[^=\n]*)?=(?!=)", pc.before)
        else:
            present = True
        if present:
            anchors_absent = False
        tried.append(pc.reason)
    assert last is not None
    last.tried = tried
    last.before = last.after = current.get(last.file, b"")
    if change.optional == "absent" and anchors_absent:
        last.outcome, last.reason = "skipped", "not in this version (" + "; ".join(tried) + ")"
    else:
        last.outcome = "failed"
        last.reason = tried[0] if len(tried) == 1 else "no candidate holds the gate: " + "; ".join(tried)
    return last


