"""The --format json documents of run, status and verify, the error document, and each command's JSON Schema.

Every document starts with `schema_version`; codemods/schemas/ holds one JSON
Schema per command (`codemod schema COMMAND`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemods.core import errors
from codemods.core.lazy import LazyModule
from codemods.render.diff import plan_diff

if TYPE_CHECKING:
    from codemods.plan.changes import Plan, PlannedChange

recipes = LazyModule("codemods.recipes.model")  # `scan --format json` needs no libcst

SCHEMA_VERSION = 1  # of every --format json document
SCHEMAS = ("run", "status", "scan", "verify", "doctor", "error")


def document(data: dict) -> dict:
    """A --format json document: schema_version first, then the command's data."""
    return {"schema_version": SCHEMA_VERSION, **data}


def dumps(data: dict) -> str:
    """A document as printed: indented, one trailing newline."""
    return json.dumps(document(data), indent=2) + "\n"


def error_document(exc: errors.CodemodError) -> dict:
    """What any command prints on stdout under --format json when it refuses."""
    return document({"error": {"kind": exc.code, "message": str(exc), "hint": exc.hint, "exit_code": exc.exit_code}})


def schema(command: str) -> str:
    """The JSON Schema of a command's --format json output."""
    if command not in SCHEMAS:
        raise errors.BadUsage(f"no schema for {command!r}", hint=f"choose one of: {', '.join(SCHEMAS)}")
    from importlib.resources import files as resources

    return resources("codemods").joinpath("schemas").joinpath(f"{command}.schema.json").read_text(encoding="utf-8")


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
                    "after": gc.after_text if gc.outcome in ("changed", "unchanged") else None,
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


def run_json(recipe, results, caches, dry_run: bool) -> dict[str, Any]:
    """`run --format json`: per tree its plan, what was applied, the upstream advice and the JIT cache."""
    out = []
    for result, cache in zip(results, caches):
        data = plan_json(result.plan, result.prefix, dry_run, None)
        refusal = result.would_refuse
        data.update(
            upstream_advice=recipes.upstream_advice(recipe, result.plan.tree),
            status=result.status, branch=result.branch or None, selected=[c.id for c in result.selected],
            commits=[{"sha": sha, "change": cid} for sha, cid in result.commits], jit_cache=cache,
            forced=result.forced_reasons,
            would_refuse=None if refusal is None else {
                "kind": refusal.code, "exit_code": refusal.exit_code, "message": str(refusal), "hint": refusal.hint,
            },
        )
        out.append(data)
    return {"results": out}


def status_json(statuses) -> dict[str, Any]:
    """`status --format json`: per repository its state, the applied recipes and drift."""
    out = []
    for one in statuses:
        interrupted = one.interrupted
        out.append({
            "repo": str(one.repo.root), "shadow": one.shadow, "state": one.state,
            "interrupted": {k: interrupted.get(k) for k in ("op", "recipe", "step", "branch", "base_sha", "pid")} if interrupted else None,
            "applied": [
                {
                    "recipe": r.recipe,
                    "branch": r.branch,
                    "current": r.current,
                    "worktree": r.worktree or None,
                    "base": {"ref": r.base_ref or None, "sha": r.base_sha},
                    "commits": [{"sha": c.sha, "change": c.change, "subject": c.subject} for c in r.commits],
                    "commits_on_top": [{"sha": s, "subject": subj} for s, subj in r.foreign],
                    "state": "reverted (commits kept)" if r.reverted else "applied",
                    "made_on": r.made_on or None,
                    "reverts": [{"sha": s, "reverts": undone} for s, undone in r.reverts],
                    "below": [{"sha": s, "subject": subj} for s, subj in r.below],
                }
                for r in one.records
            ],
            "changed_outside_codemod": one.drift,
        })
    return {"results": out}


def verify_json(result, ctx) -> dict[str, Any]:
    def region(r):
        return {"file": r.file, "line": r.line, "text": r.text, "guard": r.guard or None}

    return {
        "ok": result.status == "verified",
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
            "wheel": ctx.headers.wheel or None,
            "versions": ctx.headers.versions or None,
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


def scan_json(results: list[tuple[Path, Any]]) -> dict[str, Any]:
    """`scan --format json` over several trees: one list each of gates, skipped files and hazards (with `repo` when several)."""
    from codemods.render import scan_json as scanner

    merged: dict[str, list] = {}
    several = len(results) > 1
    for root, result in results:
        for key, items in scanner.to_json(result).items():
            for item in items:
                if several:
                    item["repo"] = str(root)
                merged.setdefault(key, []).append(item)
    return {key: merged.get(key, []) for key in ("gates", "skipped", "hazards")}


def scan_sarif(results: list[tuple[Path, Any]], provenances: list[dict | None]) -> dict[str, Any]:
    """`scan --format sarif` over several trees: one SARIF log, a run per tree, each with its git provenance."""
    from codemods.render import sarif as scanner

    merged: dict[str, Any] = {}
    for (root, result), provenance in zip(results, provenances):
        data = scanner.to_sarif(result, provenance)
        merged.setdefault("$schema", data.get("$schema"))
        merged.setdefault("version", data["version"])
        merged.setdefault("runs", []).extend(data["runs"])
    return {k: v for k, v in merged.items() if v is not None}
