"""Run a recipe's [[test]] cases: each change on its example `before`, as `codemod recipe test` does.

Like LibCST's CodemodTest: the output must equal `after`, a second pass must
change nothing, and a case may say the change must leave its source alone
or fail on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates.registry import KINDS
from codemods.plan.changes import PlannedChange
from codemods.plan.widen import plan_change
from codemods.recipes.model import Case, Recipe


@dataclass
class CaseResult:
    case: Case
    ok: bool
    message: str
    got: str = ""
    too_deep: str = ""  # why the case's source cannot be read at all (nested too deeply)


def run_cases(recipe: Recipe, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> list[CaseResult]:
    """Apply each change to its example `before`: the output must equal `after`, and a second pass change nothing."""
    targets, universe = recipe.scope(tuple(universe))
    changes = {c.id: c for c in recipe.changes}
    results = []
    for case in recipe.tests:
        change = changes[case.change]
        for location in change.locations:  # the case stands for whichever candidate holds its gate
            pc = PlannedChange(change, case.file, before=case.before.encode(), selector=location.selector)
            plan_change(pc, KINDS[change.kind], universe, targets, None, None)
            if not pc.missed:
                break
        got = pc.after.decode("utf-8", errors="replace")
        if pc.outcome != case.outcome:
            detail = f": {pc.reason}" if pc.reason else ""
            results.append(CaseResult(case, False, f"expected {case.outcome}, got {pc.outcome}{detail}", got, pc.reason if pc.too_deep else ""))
            continue
        if case.outcome == "changed" and got != case.after:
            results.append(CaseResult(case, False, "output differs from 'after'", got))
            continue
        if case.outcome == "changed":
            again = PlannedChange(change, case.file, before=pc.after, selector=pc.selector)
            plan_change(again, KINDS[change.kind], universe, targets, None, None)
            if again.outcome != "unchanged":
                results.append(CaseResult(case, False, f"a second pass is not a no-op ({again.outcome})", got))
                continue
        results.append(CaseResult(case, True, case.outcome, got))
    return results

