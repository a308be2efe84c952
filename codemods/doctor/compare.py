"""A/B: a patched run's report against its baseline's: how much slower, and whether to revert."""

from __future__ import annotations

from dataclasses import dataclass

from codemods.doctor.report import Report


@dataclass
class Comparison:
    baseline_verdict: str
    verdict: str
    baseline_median: float | None
    median: float | None
    regression_pct: float | None  # positive: the patched run is slower
    max_regression_pct: float
    recommend_revert: bool
    clearly_slower: bool  # the patched p90 is below the baseline p10
    reasons: list[str]


def compare(patched: Report, baseline: Report, max_regression_pct: float = 5.0) -> Comparison:
    """Patched run against its baseline: how much slower (by median throughput), and whether to revert."""
    reasons: list[str] = []
    a, b = patched.throughput, baseline.throughput
    regression = None
    clearly = False
    if a and b and b.median > 0:
        regression = round((b.median - a.median) / b.median * 100, 2)
        clearly = a.p90 < b.p10
        if regression > max_regression_pct:
            reasons.append(
                f"patched median {a.median:g} tok/s is {regression:g}% below baseline {b.median:g} tok/s "
                f"(over the {max_regression_pct:g}% allowed)"
            )
    if patched.verdict == "crashed" and baseline.verdict != "crashed":
        reasons.append(f"patched run crashed; baseline is {baseline.verdict}")
    return Comparison(
        baseline_verdict=baseline.verdict, verdict=patched.verdict,
        baseline_median=b.median if b else None, median=a.median if a else None,
        regression_pct=regression, max_regression_pct=max_regression_pct,
        recommend_revert=bool(reasons), clearly_slower=clearly, reasons=reasons,
    )
