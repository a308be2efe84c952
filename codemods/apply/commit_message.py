"""The commit message of one change: what it widened or replaced, what was forced, and the trailers that record it."""

from __future__ import annotations

from codemods.plan.changes import Plan, PlannedChange
from codemods.apply.trailers import TRAILER_BASE, TRAILER_BRANCH, TRAILER_CHANGE, TRAILER_FORCED, TRAILER_RECIPE, FileChange

_LISTED_GATES = 40


def commit_message(plan: Plan, change: PlannedChange, prefix: str, base: str, half_patches=(), *,
                   branch: str = "", files: tuple[FileChange, ...] = ()) -> str:
    """The message of one change's commit; `branch` and `files` record what revert checks before deleting anything."""
    targets = ", ".join(a.name for a in plan.targets)
    body = [f"codemod({plan.recipe.id}): {change.change.title}", ""]
    if change.change.why:
        body += [change.change.why, ""]
    if change.rewrites:
        body.append("Replaced (host code, the same on every arch):")
        body += [f"  {prefix}{change.file}:{line}  {before}  ->  {after}" for line, before, after in change.rewrites]
    changed = [gc for gc in change.gates if gc.outcome == "changed"]
    if changed or not change.rewrites:
        body.append(f"Gates widened to admit {targets}:")
    for gc in changed[:_LISTED_GATES]:
        body.append(f"  {prefix}{change.file}:{gc.gate.line}  {' '.join(gc.gate.text.split())}  ->  {' '.join(gc.after_text.split())}")
    if len(changed) > _LISTED_GATES:
        body.append(f"  ... and {len(changed) - _LISTED_GATES} more in {prefix}{change.file}")
    blockers = [(gc, b) for gc in changed for b in gc.forced]
    if blockers:
        body += ["", "Widened with --force despite these blockers:"]
        body += [f"  {prefix}{change.file}:{gc.gate.line}: {blocker}" for gc, blocker in blockers]
    unchecked = [(gc, w) for gc in changed for w in gc.warnings]
    if unchecked:
        body += ["", "Not fully checked (codemod could not follow these paths):"]
        body += [f"  {prefix}{change.file}:{gc.gate.line}: {warning}" for gc, warning in unchecked]
    if plan.recipe.notes:
        body += ["", "Upstream notes:"] + [f"- {n}" for n in plan.recipe.notes]
    body += [
        "",
        f"{TRAILER_RECIPE}: {plan.recipe.id}",
        f"{TRAILER_CHANGE}: {change.id}",
        f"{TRAILER_BASE}: {base}",
    ]
    if branch:
        body.append(f"{TRAILER_BRANCH}: {branch}")
    body += [f.trailer() for f in files]
    body += [f"{TRAILER_FORCED}: {describe_half_patch(p)}" for p in half_patches if p[0] == change.id]
    if blockers:
        body.append(f"{TRAILER_FORCED}: {change.id} widened gates around instructions {', '.join(a.name for a in plan.targets)} lack")
    return "\n".join(body) + "\n"


def describe_half_patch(problem: tuple[str, str, str]) -> str:
    """One half-patch (plan.changes.half_patches' tuple) in words, for the commit trailer and the report."""
    change, needed, state = problem
    return f"{change} needs {needed}, which {state}"
