"""What the user reads: unified diffs, per-gate summaries, the arch matrix, JSON."""

from __future__ import annotations

from typing import Any

from codemods import diffs
from codemods.arch import Arch, ArchSet
from codemods.recipes import Plan, PlannedChange
from codemods.repo import Applied


def unified_diff(rel: str, before: bytes, after: bytes, edits=None) -> str:
    """A diff `git apply` accepts (a/ and b/ prefixes, no-newline markers)."""
    return diffs.unified_diff(rel, before, after, edits)


def plan_diff(plan: Plan, prefix: str = "", changes: list[PlannedChange] | None = None) -> str:
    """One diff per file over the selected changes, paths relative to the git root (prefix)."""
    chosen = changes if changes is not None else plan.changed
    per_file: dict[str, list[PlannedChange]] = {}
    for change in chosen:
        per_file.setdefault(change.file, []).append(change)
    return "".join(
        unified_diff(f"{prefix}{file}", done[0].before, done[-1].after, done[0].edits if len(done) == 1 else None)
        for file, done in per_file.items()
    )


def gate_rows(plan: Plan, changes: list[PlannedChange] | None = None) -> list[dict[str, Any]]:
    rows = []
    for change in changes if changes is not None else plan.changes:
        for gc in change.gates:
            rows.append(
                {
                    "change": change.id,
                    "file": change.file,
                    "line": gc.gate.line,
                    "gate_kind": gc.gate.kind,
                    "outcome": gc.outcome,
                    "before": gc.gate.text,
                    "after": gc.after_text if gc.outcome != "failed" else None,
                    "admits_before": gc.gate.admits.names(),
                    "admits_after": gc.admits_after.names() if gc.admits_after else None,
                    "unknown": sorted(
                        set(gc.gate.admits.unknown_names()) | set(gc.admits_after.unknown_names() if gc.admits_after else ()),
                        key=[a.name for a in plan.universe].index,
                    ),
                    "reason": gc.reason or None,
                }
            )
    return rows


def plan_json(plan: Plan, prefix: str, dry_run: bool, changes: list[PlannedChange] | None = None) -> dict[str, Any]:
    return {
        "recipe": plan.recipe.id,
        "project": plan.target.project.name,
        "layout": plan.target.layout.name,
        "version": plan.target.version() or None,
        "targets": [a.name for a in plan.targets],
        "dry_run": dry_run,
        "notes": list(plan.recipe.notes),
        "jit_modules": plan.jit_modules(),
        "changes": [
            {
                "id": c.id,
                "title": c.change.title,
                "file": f"{prefix}{c.file}",
                "outcome": c.outcome,
                "reason": c.reason or None,
                "gates": gate_rows(plan, [c]),
                "rewrites": [{"line": line, "before": before, "after": after} for line, before, after in c.rewrites],
            }
            for c in (changes if changes is not None else plan.changes)
        ],
        "diff": plan_diff(plan, prefix, [c for c in (changes if changes is not None else plan.changed) if c.outcome == "changed"]),
    }


def summary_lines(plan: Plan, prefix: str = "") -> list[str]:
    """One line per gate: `changed  file:line  before -> after`, grouped under each change."""
    lines = []
    for change in plan.changes:
        lines.append(f"{change.outcome:<9} {change.id}: {change.change.title}")
        if (change.outcome in ("failed", "skipped") or not change.rewrites) and not change.gates and change.reason:
            lines.append(f"          {change.reason}")
        for line, before, after in change.rewrites:
            lines.append(f"  {prefix}{change.file}:{line}  {before}  ->  {after}")
        for gc in change.gates:
            before = " ".join(gc.gate.text.split())
            if gc.outcome == "changed":
                after = " ".join(gc.after_text.split())
                lines.append(f"  {prefix}{change.file}:{gc.gate.line}  {before}  ->  {after}")
            else:
                lines.append(f"  {prefix}{change.file}:{gc.gate.line}  {before}  ({gc.outcome}: {gc.reason})")
        if change.outcome == "failed" and change.gates and change.reason:
            lines.append(f"          {change.reason}")
    return lines


def matrix(plan: Plan, archs: tuple[Arch, ...]) -> list[str]:
    """Text lines, one per group of identical gates: a cell per arch, then where and what.

    Cells: + admitted, . excluded, ? unknown; a trailing * marks a cell the plan changes.
    """
    groups: dict[tuple, list] = {}
    for change in plan.changes:
        for gc in change.gates:
            after = gc.admits_after or gc.gate.admits
            key = (change.file, " ".join(gc.gate.text.split()), tuple(_cell(gc.gate.admits, after, a) for a in archs))
            groups.setdefault(key, []).append(gc.gate.line)
    if not groups:
        return []
    widths = [max(len(a.name), 2) for a in archs]
    lines = ["arch matrix (+ admitted, . excluded, ? unknown, * changed by this plan)"]
    lines.append("  ".join(a.name.ljust(w) for a, w in zip(archs, widths)) + "  gate")
    for (file, text, cells), at in groups.items():
        where = f"{file}:{at[0]}" + (f" (x{len(at)})" if len(at) > 1 else "")
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths)) + f"  {where}  {text}")
    return lines


def _cell(before: ArchSet, after: ArchSet, arch: Arch) -> str:
    def sym(value: bool | None) -> str:
        return "?" if value is None else ("+" if value else ".")

    a, b = before.admits(arch), after.admits(arch)
    return sym(b) + ("*" if a != b else "")


def status_json(records: list[Applied]) -> list[dict[str, Any]]:
    return [
        {
            "recipe": r.recipe,
            "branch": r.branch,
            "current": r.current,
            "base": {"ref": r.base_ref or None, "sha": r.base_sha},
            "commits": [{"sha": c.sha, "change": c.change, "subject": c.subject} for c in r.commits],
            "commits_on_top": [{"sha": s, "subject": subj} for s, subj in r.foreign],
        }
        for r in records
    ]


def verify_lines(result, ctx) -> list[str]:
    """Per arch: identical, or changed with the regions that became active or inactive."""
    lines = [
        f"verify {ctx.recipe or 'work tree'}: base {ctx.base_sha[:12]}, targets {', '.join(a.name for a in ctx.targets)}, "
        f"{len(result.files)} CUDA file(s), method {result.method}, {result.seconds:.1f} s"
        + (f" ({result.cached} base output(s) from cache)" if result.cached else "")
    ]
    if result.method == "evaluator":
        lines.append("  nvcc not found: fell back to codemod's own guard evaluator (guard conditions only, no real preprocessing)")
    for file in result.files:
        lines.append(f"  file: {file}")
    for change_id, file, at in getattr(ctx, "intended", []):
        lines.append(
            f"  intended host-side change ({change_id}), on every arch: {file}:{','.join(map(str, at))}; "
            "the base is compared with it made"
        )
    for r in result.results:
        verdict = "ok  " if r.ok else "FAIL"
        head = f"{verdict} {r.arch:<8} {r.status}"
        if r.target:
            head += f" (target: expected {r.expected} region(s), gained {len(r.gained)}, lost {len(r.lost)})"
        if r.detail:
            head += f": {r.detail}"
        lines.append(head)
        for region in r.gained:
            lines.append(f"       + {region.file}:{region.line}  {' '.join(region.text.split())}")
        for region in r.lost:
            lines.append(f"       - {region.file}:{region.line}  {' '.join(region.text.split())}")
    lines.append("verified: every other arch is byte-identical and the targets gained exactly the planned regions"
                 if result.ok else "NOT verified: see the FAIL lines above")
    return lines


def verify_json(result, ctx) -> dict[str, Any]:
    def region(r):
        return {"file": r.file, "line": r.line, "text": r.text, "guard": r.guard or None}

    return {
        "ok": result.ok,
        "method": result.method,
        "seconds": round(result.seconds, 3),
        "recipe": ctx.recipe or None,
        "base": ctx.base_sha,
        "targets": [a.name for a in ctx.targets],
        "files": result.files,
        "intended": [{"change": c, "file": f, "lines": at} for c, f, at in getattr(ctx, "intended", [])],
        "flags": result.flags,
        "preprocessed": result.preprocessed,
        "cached": result.cached,
        "archs": [
            {
                "arch": r.arch, "status": r.status, "ok": r.ok, "target": r.target, "expected": r.expected,
                "gained": [region(g) for g in r.gained], "lost": [region(g) for g in r.lost], "detail": r.detail or None,
            }
            for r in result.results
        ],
    }
