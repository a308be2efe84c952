"""Diagnosis: one server log read line by line against the rulebook, into a Report (ready, starting or crashed, and why).

A fatal line is placed in time and phase by the log's own timestamps (the last
"[YYYY-MM-DD HH:MM:SS" seen). A file none of whose lines has SGLang's
timestamp (or another mark only a server's output has) is refused: not a
server log, even when it quotes the messages the rules match (a README).

The verdict: *ready* when the ready line was seen and no fatal line came after
the last one; *crashed* when a fatal line came after it, or before it with no
ready line at all; *starting* otherwise (the log ends mid-startup).

Reading is streaming: one line at a time, context in bounded deques.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from codemods.core import errors
from codemods.doctor.logfile import log_lines
from codemods.doctor.report import PHASE_SERVING, PHASE_START, Event, Fatal, Report, SkipGroup, when
from codemods.doctor.rules import AUTOTUNER_SKIPS, READY, THROUGHPUT, LogRule
from codemods.doctor.throughput import Samples, steady_state
from codemods.doctor.topology import parse_topology

# "[2026-02-03 09:13:13 TP6] ..." (SGLang), "2026-02-03 09:13:10,300 - INFO - ..." (FlashInfer's logger), after an optional "(Actor pid=1) "
_TIMESTAMP = re.compile(r"^(?:\([^)]*\)\s*)?\[?(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)")

CONTEXT_BEFORE = 10
CONTEXT_AFTER = 5
BLOCK_TAIL = 12  # traceback lines kept for the context (plus its first line)
BLOCK_LIMIT = 400  # a traceback longer than this is closed on its last line
MAX_SIGNALS = 20  # fatal lines listed beyond the first
MAX_GROUPS = 64  # distinct groups kept per benign rule
MAX_TACTICS = 256
MAX_SOURCES = 64  # ranks kept apart per metric; more go to "(other)"

_TRACEBACK = "Traceback (most recent call last):"
# A line only a server's output has, besides a leading timestamp: one after a prefix (journald, a pipe),
# torch's "[rank3]:", or a Python process's own traceback (a crash before logging started).
_LOG_SHAPED = re.compile(
    r"\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d|^(?:\([^)]*\)\s*)?\[rank\d+\]:|^(?:\[rank\d+\]:\s*)?Traceback \(most recent call last\):"
    # vLLM: `(EngineCore_DP0 pid=42010) INFO 12-04 21:10:15 [core.py:93] ...` (no year: its time is not read)
    r"|^\(\w+ pid=\d+\) (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d \["
)
_CHAINED = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning|Fault|Failure)?(?::|$)")
# "[2026-02-03 09:13:13 DP1 TP4] ...", after an optional Ray "(SchedulerActor pid=1) "; or torch's "[rank3]:"
_SOURCE = re.compile(r"(?:\([^)]*\)\s*)?\[(?:\S+ \S+?((?: (?:DP|PP|TP|EP)\d+)+)|(rank\d+))\]")


@dataclass
class _Block:
    rule: LogRule
    start: int
    first: str
    source: str
    tail: deque
    length: int = 0
    awaiting: bool = False  # the rule matched; the traceback may start on the next line
    chained: bool = False  # "During handling of the above exception ...": part of the event already reported


class Diagnosis:
    """The state of one log read so far. feed() lines in order; report() at any time. No I/O."""

    def __init__(self, rules: list[LogRule], tp: int | None = None):
        self.rules = rules
        self._checks = [  # LogRule.search, unpacked for the loop in _classify
            (r.needles[0] if len(r.needles) == 1 else None, r.needles if len(r.needles) > 1 else None, r.pattern.search, r)
            for r in rules
        ]
        self.tp = tp
        self.lineno = 0
        self.recent: deque[str] = deque(maxlen=CONTEXT_BEFORE)
        self.block: _Block | None = None
        self.ready_line: int | None = None
        self.fatal_after_ready: Fatal | None = None
        self.fatal_before_ready: Fatal | None = None
        self.signals: list[Fatal] = []
        self.signal_count = 0
        self.after: list[tuple[Fatal, int]] = []  # fatals still collecting lines after them
        self.milestones: dict[str, int] = {}
        self.ranks: set[int] = set()
        self.world_sizes: set[int] = set()
        self.configured_tp: int | None = None
        self.benign: dict[str, int] = {}
        self.known: dict[str, tuple[str, str, str]] = {}
        self.tallies: dict[str, int] = {}
        self.groups: dict[tuple, SkipGroup] = {}
        self.series: dict[str, dict[str, Samples]] = {}  # metric -> source -> samples
        self.not_finite: dict[str, int] = {}  # metric -> values left out as inf or nan
        self.series_ready: dict[str, dict[str, int]] = {}  # samples each source had logged at the first ready line
        self.crash_announced = False
        self.phase = PHASE_START
        self.phase_began = ""
        self.first_time = ""
        self.time = ""
        self.recognised = 0
        self.head: list[str] = []
        self.chain: tuple[str, LogRule] | None = None  # after a traceback's exception line: ("closed"|"marker", its rule)

    # -------------------------------------------------------------- feeding

    @property
    def verdict(self) -> str:
        if self.fatal_after_ready or (self.fatal_before_ready and self.ready_line is None):
            return "crashed"
        return "ready" if self.ready_line is not None else "starting"

    @property
    def final(self) -> bool:
        """Ready, or crashed with its cause complete (a traceback read to its exception line)."""
        return self.verdict == "ready" or (self.verdict == "crashed" and self.crash_announced)

    def feed(self, line: str) -> list[Event]:
        self.lineno += 1
        events: list[Event] = []
        line = line.rstrip("\r\n")
        if self.lineno <= 40:
            self.head.append(line)
        first = line[:1]
        if first == "[" and line[5:6] == "-" and line[14:15] == ":" and line[11:12] in " T":  # "[2026-02-03 09:13:13": the fast path
            stamp = line[1:20] if line[1:5].isdigit() else ""
        elif first and first in "(0123456789":
            m = _TIMESTAMP.match(line)
            stamp = m.group(1) if m else ""
        else:
            stamp = ""
        if stamp:
            self.time = stamp.replace("T", " ")
            self.first_time = self.first_time or self.time
            self.recognised += 1
        elif not self.recognised and _LOG_SHAPED.search(line):
            self.recognised += 1
        if self.after:
            for fatal, _ in self.after:
                fatal.context.append(line)
            self.after = [(fatal, left - 1) for fatal, left in self.after if left > 1]
        if self.block is not None and self._continue_block(line, events):
            self.recent.append(line)
            return events
        if self.chain is not None and self._chained(line):
            self.recent.append(line)
            return events
        found = self._classify(line)
        if found is not None:
            rule, match = found
            self._apply(rule, match, line, events)
        self.recent.append(line)
        return events

    def _classify(self, line: str) -> tuple[LogRule, re.Match] | None:
        for needle, several, search, rule in self._checks:  # runs for every line: kept flat
            if needle is not None:
                if needle not in line:
                    continue
            elif several is not None:
                for needle in several:
                    if needle in line:
                        break
                else:
                    continue
            match = search(line)
            if match:
                return rule, match
        return None

    def _apply(self, rule: LogRule, match: re.Match, line: str, events: list[Event]) -> None:
        if rule.klass == "phase":
            if self.phase != PHASE_SERVING:
                self.phase, self.phase_began = rule.phase, self.time
            return
        if rule.klass == "metric":
            self._metric(rule, match, line)
            return
        groups = {k: v for k, v in match.groupdict().items() if v is not None}
        if "tp_size" in groups:
            self.configured_tp = int(groups["tp_size"])
        if rule.block:
            if self.block is not None:  # a second traceback began before the first ended
                self._close_block(self.block.tail[-1].strip() if self.block.tail else self.block.first.strip(), events)
            self.block = _Block(rule, self.lineno, line, _source(line), deque(maxlen=BLOCK_TAIL), awaiting=_TRACEBACK not in line)
            if rule.klass == "fatal":
                return  # the event is the traceback's exception line (or this line, if no traceback follows)
        if rule.klass == "benign":
            self._benign(rule, groups, line, events)
        elif rule.klass == "milestone":
            self._milestone(rule, groups, line, events)
        else:
            self._fatal(Fatal(self.lineno, rule.id, line.strip(), rule.explanation, [*self.recent, line], _source(line),
                              cause=rule.cause, remedy=rule.remedy, command=rule.command), events)

    def _benign(self, rule: LogRule, groups: dict, line: str, events: list[Event]) -> None:
        first = rule.id not in self.benign
        self.benign[rule.id] = self.benign.get(rule.id, 0) + 1
        if first and rule.command:  # a known warning with a fix (vLLM's fusion disabled for want of a table row)
            self.known[rule.id] = (rule.cause, rule.remedy, rule.command)
        if rule.tally:
            self.tallies[rule.tally] = self.tallies.get(rule.tally, 0) + 1
        keys = {k: v.strip() for k, v in groups.items() if k not in ("tactic", "tp_size")}
        if keys or "tactic" in groups:
            key = (rule.id, *sorted(keys.items()))
            group = self.groups.get(key)
            if group is None:
                if sum(1 for g in self.groups.values() if g.rule == rule.id) >= MAX_GROUPS:
                    key, keys = (rule.id, ("other", "*")), {"other": "*"}
                group = self.groups.setdefault(key, SkipGroup(rule.id, keys))
            group.count += 1
            tactic = groups.get("tactic", "").strip()
            if tactic and tactic not in group.tactics and len(group.tactics) < MAX_TACTICS:
                group.tactics.append(tactic)
        if first and rule.tally:
            what = ", ".join(f"{v}" for v in keys.values())
            events.append(Event("benign", self.lineno, f"{rule.id}: {what or line.strip()[:120]} (benign; counted, not fatal)"))

    def _milestone(self, rule: LogRule, groups: dict, line: str, events: list[Event]) -> None:
        first = rule.id not in self.milestones
        if rule.phase and self.phase not in (PHASE_SERVING, rule.phase):
            self.phase, self.phase_began = rule.phase, self.time
        elif rule.marks == READY:
            self.phase, self.phase_began = PHASE_SERVING, self.time
        self.milestones.setdefault(rule.id, self.lineno)
        if rule.marks == READY:
            self.ready_line = self.lineno
            self.fatal_after_ready = None
            self.crash_announced = False
            for source_samples, marks in ((self.series.get(m, {}), self.series_ready.setdefault(m, {})) for m in list(self.series)):
                for source, samples in source_samples.items():
                    marks.setdefault(source, samples.count)
            if first:
                events.append(Event("ready", self.lineno, f"ready: {line.strip()}"))
            return
        if "rank" in groups:
            rank = int(groups["rank"])
            new = rank not in self.ranks
            if len(self.ranks) < 4096:
                self.ranks.add(rank)
            if "world_size" in groups:
                self.world_sizes.add(int(groups["world_size"]))
            if new:
                expected = self._expected()
                of = f" of {expected}" if expected else ""
                events.append(Event("milestone", self.lineno, f"{rule.id}: rank {rank} up ({len(self.ranks)}{of})"))
            return
        if first:
            events.append(Event("milestone", self.lineno, f"{rule.id}: {line.strip()[:160]}"))

    def _metric(self, rule: LogRule, match: re.Match, line: str) -> None:
        try:
            value = float(match.group("value"))
        except (TypeError, ValueError):
            return
        if not math.isfinite(value):  # "1e999" reads as inf: the A/B median would be nan ("keep the patch")
            self.not_finite[rule.metric] = self.not_finite.get(rule.metric, 0) + 1
            return
        named = match.group("source") if "source" in rule.pattern.groupindex else None
        source = (" ".join(named.split()) if named is not None else _source(line)) or "-"
        per_source = self.series.get(rule.metric)
        if per_source is None:
            per_source = self.series[rule.metric] = {}
        samples = per_source.get(source)
        if samples is None:
            if len(per_source) >= MAX_SOURCES:
                source = "(other)"
            samples = per_source.setdefault(source, Samples())
        samples.add(value)

    def _fatal(self, fatal: Fatal, events: list[Event]) -> None:
        fatal.time, fatal.phase, fatal.phase_began = self.time, self.phase, self.phase_began
        self.signal_count += 1
        if len(self.signals) < MAX_SIGNALS:
            self.signals.append(fatal)
        decided: Fatal | None = None
        if self.ready_line is not None:
            if self.fatal_after_ready is None:
                self.fatal_after_ready = decided = fatal
        elif self.fatal_before_ready is None:
            self.fatal_before_ready = decided = fatal
        if decided:
            self.after.append((fatal, CONTEXT_AFTER))
            if self.verdict == "crashed" and not self.crash_announced:
                self.crash_announced = True
                where = f"{fatal.source} " if fatal.source else ""
                events.append(Event("crashed", fatal.line, f"crashed: {where}{fatal.message} ({fatal.rule}){when(fatal)}"))

    # -------------------------------------------------------------- traceback blocks

    def _continue_block(self, line: str, events: list[Event]) -> bool:
        """True when the line belongs to the open traceback (so it is not classified on its own)."""
        block = self.block
        assert block is not None
        stripped = line.strip()
        if block.awaiting:
            block.awaiting = False
            if stripped.endswith(_TRACEBACK) or stripped.startswith(_TRACEBACK):
                block.tail.append(line)
                return True
            self.block = None  # no traceback follows: the matched line is the event
            if block.rule.klass == "fatal":
                first = Fatal(block.start, block.rule.id, block.first.strip(), block.rule.explanation,
                              [*self.recent], block.source, cause=block.rule.cause, remedy=block.rule.remedy,
                              command=block.rule.command)
                self._fatal(first, events)
            return False
        block.length += 1
        if (
            not stripped
            or line[:1] in (" ", "\t")
            or stripped in _CHAINED
            or stripped == _TRACEBACK
            or stripped.startswith("^")
        ):
            block.tail.append(line)
            if block.length < BLOCK_LIMIT:
                return True
            self._close_block(stripped or "(traceback cut off)", events)
            return True
        if _EXCEPTION_LINE.match(stripped):
            block.tail.append(line)
            self._close_block(stripped, events)
            return True
        return False  # another process's line in the middle: classified normally, block stays open

    def _chained(self, line: str) -> bool:
        """True when the line continues a chained exception of the traceback just closed (one event, not two)."""
        state, rule = self.chain  # type: ignore[misc]
        stripped = line.strip()
        if not stripped:
            return False
        if stripped in _CHAINED:
            self.chain = ("marker", rule)
            return True
        self.chain = None
        if state == "marker" and stripped == _TRACEBACK:
            self.block = _Block(rule, self.lineno, line, _source(line), deque(maxlen=BLOCK_TAIL), chained=True)
            return True
        return False

    def _close_block(self, message: str, events: list[Event]) -> None:
        block = self.block
        assert block is not None
        self.block = None
        if block.rule.klass != "fatal" or block.chained:
            self.chain = ("closed", block.rule) if block.chained else None
            return
        self.chain = ("closed", block.rule)
        cause = block.rule  # the rule that matched the exception line explains it, alone
        for rule in self.rules:
            if rule.klass == "fatal" and not rule.block and rule.search(message):
                cause = rule
                break
        context = [block.first] + (["..."] if block.length > len(block.tail) else []) + list(block.tail)
        self._fatal(Fatal(self.lineno, block.rule.id, message, cause.explanation, context, block.source, block.start,
                          cause.id if cause is not block.rule else "", cause=cause.cause, remedy=cause.remedy,
                          command=cause.command), events)

    def finish(self) -> list[Event]:
        """The log ended: close an open traceback on its last line."""
        events: list[Event] = []
        if self.block is not None:
            if self.block.awaiting:
                self.block.awaiting = False
                block, self.block = self.block, None
                if block.rule.klass == "fatal":
                    self._fatal(Fatal(block.start, block.rule.id, block.first.strip(), block.rule.explanation,
                                      [block.first], block.source), events)
            else:
                last = self.block.tail[-1].strip() if self.block.tail else self.block.first.strip()
                self._close_block(last or "(traceback cut off)", events)
        return events

    # -------------------------------------------------------------- report

    def _expected(self) -> int | None:
        return self.tp or (max(self.world_sizes) if self.world_sizes else None) or self.configured_tp

    def report(self, source: str = "") -> Report:
        expected = self._expected()
        missing = sorted(set(range(expected)) - self.ranks) if expected and (self.ranks or self.world_sizes) else []
        fatal = self.fatal_after_ready or (self.fatal_before_ready if self.ready_line is None else None)
        metrics = {
            name: replace(t, not_finite=self.not_finite.get(name, 0)) for name, per_source in self.series.items()
            if (t := steady_state(per_source, self.series_ready.get(name, {}))) is not None
        }
        groups = sorted(self.groups.values(), key=lambda g: (-g.count, g.rule))
        return Report(
            verdict=self.verdict,
            lines=self.lineno,
            ready_line=self.ready_line,
            fatal=fatal,
            fatal_signals=list(self.signals),
            fatal_lines=self.signal_count,
            fatal_before_ready=self.fatal_before_ready,
            milestones=dict(self.milestones),
            ranks_initialized=sorted(self.ranks),
            world_size=max(self.world_sizes) if self.world_sizes else None,
            expected_world_size=expected,
            ranks_missing=missing,
            configured_tp=self.configured_tp,
            autotuner_skips=self.tallies.get(AUTOTUNER_SKIPS, 0),
            benign=dict(self.benign),
            known=dict(self.known),
            skip_groups=groups,
            throughput=metrics.get(THROUGHPUT),
            metrics=metrics,
            source=source,
            phase=self.phase,
            first_time=self.first_time,
            last_time=self.time,
            recognised=self.recognised,
            head=list(self.head),
        )


def _source(line: str) -> str:
    """The rank prefix of a log line: "TP6", "DP1 TP4", "rank3" ([rank3]: from torch), or ""."""
    m = _SOURCE.match(line)
    return (m.group(1) or m.group(2)).strip() if m else ""


def diagnose(lines: Iterable[str], rules: list[LogRule], tp: int | None = None, source: str = "") -> Report:
    """Read every line and report."""
    diagnosis = Diagnosis(rules, tp)
    for line in lines:
        diagnosis.feed(line)
    diagnosis.finish()
    return diagnosis.report(source)


def diagnose_file(path: Path, rules: list[LogRule], tp: int | None = None) -> Report:
    report = diagnose(log_lines(path), rules, tp, str(path))
    refuse_if_not_a_log(report)
    return report


def looks_like(head: list[str]) -> str:
    """What a file that is not a server log looks like, from its first lines."""
    text = "\n".join(head)
    links, p2p = parse_topology(text)
    if p2p and not links:
        return "`nvidia-smi topo -p2p r` output (a GPU peer-to-peer matrix); give it to `codemod doctor --preflight --topo FILE`"
    if links or p2p:
        return "`nvidia-smi topo -m` output (a GPU topology matrix); give it to `codemod doctor --preflight --topo FILE`"
    if "NVIDIA-SMI" in text and "Driver Version" in text:
        return "`nvidia-smi` output, not a server log"
    first = next((line.strip() for line in head if line.strip()), "")
    if first[:1] in "{[" and first:
        return "a JSON document, not a server log"
    if any("\0" in line for line in head):
        return "a binary file, not a server log"
    return "text without SGLang's `[YYYY-MM-DD HH:MM:SS]` timestamps or any message doctor knows"


def refuse_if_not_a_log(report: Report) -> None:
    """A file with lines, none of which is SGLang-shaped, is not judged (its verdict would be a meaningless `starting`)."""
    if report.recognised or not any(line.strip() for line in report.head):
        return
    raise errors.BadUsage(
        f"not an SGLang or vLLM server log: it looks like {looks_like(report.head)}", where=report.source or "-",
        hint="give doctor the server's output (`python -m sglang.launch_server ... 2>&1 | tee server.log`, or `vllm serve ...`)",
    )
