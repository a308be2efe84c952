"""Planning an edit kind's change (a fixed rewrite, the same on every arch), and what `verify` expects of one."""

from __future__ import annotations

from codemods.gates import Edit, NotFound, SourceError, apply_edits, line_of
from codemods.gates.base import GateKind, Where
from codemods.gates.registry import KINDS
from codemods.plan.changes import PlannedChange
from codemods.recipes.model import ProjectTree, Recipe


def plan_rewrite(pc: PlannedChange, kind: GateKind) -> None:
    """An edit kind's change: its edits, or unchanged when already made, or a miss naming what is not there."""
    source = pc.before
    rewrite = kind.rewrite
    assert rewrite is not None  # called for edit kinds only
    try:
        edits = rewrite(source, Where(pc.file), pc.selector if pc.selector is not None else pc.change.selector)
    except SourceError as exc:
        pc.outcome, pc.reason = "failed", f"{pc.file}: {exc}"
        return
    except NotFound as exc:
        pc.outcome, pc.reason, pc.missed = "failed", f"{pc.file}: {exc}", True
        return
    if not edits:
        pc.outcome, pc.reason = "unchanged", f"already made: {pc.file} has the replacement and not the original"
        return
    try:
        pc.after = apply_edits(source, edits)
    except ValueError as exc:
        pc.outcome, pc.reason = "failed", f"{pc.file}: {exc}"
        return
    pc.edits = sorted(set(edits))
    pc.rewrites = _edited_lines(source, pc.edits)
    pc.outcome = "changed"


def _edited_lines(source: bytes, edits: list[Edit]) -> list[tuple[int, str, str]]:
    """Each source line an edit touches, before and after (edits sorted, non-overlapping)."""
    out: list[tuple[int, str, str]] = []
    i = 0
    while i < len(edits):
        start = source.rfind(b"\n", 0, edits[i].start) + 1
        end = source.find(b"\n", edits[i].end)
        end = len(source) if end < 0 else end
        group = [edits[i]]
        while i + 1 < len(edits) and edits[i + 1].start <= end:
            i += 1
            group.append(edits[i])
            end = source.find(b"\n", edits[i].end)
            end = len(source) if end < 0 else end
        i += 1
        after = apply_edits(source[start:end], [Edit(e.start - start, e.end - start, e.text) for e in group])
        out.append((line_of(source, start), source[start:end].decode("utf-8", "replace").strip(), after.decode("utf-8", "replace").strip()))
    return out


def intended_rewrites(recipe: Recipe, tree: ProjectTree, file: str, base: bytes, work: bytes) -> tuple[bytes, list[tuple[str, list[int]]]]:
    """`base` with the recipe's edit-kind changes to `file` made, for those `work` already has; and (change id, base lines) of each.

    `verify` compares the work tree with this instead of the bare base, so a
    host-side fix the recipe planned is not taken for an unexplained change.
    """
    made = []
    for change in recipe.changes:
        kind = KINDS.get(change.kind)
        if kind is None or kind.rewrite is None or change.project != tree.project.name:
            continue
        rewrite = kind.rewrite
        for location in change.locations:
            if tree.resolve(location.file) != file:
                continue
            try:
                edits = rewrite(base, Where(file), location.selector)
                done = not rewrite(work, Where(file), location.selector)
            except (NotFound, SourceError):
                continue
            if edits and done:
                made.append((change.id, sorted({line_of(base, e.start) for e in edits})))
                base = apply_edits(base, edits)
            break
    return base, made

