"""Doctor's output: a report, an A/B comparison and a preflight check as JSON data or text lines (strings only; the CLI prints)."""

from __future__ import annotations

from codemods.core import commands
from codemods.doctor.checkup import Checkup
from codemods.doctor.compare import Comparison
from codemods.doctor.report import Event, Fatal, Report, tp_mismatch, when
from codemods.doctor.throughput import Throughput
from codemods.doctor.topology import LINK_KINDS, P2P_STATUS, Preflight


def checkup_json(c: Checkup) -> dict:
    """The data of `codemod doctor --format json` (the CLI puts schema_version first)."""
    data: dict = {}
    if c.preflight is not None:
        data["preflight"] = preflight_json(c.preflight)
    if c.report is not None:
        data.update(report_json(c.report))
    if c.baseline is not None and c.comparison is not None:
        data["baseline"] = report_json(c.baseline)
        data["comparison"] = comparison_json(c.comparison)
    return data


def checkup_text(c: Checkup, recipe: str, repo: str | None) -> list[str]:
    """The lines of `codemod doctor` in text: preflight, the report, the A/B."""
    out: list[str] = []
    if c.preflight is not None:
        out += preflight_text(c.preflight)
    if c.report is not None:
        out += report_text(c.report)
    if c.baseline is not None and c.comparison is not None:
        out += comparison_text(c.comparison, c.baseline, recipe, repo)
    return out


def event_text(event: Event) -> str:
    """A state change seen while following a log."""
    return f"line {event.line}: {event.text}"


def stopped_text(c: Checkup) -> str:
    """Why following ended without a final verdict."""
    verdict = c.report.verdict if c.report is not None else "unknown"
    return f"follow: {c.stopped}; the verdict so far is {verdict}"


def revert_text(c: Checkup, recipe: str, repo: object) -> str:
    """What --revert did: backed the recipe out, or kept it (and why)."""
    if c.reverted is None:
        limit = c.comparison.max_regression_pct if c.comparison is not None else 0
        return f"not reverting {recipe}: the patched run did not crash and is within --max-regression {limit:g}%"
    where = f"checked out {c.reverted.checked_out}, " if c.reverted.checked_out else ""
    return f"reverted {recipe} in {repo}: {where}deleted branch {c.reverted.record.branch}"


def fatal_json(f: Fatal | None) -> dict | None:
    if f is None:
        return None
    return {"line": f.line, "first_line": f.first_line or f.line, "rule": f.rule, "matched_rule": f.matched_rule or f.rule,
            "source": f.source or None, "message": f.message, "explanation": f.explanation, "context": f.context,
            "time": f.time or None, "phase": f.phase or None, "phase_began": f.phase_began or None,
            "known_failure": {"cause": f.cause, "remedy": f.remedy, "command": f.command or None} if f.cause else None}


def throughput_json(t: Throughput | None) -> dict | None:
    if t is None:
        return None
    return {"median": t.median, "p10": t.p10, "p90": t.p90, "samples": t.samples,
            "warmup_dropped": t.warmup_dropped, "sources": t.sources, "not_finite": t.not_finite}


def report_json(r: Report) -> dict:
    return {
        "log": r.source or None,
        "verdict": r.verdict,
        "lines": r.lines,
        "ready_line": r.ready_line,
        "fatal": fatal_json(r.fatal),
        "fatal_signals": [{"line": f.line, "rule": f.rule, "source": f.source or None, "message": f.message} for f in r.fatal_signals],
        "fatal_lines": r.fatal_lines,
        "fatal_before_ready": fatal_json(r.fatal_before_ready),
        "crashed_before_ready": None if r.verdict != "crashed" else r.ready_line is None,
        "phase": r.phase,
        "first_time": r.first_time or None,
        "last_time": r.last_time or None,
        "tp_mismatch": tp_mismatch(r),
        "milestones": r.milestones,
        "ranks_initialized": r.ranks_initialized,
        "ranks_missing": r.ranks_missing,
        "world_size": r.world_size,
        "expected_world_size": r.expected_world_size,
        "configured_tp": r.configured_tp,
        "autotuner_skips": r.autotuner_skips,
        "autotuner_skip_groups": [
            {"rule": g.rule, **g.key, "count": g.count, "tactics": g.tactics} for g in r.skip_groups
        ],
        "benign": r.benign,
        "known": {k: {"cause": c, "remedy": m, "command": x} for k, (c, m, x) in r.known.items()},
        "throughput": throughput_json(r.throughput),
        "metrics": {name: throughput_json(t) for name, t in r.metrics.items()},
    }


def comparison_json(c: Comparison) -> dict:
    return {
        "verdict": c.verdict, "baseline_verdict": c.baseline_verdict,
        "median": c.median, "baseline_median": c.baseline_median,
        "regression_pct": c.regression_pct, "max_regression_pct": c.max_regression_pct,
        "clearly_slower": c.clearly_slower, "recommend_revert": c.recommend_revert, "reasons": c.reasons,
    }


def preflight_json(p: Preflight) -> dict:
    return {
        "status": p.status, "gpus": p.gpus,
        "links": {f"{a}-{b}": v for (a, b), v in sorted(p.links.items()) if a < b},
        "p2p": {f"{a}-{b}": v for (a, b), v in sorted(p.p2p.items()) if a < b},
        "blockers": [{"pair": f"{a}-{b}", "p2p": s, "link": link or None} for a, b, s, link in p.blockers],
        "notes": p.notes,
    }


LAUNCHER_ADVICE = ("SGLang's own \"Possible solutions\" list (lower --mem-fraction-static, --cuda-graph-max-bs, "
                   "disable torch compile or CUDA graphs) is for running out of memory during capture; it does not help here")


def _tok(x: float | None) -> str:
    return f"{x:,.1f}"


def report_text(r: Report) -> list[str]:
    out = []
    if r.verdict == "ready":
        out.append(f"verdict: ready (line {r.ready_line}: the server is fired up and ready to roll)")
    elif r.verdict == "starting":
        last = f" at {r.last_time}" if r.last_time else ""
        out.append(f"verdict: starting (no ready line and no fatal error in {r.lines} lines; the log ends mid-startup{last}, during {r.phase})")
    else:
        f = r.fatal
        assert f is not None
        where = f" in {f.source}" if f.source else ""
        after = "after the ready line" if r.ready_line is not None else "before the ready line"
        out.append(f"verdict: crashed (line {f.line}{where}: {f.message}){when(f)}, {after}")
        out.append(f"  why: ({f.matched_rule or f.rule}) {f.explanation}")
        if f.cause:
            out.append(f"  cause: {f.cause}")
            out.append(f"  remedy: {f.remedy}")
            if f.command:
                out.append(f"  run: {f.command}")
            if r.benign.get("sglang-possible-solutions"):
                out.append(f"  note: {LAUNCHER_ADVICE}")
        out.append("  context:")
        out += [f"    | {c[:300]}" for c in f.context]
        later = [s for s in r.fatal_signals if s is not f and s.line > f.line]
        if later:
            more = r.fatal_lines - 1 - sum(1 for s in r.fatal_signals if s.line < f.line)
            out.append(f"  then {more} more fatal line(s), e.g. line {later[0].line} ({later[0].rule}): {later[0].message[:160]}")
    if r.fatal_before_ready:
        f = r.fatal_before_ready
        if r.ready_line is not None:
            out.append(f"note: a fatal line before the ready line (line {f.line}, {f.rule}{when(f)}): {f.message[:200]}; the server still came up")
    expected = r.expected_world_size
    mismatch = tp_mismatch(r)
    if mismatch:
        out.append(f"allreduce fusion: {mismatch}; check --tp")
    elif r.ranks_initialized or r.world_size:
        n = len(r.ranks_initialized)
        line = f"allreduce fusion: {n}/{expected} rank(s) initialized the FlashInfer workspace {r.ranks_initialized}"
        if r.ranks_missing:
            line += f"; missing {r.ranks_missing}"
        if r.world_size and expected and r.world_size != expected:
            line += f" (the log says world_size {r.world_size}, expected {expected})"
        out.append(line)
    elif expected and expected > 1:
        out.append(f"allreduce fusion: no rank initialized the FlashInfer workspace (fusion off, or not reached; TP {expected})")
    if r.autotuner_skips:
        out.append(f"autotuner: {r.autotuner_skips} tactic(s) skipped while profiling (benign: the autotuner uses another tactic)")
        for g in [g for g in r.skip_groups if g.tactics or g.key][:10]:
            what = ", ".join(g.key.values())
            tactics = f"; tactics {_ranges(g.tactics)}" if g.tactics else ""
            out.append(f"  {g.count:>5} x {what}{tactics}")
    t = r.throughput
    if t:
        out.append(
            f"throughput: median {_tok(t.median)} tok/s (p10 {_tok(t.p10)}, p90 {_tok(t.p90)}) over {t.samples} decode sample(s)"
            f" from {', '.join(t.sources)}; {t.warmup_dropped} warm-up sample(s) left out"
            + (f"; {t.not_finite} value(s) that are not finite numbers (inf, nan) ignored" if t.not_finite else "")
        )
    else:
        out.append("throughput: no `Decode batch ... gen throughput` lines")
    benign = {k: v for k, v in r.benign.items() if k != "autotuner-skip"}
    if benign:
        out.append("benign: " + ", ".join(f"{k} x{v}" for k, v in benign.items()))
    for rule, (cause, remedy, command) in r.known.items():  # a warning with a known cause and fix
        out += [f"known: ({rule})", f"  cause: {cause}", f"  remedy: {remedy}", f"  run: {command}"]
    return out


def _ranges(tactics: list[str]) -> str:
    if not all(t.lstrip("-").isdigit() for t in tactics):
        return ", ".join(tactics[:20]) + (" ..." if len(tactics) > 20 else "")
    nums = sorted({int(t) for t in tactics})
    parts, start, prev = [], nums[0], nums[0]
    for n in nums[1:] + [None]:  # type: ignore[list-item]
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(f"{start}-{prev}" if prev != start else f"{start}")
        if n is not None:
            start = prev = n
    return ", ".join(parts)


def comparison_text(c: Comparison, baseline: Report, recipe: str, repo: str | None) -> list[str]:
    out = [f"baseline ({baseline.source or 'baseline'}): {baseline.verdict}"
           + (f", median {_tok(c.baseline_median)} tok/s" if c.baseline_median is not None else ", no throughput lines")]
    if c.regression_pct is None:
        out.append("A/B: cannot compare throughput (one of the logs has no decode throughput lines)")
    elif c.regression_pct > 0:
        clear = " (every patched p90 below the baseline p10: not noise)" if c.clearly_slower else ""
        out.append(
            f"A/B: the patched run is SLOWER: median {_tok(c.median)} vs {_tok(c.baseline_median)} tok/s, "
            f"{c.regression_pct:g}% slower{clear}"
        )
    else:
        out.append(f"A/B: the patched run is not slower: median {_tok(c.median)} vs {_tok(c.baseline_median)} tok/s ({-c.regression_pct:g}% faster)")
    if c.recommend_revert:
        for reason in c.reasons:
            out.append(f"  {reason}")
        out.append("recommend: " + (commands.shell("codemod", "revert", recipe, "--repo", repo) if repo else f"codemod revert {recipe} --repo PATH"))
    elif c.regression_pct is not None:
        out.append(f"within --max-regression {c.max_regression_pct:g}%: keep the patch")
    return out


def preflight_text(p: Preflight) -> list[str]:
    head = {"ok": "P2P between every GPU pair", "blocked": "GPU pairs without P2P", "unknown": "P2P not known"}[p.status]
    out = [f"preflight: {p.status}: {head} ({len(p.gpus)} GPU(s))"]
    groups: dict[tuple[str, str], list[str]] = {}
    for a, b, status, link in p.blockers:
        groups.setdefault((status, link), []).append(f"{a}-{b}")
    for (status, link), pairs in groups.items():
        over = f" over {link} ({_link_words(link)})" if link else ""
        shown = ", ".join(pairs[:8]) + (f" and {len(pairs) - 8} more" if len(pairs) > 8 else "")
        out.append(f"  no P2P read ({status}: {P2P_STATUS[status]}){over}: {len(pairs)} pair(s): GPU {shown}")
    out += [f"  note: {n}" for n in p.notes]
    return out


def _link_words(link: str) -> str:
    if link.startswith("NV"):
        return f"{link[2:]} bonded NVLinks"
    return LINK_KINDS.get(link, "unknown link")
