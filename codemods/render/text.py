"""What the user reads as text: per-gate summaries, the arch matrix, and the lines of run, status, revert, verify and recipe test.

Pure: records in, lines out (no trailing newline); the CLI prints them, data
on stdout and reports on stderr.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from codemods.core import commands
from codemods.core.arch import Arch, ArchSet

if TYPE_CHECKING:
    from codemods.plan.changes import Plan, PlannedChange


class _Tree:
    """A tree known only by its folder (a printed command names it with --repo)."""

    def __init__(self, path) -> None:
        self.path, self.package, self.python = path, None, None


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


def advice_lines(advice, several: bool) -> list[str]:
    """The recipe's upgrade advice (first option, before any patching); (workspace, line) pairs, named when several trees."""
    return [f"first option: {line}" + (f" ({workspace.path})" if several else "") for workspace, line in advice]


def run_lines(recipe, workspace, result, universe: tuple[Arch, ...], cache: dict | None) -> list[str]:
    """What `run` says of one tree on stderr: the gates, the matrix, the outcome, warnings and the JIT cache."""
    plan, prefix = result.plan, result.prefix
    shown = result.selected if result.status in ("dry-run", "applied", "nothing-selected") else None
    # a tree that already has the fix: the one outcome line says it all
    lines = [] if result.status == "already-enabled" else summary_lines(plan, prefix, shown)
    if result.status in ("dry-run", "applied"):
        lines += matrix(plan, tuple(dict.fromkeys((*universe, *plan.targets))), shown)  # a column for every target arch
    project = f"{plan.tree.project.title} {plan.tree.version() or ''}".strip()
    if result.status == "already-enabled":
        lines.append(
            f"already enabled: {project} at {workspace.path} already admits {', '.join(a.name for a in plan.targets)}; nothing to do, no branch made"
        )
    elif result.status == "not-in-this-version":
        lines.append(f"not in this version: every change of {recipe.id} is absent from {project} at {workspace.path}; nothing to do, no branch made")
    elif result.status == "already-applied":
        lines.append(f"already applied: {recipe.id} is on the current branch {result.branch}; nothing to do")
    elif result.status == "nothing-selected":
        lines.append("nothing selected; nothing written")
    elif result.status == "dry-run":
        lines.append(f"dry run: {len(result.selected)} change(s) planned for {project}; nothing written")
    else:
        lines.append(f"applied {len(result.commits)} change(s) to {project} on branch {result.branch} (base {result.base.split('@')[0]})")
        lines += [f"  {sha[:10]}  {cid}" for sha, cid in result.commits]
    lines += [
        f"warning: half-patch applied with --force: {reason}; `codemod verify` will fail this tree"
        for reason in result.forced_reasons
    ]
    lines += cache_lines(cache)
    return lines


def backout_lines(recipe, trees, results) -> list[str]:
    """After a run that applied anything: the one command that backs it out of every tree it changed, as given (paste it)."""
    changed = [tree for tree, result in zip(trees, results) if result.status == "applied"]
    if not changed:
        return []
    return [f"this is an experiment: benchmark it; to back it out: {commands.codemod('revert', recipe.id, trees=changed)}"]


def cache_lines(cache: dict | None) -> list[str]:
    """FlashInfer's cached builds of the changed JIT modules: removed, would be removed, stale, or none."""
    if not cache:
        return []
    modules = ", ".join(cache["modules"])
    lines = [f"removed stale JIT build: {path}" for path in cache["removed"]]
    lines += [f"would remove stale JIT build: {path}" for path in cache["would_remove"]]
    if not cache["removed"] and not cache["would_remove"]:
        if cache["stale"]:
            lines.append(f"stale JIT builds of {modules} (pass --clear-jit-cache to remove them):")
            lines += [f"  {path}" for path in cache["stale"]]
        else:
            lines.append(f"JIT modules affected: {modules}; no cached builds under {cache['root']}/{cache['version']}")
    return lines


def status_lines(statuses) -> list[str]:
    """`status`: per repository an interrupted operation, the applied recipes with their commits, and drift."""
    lines = []
    for one in statuses:
        repo, interrupted = one.repo, one.interrupted
        if interrupted and interrupted.get("corrupt"):
            lines.append(
                f"interrupted: codemod's journal in {repo.state_dir} cannot be read; check `git status` and `git branch`, "
                "check out your base branch and delete any codemod/ branch, then delete journal.json "
                "(installed package: `codemod revert RECIPE --package NAME --forget`)"
            )
        elif interrupted:
            back = commands.codemod("revert", str(interrupted.get("recipe")), trees=one.trees)
            lines.append(
                f"interrupted: `{interrupted.get('op')} {interrupted.get('recipe')}` in {repo.root} stopped after step "
                f"{interrupted.get('step')} (pid {interrupted.get('pid')}); run it again to finish, or "
                f"`{back}` to go back to the base"
            )
        if not one.records:
            lines.append(f"no recipe applied in {repo.root}")
        for r in one.records:
            marker = " (checked out)" if r.current else ""
            state = "reverted (commits kept)" if r.reverted else "applied"
            made = f" (codemod made it on {r.made_on}, not on {r.branch})" if r.made_on and r.made_on != r.branch else ""
            base = f"base {r.base_ref or 'detached'} @ {r.base_sha[:12]}"
            if r.worktree:
                lines.append(f"{r.recipe}: {state} on {r.branch}{made}, checked out in the worktree {r.worktree}, not in {repo.root}; {base}")
            else:
                lines.append(f"{r.recipe}: {state} in {repo.root} on {r.branch}{marker}{made}, {base}")
            lines += [f"  {c.sha[:10]}  {c.change:<40} {c.subject}" for c in r.commits]
            subjects = {c.sha: c.subject for c in r.commits}
            lines += [f"  {sha[:10]}  {'(revert of codemod commit)':<40} Revert {subjects.get(undone, undone[:10])!r}" for sha, undone in r.reverts]
            lines += [f"  {sha[:10]}  {'(not codemod: under its commits)':<40} {subject}" for sha, subject in r.below]
            lines += [f"  {sha[:10]}  {'(your commit on top)':<40} {subject}" for sha, subject in r.foreign]
        if one.drift:
            lines.append(f"  warning: changed outside codemod (package reinstalled or upgraded?): {', '.join(one.drift)}")
    return lines


def revert_lines(recipe_id: str, reverted) -> list[str]:
    """`revert`: per tree what was (or, with --dry-run, would be) done."""
    lines = []
    for workspace, result in reverted:
        root, r, mode = workspace.path, result.record, result.mode
        if mode == "would-forget":
            lines.append(f"would forget codemod's record of {root}; no file would be touched; nothing written")
        elif mode == "would-revert-commits":
            lines.append(f"would revert {len(result.reverted)} codemod commit(s) on {r.branch} with revert commits (no branch deleted), keeping your {len(r.foreign)}; nothing written")
        elif mode == "would-delete-branch":
            where = f"check out {result.checked_out}, " if result.checked_out else ""
            lines.append(f"would revert {recipe_id} in {root}: {where}delete branch {r.branch} ({len(result.reverted)} commit(s)); nothing written")
        elif mode == "recovered":
            lines.append(f"reverted {recipe_id} in {root}: the interrupted operation was put back to its base")
        elif mode == "forgotten":
            lines.append(f"forgot codemod's record of {root}; no file was touched")
        elif mode == "reverted-commits":
            lines.append(
                f"reverted {len(result.reverted)} codemod commit(s) on {r.branch} with revert commits (no branch deleted); "
                f"your {len(r.foreign)} commit(s) are kept"
            )
        else:
            where = f"checked out {result.checked_out}, " if result.checked_out else ""
            lines.append(f"reverted {recipe_id} in {root}: {where}deleted branch {r.branch} ({len(result.reverted)} commit(s))")
    return lines


def recipe_line(recipe) -> str:
    """`list`: one recipe, its projects and how many changes."""
    projects = ", ".join(sorted({c.project for c in recipe.changes}))
    return f"{recipe.id:<18} {recipe.summary}  [{projects}; {len(recipe.changes)} changes]"


def case_text(results) -> str:
    """`recipe test`: ok/FAIL per [[test]] case, the expected-vs-got diff of a failed rewrite, and the count."""
    out = []
    for result in results:
        mark = "ok  " if result.ok else "FAIL"
        out.append(f"{mark} {result.case.name}: {result.message}\n")
        if not result.ok and result.case.outcome == "changed":
            expected = (result.case.after or "").splitlines(keepends=True)
            out.append("".join(difflib.unified_diff(expected, result.got.splitlines(keepends=True), "expected", "got")))
    failed = sum(not r.ok for r in results)
    out.append(f"{len(results) - failed} passed, {failed} failed\n")
    return "".join(out)


def scan_stats_line(root, result) -> str:
    """`scan --verbose`: what the scan of one tree did (files, cache hits, seconds)."""
    stats = ", ".join(f"{k} {v}" for k, v in result.stats.items()) if isinstance(result.stats, dict) else str(result.stats)
    return f"scanned {root}: {stats}"


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
    if result.status == "nothing-to-prove":
        lines.append(
            "nothing to prove: no CUDA file changed since the base, so no arch was compared "
            "(the preprocessor proof compares CUDA sources; the change is elsewhere)"
        )
        return lines
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
    if headers.note():
        notes.append(f"note: {headers.note()}")
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
                    "hint: for a proof with the real headers: "
                    + commands.shell("git", "-C", str(ctx.repo.root), "submodule", "update", "--init", *headers.submodules)
                    + " (or pass --include DIR)"
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
            trees = [_Tree(ctx.repo.root)]
            notes.append(
                f"hint: apply the guards too: `{commands.codemod('revert', ctx.recipe, trees=trees)}`, then "
                f"`{commands.codemod('run', ctx.recipe, trees=trees)}` with all its changes (no --only/--skip); "
                "or keep only the revert"
            )
        else:
            notes.append("hint: widen those guards together with the JIT gate (`codemod run RECIPE` does both), or undo the JIT gate change")
    return notes
