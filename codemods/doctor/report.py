"""What doctor found in one log: the Report and its records, and the facts read off a report.

A fatal line is placed in time and phase by the log's own timestamps; `when`
says it in words. `tp_mismatch` tells a --tp that does not fit the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from codemods.doctor.throughput import Throughput

PHASE_START = "start-up"  # before the first phase milestone
PHASE_SERVING = "serving"  # after the ready line


@dataclass
class Fatal:
    line: int
    rule: str
    message: str
    explanation: str
    context: list[str] = field(default_factory=list)
    source: str = ""  # the rank prefix of the line, e.g. "TP6"
    first_line: int = 0  # where the event began (a traceback's first line); line is its message
    matched_rule: str = ""  # the rule that matched the message (a traceback's exception line), when not `rule`
    time: str = ""  # the log's last timestamp at this line
    phase: str = ""  # start-up, weight loading, ..., serving
    phase_began: str = ""  # the timestamp of the phase's first line
    cause: str = ""
    remedy: str = ""
    command: str = ""


@dataclass
class SkipGroup:
    rule: str
    key: dict[str, str]
    count: int = 0
    tactics: list[str] = field(default_factory=list)


@dataclass
class Report:
    verdict: str  # "ready", "starting" or "crashed"
    lines: int
    ready_line: int | None
    fatal: Fatal | None
    fatal_signals: list[Fatal]  # the first MAX_SIGNALS fatal lines
    fatal_lines: int  # all of them
    fatal_before_ready: Fatal | None
    milestones: dict[str, int]
    ranks_initialized: list[int]
    world_size: int | None
    expected_world_size: int | None
    ranks_missing: list[int]
    configured_tp: int | None
    autotuner_skips: int
    benign: dict[str, int]
    skip_groups: list[SkipGroup]
    throughput: Throughput | None
    metrics: dict[str, Throughput]
    source: str = ""
    phase: str = PHASE_START  # where the log ended
    first_time: str = ""  # the log's first and last timestamps
    last_time: str = ""
    # a known warning with a fix (a benign rule with `cause`, `remedy`, `command`): rule id -> (cause, remedy, command)
    known: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    recognised: int = 0  # lines with an SGLang timestamp (or another mark of server output): 0 means not a server log
    head: list[str] = field(default_factory=list)  # the first lines, to say what a file that is not a log looks like


@dataclass
class Event:
    """A change of state worth a line while following a log."""

    kind: str  # "milestone", "ready", "crashed", "benign"
    line: int
    text: str


def tp_mismatch(r: Report) -> str | None:
    """--tp N against a log whose ranks or world_size say another TP size."""
    expected = r.expected_world_size
    if not expected or r.configured_tp is None and not r.world_size and not r.ranks_initialized:
        return None
    seen = r.world_size or (max(r.ranks_initialized) + 1 if r.ranks_initialized else 0) or r.configured_tp
    beyond = [k for k in r.ranks_initialized if k >= expected]
    if seen and seen != expected or beyond:
        size = seen or max(beyond) + 1
        return f"--tp {expected}, but the log is from a TP {size} server ({len(r.ranks_initialized)} rank(s) initialized, ranks {r.ranks_initialized})"
    return None


def when(f: Fatal) -> str:
    """ "at 2026-02-03 09:13:13, during CUDA graph capture (began 09:13:12)", from the log's own timestamps."""
    at = f" at {f.time}" if f.time else ""
    began = ""
    if f.phase_began and f.phase_began != f.time:
        began = f" (began {f.phase_began[11:] if f.phase_began[:10] == f.time[:10] else f.phase_began}"
        try:
            from datetime import datetime

            seconds = (datetime.fromisoformat(f.time) - datetime.fromisoformat(f.phase_began)).total_seconds()
            began += f", {seconds:g} s before)"
        except ValueError:
            began += ")"
    return f"{at}, during {f.phase}{began}" if f.phase else at
