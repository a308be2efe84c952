"""Checkup: one `codemod doctor` run, start to end: preflight, the log (read or followed), the A/B against a baseline, the revert.

The command parses its options, calls `checkup` and prints; this module holds
the order of the steps and the exit status. Printing stays with the caller,
through callbacks: an event as it happens while following, the findings once
they are complete (before any revert, so a failed revert still leaves the
report printed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codemods.doctor.compare import Comparison, compare
from codemods.doctor.diagnosis import Diagnosis, diagnose_file, refuse_if_not_a_log
from codemods.doctor.report import Event, Report
from codemods.doctor.rules import load_rules
from codemods.doctor.tail import follow as follow_log
from codemods.doctor.topology import Preflight, preflight, read_live_topology, read_topology_files

INTERRUPTED = "interrupted"  # Ctrl-C while following


@dataclass
class Checkup:
    """What one doctor run found, and what it did about it."""

    report: Report | None = None
    baseline: Report | None = None
    comparison: Comparison | None = None
    preflight: Preflight | None = None
    stopped: str = ""  # following ended before a final verdict: INTERRUPTED, "stopped", "no final verdict after N s"
    reverted: Any = None  # the revert's result, when one was asked for and the A/B recommended it

    @property
    def exit_code(self) -> int:
        """0 nothing wrong seen; 1 crashed, regressed, no P2P, or no final verdict while following; 130 on Ctrl-C."""
        if self.stopped == INTERRUPTED:
            return 130
        return 1 if self.stopped or not healthy(self.report, self.comparison, self.preflight) else 0


def healthy(report: Report | None, comparison: Comparison | None = None, check: Preflight | None = None) -> bool:
    """Exit 0 or 1: nothing wrong seen (ready, or still starting) vs crashed, regressed or no P2P."""
    if report is not None and report.verdict == "crashed":
        return False
    if comparison is not None and comparison.recommend_revert:
        return False
    return not (check is not None and check.status == "blocked")


def checkup(
    log: Path | None,
    rules: Iterable[Path] = (),
    *,
    tp: int | None = None,
    baseline: Path | None = None,
    max_regression: float = 5.0,
    follow: bool = False,
    timeout: float | None = None,
    check_p2p: bool = False,
    topology: Iterable[Path] = (),
    revert: Callable[[], Any] | None = None,
    on_event: Callable[[Event], None] = lambda event: None,
    on_wait: Callable[[str], None] = lambda message: None,
    on_findings: Callable[[Checkup], None] = lambda found: None,
) -> Checkup:
    """Run doctor's steps in order and return what they found.

    check_p2p reads `topology` files (or asks nvidia-smi when none are
    given); follow tails the log, calling on_event for each state change,
    until the verdict is final, `timeout` seconds pass or Ctrl-C; baseline
    adds the A/B; `revert` (the caller's way to back the recipe out) is called
    only when the A/B recommends it, after on_findings.
    """
    book = load_rules(rules) if log is not None else []
    found = Checkup()
    if check_p2p:
        topology = list(topology)
        found.preflight = preflight(read_topology_files(topology) if topology else read_live_topology(), tp)
    if log is not None:
        found.report = _followed(log, book, tp, timeout, found, on_event, on_wait) if follow else diagnose_file(log, book, tp)
        if baseline is not None:
            found.baseline = diagnose_file(baseline, book, tp)
            found.comparison = compare(found.report, found.baseline, max_regression)
    on_findings(found)
    if revert is not None and found.comparison is not None and found.comparison.recommend_revert:
        found.reverted = revert()
    return found


def _followed(log: Path, book, tp, timeout, found: Checkup, on_event, on_wait) -> Report:
    diagnosis = Diagnosis(book, tp)
    try:
        for event in follow_log(log, diagnosis, timeout=timeout, on_wait=on_wait):
            on_event(event)
    except KeyboardInterrupt:
        found.stopped = INTERRUPTED
    report = diagnosis.report(str(log))
    refuse_if_not_a_log(report)
    if not found.stopped and report.verdict == "starting" and str(log) != "-":
        found.stopped = f"no final verdict after {timeout:g} s" if timeout is not None else "stopped"
    return report
