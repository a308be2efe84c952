"""What the user reads: unified diffs, per-gate summaries, the arch matrix, JSON."""

from __future__ import annotations

from typing import Any

from codemods.render import diff as diffs
from codemods.core.arch import Arch, ArchSet
from codemods.plan.changes import Plan, PlannedChange
from codemods.apply.repo import Applied


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
                    "warnings": list(gc.warnings),
                }
            )
    return rows


def plan_json(plan: Plan, prefix: str, dry_run: bool, changes: list[PlannedChange] | None = None) -> dict[str, Any]:
    return {
        "recipe": plan.recipe.id,
        "project": plan.tree.project.name,
        "layout": plan.tree.layout.name,
        "version": plan.tree.version() or None,
        "archs": [a.name for a in plan.recipe.archs],
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


def summary_lines(plan: Plan, prefix: str = "", selected: list[PlannedChange] | None = None) -> list[str]:
    """One line per gate: `changed  file:line  before -> after`, grouped under each change.

    With `selected` (what --interactive kept), a change the plan would make but
    that was not selected is listed as skipped, without its gates.
    """
    lines = []
    for change in plan.changes:
        if selected is not None and change.outcome == "changed" and change not in selected:
            lines.append(f"{'skipped':<9} {change.id}: {change.change.title}")
            lines.append("          not selected")
            continue
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
            lines += [f"          warning: {warning}" for warning in gc.warnings]
        if change.outcome == "failed" and change.gates and change.reason:
            lines.append(f"          {change.reason}")
    return lines


def matrix(plan: Plan, archs: tuple[Arch, ...], selected: list[PlannedChange] | None = None) -> list[str]:
    """Text lines, one per group of identical gates: a cell per arch, then where and what.

    Cells: + admitted, . excluded, ? unknown; a trailing * marks a cell the plan changes.
    With `selected`, a change the plan would make but that was not selected is left out.
    """
    groups: dict[tuple, list] = {}
    for change in plan.changes:
        if selected is not None and change.outcome == "changed" and change not in selected:
            continue
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
    if result.stand_ins:
        lines.append(f"  stand-ins (empty, the same on base and work tree): {', '.join(result.stand_ins)}")
    for change_id, file, at in getattr(ctx, "intended", []):
        lines.append(
            f"  intended host-side change ({change_id}), on every arch: {file}:{','.join(map(str, at))}; "
            "the base is compared with it made"
        )
    for r in result.results:
        verdict = {"ok": "ok  ", "FAIL": "FAIL", "unknown": "unknown"}[r.verdict]
        head = f"{verdict} {r.arch:<8} {r.status}"
        if r.target:
            if r.expected is None:
                wanted = "no count expected (a changed guard cannot be evaluated on it)"
            elif r.expected == 0:
                wanted = "no region expected (no guard of the changed files was widened for it)"
            else:
                wanted = f"expected {r.expected} region(s)"
            head += f" (target: {wanted}, gained {len(r.gained)}, lost {len(r.lost)})"
        if r.detail:
            head += f": {r.detail}"
        if r.verdict == "unknown":
            head += "; unknown: a guard deciding the change reads macros a stood-in header may define"
        lines.append(head)
        for region in r.gained:
            lines.append(f"       + {region.file}:{region.line}  {' '.join(region.text.split())}")
        for region in r.lost:
            lines.append(f"       - {region.file}:{region.line}  {' '.join(region.text.split())}")
        for doubt in r.unknown:
            lines.append(f"       ? {doubt.file}:{doubt.line}  {doubt.guard}  (reads {', '.join(doubt.macros)})")
        for kernel in r.empty_kernels:
            lines.append(f"       ! {kernel.file}:{kernel.line}  {kernel.guard}  (drops code {kernel.module} needs)")
    if result.status == "verified":
        lines.append("verified: every other arch is byte-identical and the targets gained exactly the planned regions"
                     + (" (with empty stand-ins for the missing third-party headers)" if result.stand_ins else ""))
    elif result.status == "unknown":
        lines.append("NOT verified: unknown, the lines marked ? read macros that the missing third-party headers may define")
    else:
        lines.append("NOT verified: see the FAIL lines above")
    return lines


def verify_notes(result, ctx) -> list[str]:
    """What stderr says once per run: where the third-party headers came from, half-patched modules, what to do."""
    headers, notes = ctx.headers, []
    if headers.kind == "include":
        notes.append(f"note: third-party headers from --include: {', '.join(headers.folders)}")
    elif headers.kind == "installed":
        notes.append(f"note: third-party headers from the installed {headers.installed}: {', '.join(headers.folders)}")
    if headers.missing and result.method == "nvcc":
        if result.stand_ins:
            notes.append(
                f"note: {', '.join(headers.missing)} missing: preprocessed with empty stand-ins (the same on the base and "
                f"the work tree) for {len(result.stand_ins)} header(s): {', '.join(result.stand_ins)}"
            )
        elif headers.kind == "none" and result.files:
            notes.append(f"note: {', '.join(headers.missing)} missing; no header of them was needed")
        if result.stand_ins or any(r.verdict == "unknown" for r in result.results):
            if headers.submodules:
                notes.append(
                    f"hint: for a proof with the real headers: git -C {ctx.repo.root} submodule update --init "
                    + " ".join(headers.submodules) + " (or pass --include DIR)"
                )
            else:
                notes.append("hint: for a proof with the real headers, pass --include DIR for each missing include folder")
    kernels = [k for r in result.results for k in r.empty_kernels]
    if kernels:
        modules = ", ".join(dict.fromkeys(f"{k.module} ({k.spec})" for k in kernels))
        archs = ", ".join(dict.fromkeys(k.arch for k in kernels))
        guards = len({(k.file, k.line) for k in kernels})
        notes.append(
            f"error: half-patched: the JIT gate of {modules} admits {archs}, but {guards} guard(s) of its sources "
            "(the ! lines) compile code out there: the kernels would run without it and return garbage"
        )
        if ctx.recipe:
            notes.append(
                f"hint: apply the guards too: `codemod revert {ctx.recipe} --repo {ctx.repo.root}`, then "
                f"`codemod run {ctx.recipe} --repo {ctx.repo.root}` with all its changes (no --only/--skip); "
                "or keep only the revert"
            )
        else:
            notes.append("hint: widen those guards together with the JIT gate (`codemod run RECIPE` does both), or undo the JIT gate change")
    return notes


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
        "status": result.status,
        "headers": {
            "source": ctx.headers.kind,
            "folders": ctx.headers.folders,
            "installed": ctx.headers.installed or None,
            "missing": ctx.headers.missing,
            "submodules": ctx.headers.submodules,
            "stand_ins": result.stand_ins,
        },
        "archs": [
            {
                "arch": r.arch, "status": r.status, "verdict": r.verdict, "ok": r.ok, "target": r.target,
                "expected": r.expected, "gained": [region(g) for g in r.gained], "lost": [region(g) for g in r.lost],
                "unknown": [{"file": d.file, "line": d.line, "guard": d.guard, "macros": list(d.macros)} for d in r.unknown],
                "empty_kernels": [
                    {"module": k.module, "file": k.file, "line": k.line, "message": k.message} for k in r.empty_kernels
                ],
                "detail": r.detail or None,
            }
            for r in result.results
        ],
    }
