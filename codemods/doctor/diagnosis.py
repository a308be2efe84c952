"""Read an SGLang server log (FlashInfer's messages included) and say how the server is doing.

A log is read line by line against a rulebook (targets/doctor/sglang.toml,
plus the user's --rules files). Each rule is data: a regular expression, a
class and an explanation. The first rule that matches a line decides what the
line is, so a benign rule placed before the fatal ones (the ServerArgs dump)
keeps words inside it from counting as events.

  fatal      the server is going down: a traceback, SIGQUIT from a child, a CUDA
             or NCCL error, a segmentation fault
  benign     looks alarming, is not: the config dump, autotuner tactic skips,
             known warnings; counted, grouped by the rule's named groups
  milestone  a startup step; `marks = "ready"` ends startup, and a milestone
             with (?P<rank>) and (?P<world_size>) records which ranks came up
  metric     a number to summarise, (?P<value>), per rank (the line's
             "[time DP1 TP4]" prefix, or a (?P<source>) group)
  phase      a start-up phase begins (`phase = "weight loading"`); a milestone
             may carry `phase` too, and the ready line begins "serving"

A fatal line is placed in time and phase by the log's own timestamps (the last
"[YYYY-MM-DD HH:MM:SS" seen). A fatal rule may carry `cause`, `remedy` and
`command`: a known failure, with what to do about it. A file none of whose
lines has SGLang's timestamp or matches a rule is refused (not a server log).

The verdict: *ready* when the ready line was seen and no fatal line came after
the last one; *crashed* when a fatal line came after it, or before it with no
ready line at all; *starting* otherwise (the log ends mid-startup).

Throughput's steady state drops warm-up: the samples logged before the first
ready line (the server's own warm-up request), then the first 10% (rounded up)
of each rank's remaining samples. When that leaves nothing, all samples count.
Percentiles interpolate linearly between the two nearest ranks.

Reading is streaming: one line at a time (a line longer than 1 MiB is cut),
context in bounded deques, and at most 2**18 throughput values per rank (past
that, a systematic sample: every 2nd, 4th ... value; counts stay exact).
"""

from __future__ import annotations

import gzip
import math
import os
import re
import stat
import subprocess
import sys
import time
import tomllib
from array import array
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator

from codemods.core import errors
from codemods.apply import files

CLASSES = ("fatal", "benign", "milestone", "metric", "phase")
RULE_EXTRAS = ("phase", "cause", "remedy", "command")  # optional rule keys, in LogRule's order
PHASE_START = "start-up"  # before the first phase milestone
PHASE_SERVING = "serving"  # after the ready line
# "[2026-02-03 09:13:13 TP6] ..." (SGLang), "2026-02-03 09:13:10,300 - INFO - ..." (FlashInfer's logger), after an optional "(Actor pid=1) "
_TIMESTAMP = re.compile(r"^(?:\([^)]*\)\s*)?\[?(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)")
BLOCKS = ("traceback",)
READY = "ready"
FUSION_WORKSPACE = "fusion-workspace"
THROUGHPUT = "gen_throughput"
AUTOTUNER_SKIPS = "autotuner_skips"

MAX_LINE = 1 << 20  # bytes; the rest of a longer line is dropped
CONTEXT_BEFORE = 10
CONTEXT_AFTER = 5
BLOCK_TAIL = 12  # traceback lines kept for the context (plus its first line)
BLOCK_LIMIT = 400  # a traceback longer than this is closed on its last line
MAX_SIGNALS = 20  # fatal lines listed beyond the first
MAX_GROUPS = 64  # distinct groups kept per benign rule
MAX_TACTICS = 256
MAX_SOURCES = 64  # ranks kept apart per metric; more go to "(other)"
SAMPLE_CAP = 1 << 18  # values kept per rank: beyond it every other one is dropped (a systematic sample)
WARMUP_FRACTION = 0.10

_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning|Fault|Failure)?(?::|$)")
# "[2026-02-03 09:13:13 DP1 TP4] ...", after an optional Ray "(SchedulerActor pid=1) "; or torch's "[rank3]:"
_SOURCE = re.compile(r"(?:\([^)]*\)\s*)?\[(?:\S+ \S+?((?: (?:DP|PP|TP|EP)\d+)+)|(rank\d+))\]")


# ------------------------------------------------------------------ rules


@dataclass(frozen=True)
class LogRule:
    """One line shape: what it is (class) and what it means (explanation)."""

    id: str
    klass: str
    pattern: re.Pattern
    explanation: str
    origin: str = ""
    block: str = ""  # "traceback": the traceback starting on this line or the next belongs to this event
    marks: str = ""  # milestone: "ready", "fusion-workspace", or any name
    metric: str = ""  # metric: the series the (?P<value>) group feeds
    tally: str = ""  # benign: a report counter these lines add to (autotuner_skips)
    needles: tuple[str, ...] = ()  # literal text one of which every match contains: a fast pre-check
    phase: str = ""  # milestone: the start-up phase that begins on this line
    cause: str = ""  # fatal: a known failure's cause, remedy and the codemod command that fixes it
    remedy: str = ""
    command: str = ""

    def search(self, line: str) -> re.Match | None:
        if self.needles and not any(n in line for n in self.needles):
            return None
        return self.pattern.search(line)


def builtin_rules_path() -> Path:
    from codemods.recipes.load import data_root

    return data_root() / "doctor" / "sglang.toml"


def load_rules(extra: Iterable[Path] = ()) -> list[LogRule]:
    """The user's rule files first (in order), then the built-in ones; an id seen again is dropped.

    So a user rule wins over a built-in one of the same id, and over any
    built-in rule that would match the same line later.
    """
    rules: list[LogRule] = []
    seen: set[str] = set()
    for path in [*extra, builtin_rules_path()]:
        for rule in parse_rules(_read_text(path), str(path)):
            if rule.id not in seen:
                seen.add(rule.id)
                rules.append(rule)
    return rules


def _read_text(path: Path, option: str = "--rules") -> str:
    try:
        # never a FIFO or device (/dev/zero never ends); newlines read as read_text would
        return files.read_regular(path).decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except FileNotFoundError:
        raise errors.FileRefused("file does not exist", where=str(path), hint=f"check {option}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.FileRefused(f"cannot read the file: {exc}", where=str(path), hint=f"check {option}") from None


def parse_rules(text: str, origin: str = "<rules>") -> list[LogRule]:
    """Rules from TOML text: [[rule]] tables with id, class, pattern, explanation (see the built-in file)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise errors.RecipeInvalid(f"not valid TOML: {exc}", where=origin) from None
    out = []
    for i, table in enumerate(data.get("rule", [])):
        where = f"{origin}: rule {table.get('id') or i + 1}"
        for key in ("id", "class", "pattern", "explanation"):
            if not isinstance(table.get(key), str) or not table[key]:
                raise errors.RecipeInvalid(f"needs `{key}` (a non-empty string)", where=where)
        klass = table["class"]
        if klass not in CLASSES:
            raise errors.RecipeInvalid(f"class {klass!r} is not one of {', '.join(CLASSES)}", where=where)
        unknown = set(table) - {"id", "class", "pattern", "explanation", "block", "marks", "metric", "tally", *RULE_EXTRAS}
        if unknown:
            raise errors.RecipeInvalid(f"unknown key(s): {', '.join(sorted(unknown))}", where=where)
        try:
            pattern = re.compile(table["pattern"])
        except re.error as exc:
            raise errors.RecipeInvalid(f"pattern is not a valid regular expression: {exc}", where=where) from None
        block = table.get("block", "")
        if block and block not in BLOCKS:
            raise errors.RecipeInvalid(f"block {block!r} is not one of {', '.join(BLOCKS)}", where=where)
        metric = table.get("metric", "")
        if klass == "metric" and (not metric or "value" not in pattern.groupindex):
            raise errors.RecipeInvalid("a metric rule needs `metric = NAME` and a (?P<value>...) group", where=where)
        if klass == "phase" and not table.get("phase"):
            raise errors.RecipeInvalid("a phase rule needs `phase = NAME` (the start-up phase its line begins)", where=where)
        if klass == "milestone" and table.get("marks") == FUSION_WORKSPACE and "rank" not in pattern.groupindex:
            raise errors.RecipeInvalid(f"a {FUSION_WORKSPACE} milestone needs a (?P<rank>...) group", where=where)
        out.append(LogRule(
            table["id"], klass, pattern, " ".join(table["explanation"].split()), origin, block,
            table.get("marks", ""), metric, table.get("tally", ""), _needles(table["pattern"]),
            *(" ".join(str(table.get(k, "")).split()) for k in RULE_EXTRAS),
        ))
    if not out:
        raise errors.RecipeInvalid("has no [[rule]] tables", where=origin, hint="see targets/doctor/sglang.toml for the format")
    return out


def _needles(pattern: str) -> tuple[str, ...]:
    """Literal strings one of which every match must contain; () when that cannot be told."""
    try:
        from re import _parser  # type: ignore[attr-defined]

        parsed = _parser.parse(pattern)
    except Exception:  # the private parser moved: no pre-check, same results
        return ()
    if parsed.state.flags & re.IGNORECASE:
        return ()
    return _required(list(parsed), _parser)


def _required(items, p) -> tuple[str, ...]:
    best: tuple[str, ...] = ()
    run: list[str] = []

    def close():
        nonlocal best, run
        if run and len("".join(run)) > min((len(n) for n in best), default=0):
            best = ("".join(run),)
        run = []

    for op, av in items:
        if op is p.LITERAL:
            run.append(chr(av))
            continue
        close()
        if op is p.BRANCH:
            alternatives = [_required(list(branch), p) for branch in av[1]]
            if all(alternatives):
                flat = tuple(n for alt in alternatives for n in alt)
                if not best or min(map(len, flat)) > min(map(len, best)):
                    best = flat
        elif op is p.SUBPATTERN and not (av[1] & re.IGNORECASE):
            inner = _required(list(av[-1]), p)
            if inner and (not best or min(map(len, inner)) > min(map(len, best))):
                best = inner
    close()
    return best if best and min(map(len, best)) >= 3 else ()


# ------------------------------------------------------------------ report


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
class Throughput:
    median: float
    p10: float
    p90: float
    samples: int
    warmup_dropped: int
    sources: list[str]
    not_finite: int = 0  # values that overflowed to inf (or were nan): left out, or one would make the median nan


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
    recognised: int = 0  # lines with an SGLang timestamp or a rule match: 0 means not a server log
    head: list[str] = field(default_factory=list)  # the first lines, to say what a file that is not a log looks like


@dataclass
class Event:
    """A change of state worth a line while following a log."""

    kind: str  # "milestone", "ready", "crashed", "benign"
    line: int
    text: str


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
        rule, match = self._classify(line)
        if rule is not None:
            if not stamp:
                self.recognised += 1
            self._apply(rule, match, line, events)
        self.recent.append(line)
        return events

    def _classify(self, line: str) -> tuple[LogRule | None, re.Match | None]:
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
        return None, None

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
        decided = False
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
                events.append(Event("crashed", fatal.line, f"crashed: {where}{fatal.message} ({fatal.rule}){_when(fatal)}"))

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


class Samples:
    """One rank's values of one metric, in bounded memory.

    Every value while fewer than SAMPLE_CAP; past that, every other kept value
    is dropped and the stride doubles, so what is kept is always every
    stride-th value of the series: a systematic sample, in order.
    """

    __slots__ = ("values", "stride", "count")

    def __init__(self) -> None:
        self.values = array("d")
        self.stride = 1
        self.count = 0  # every value seen

    def add(self, value: float) -> None:
        if self.count % self.stride == 0:
            self.values.append(value)
            if len(self.values) >= SAMPLE_CAP:
                self.values = self.values[::2]
                self.stride *= 2
        self.count += 1

    def since(self, n: int, stride: int) -> array:
        """The kept values from the n-th value on, thinned to a coarser stride (a multiple of this one)."""
        return self.values[-(-n // self.stride)::stride // self.stride]


def steady_state(per_source: dict[str, Samples], at_ready: dict[str, int]) -> Throughput | None:
    """Median, p10 and p90 after warm-up (see the module docstring for the rule)."""
    total = sum(s.count for s in per_source.values())
    if total == 0:
        return None
    skips = {}
    for source, samples in per_source.items():
        skip = at_ready.get(source, 0)
        skips[source] = min(samples.count, skip + math.ceil((samples.count - skip) * WARMUP_FRACTION))
    if sum(skips.values()) >= total:
        skips = dict.fromkeys(per_source, 0)
    stride = max(s.stride for s in per_source.values())  # pool the ranks with equal weight per value
    values = sorted(v for source, s in per_source.items() for v in s.since(skips[source], stride))
    dropped = sum(skips.values())
    return Throughput(
        median=_quantile(values, 0.5), p10=_quantile(values, 0.1), p90=_quantile(values, 0.9),
        samples=total - dropped, warmup_dropped=dropped, sources=sorted(per_source),
    )


def _quantile(values: list[float], q: float) -> float:
    pos = (len(values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(values) - 1)
    return round(values[lo] + (values[hi] - values[lo]) * (pos - lo), 3)


# ------------------------------------------------------------------ reading logs


def _open(path: Path) -> BinaryIO:
    if str(path) == "-":
        return sys.stdin.buffer
    try:
        # Opened without blocking and checked on the descriptor: a FIFO would block here and
        # a device such as /dev/zero never ends; only regular files are logs.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            os.close(fd)
            raise errors.FileRefused(
                "not a regular file (a FIFO, socket or device is never read as a log)",
                where=str(path),
                hint="give the log file itself; a live stream can be piped to `codemod doctor -`",
            )
        if stat.S_ISDIR(mode):
            os.close(fd)
            raise IsADirectoryError(path)
        os.set_blocking(fd, True)
        stream = os.fdopen(fd, "rb")
        if path.suffix == ".gz":
            unpacked = gzip.GzipFile(filename=str(path), mode="rb", fileobj=stream)
            unpacked.myfileobj = stream  # closed with it
            return unpacked  # type: ignore[return-value]
        return stream
    except FileNotFoundError:
        raise errors.FileRefused("log file does not exist", where=str(path), hint="check the path, or use --follow to wait for it") from None
    except IsADirectoryError:
        raise errors.FileRefused("is a folder, not a log file", where=str(path)) from None
    except OSError as exc:
        raise errors.FileRefused(f"cannot read the log: {exc.strerror or exc}", where=str(path)) from None


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def log_lines(path: Path) -> Iterator[str]:
    """The log's lines, one at a time (never the whole file); a line over 1 MiB keeps its first 1 MiB."""
    stream = _open(path)
    try:
        cut = False
        while True:
            raw = stream.readline(MAX_LINE)
            if not raw:
                return
            whole = raw.endswith(b"\n")
            if not cut:
                yield _decode(raw)
            cut = not whole
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


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
        f"not an SGLang server log: it looks like {looks_like(report.head)}", where=report.source or "-",
        hint="give doctor the server's output (`python -m sglang.launch_server ... 2>&1 | tee server.log`)",
    )


def follow(
    path: Path,
    diagnosis: Diagnosis,
    *,
    poll: float = 0.2,
    timeout: float | None = None,
    on_wait: Callable[[str], None] = lambda message: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Event]:
    """Tail a growing log, feeding each complete line; yield state changes; stop once the verdict is final.

    Stops also when `timeout` seconds have passed, and at the end of a pipe
    (path "-"). A file that is not there yet is waited for; a file that
    shrinks (truncated, rotated by copy) is read again from its start; a file
    renamed away with a new one at the path (rotated, as `tail -F` sees it) is
    read to its end, then the new one is followed.
    """
    start = clock()

    def expired() -> bool:
        return timeout is not None and clock() - start >= timeout

    if str(path) != "-":
        announced = False
        while not path.exists():
            if not announced:
                on_wait(f"waiting for {path} to appear")
                announced = True
            if expired():
                return
            sleep(poll)
    stream = _open(path)
    pending = b""
    cut = False  # inside the rest of a line over MAX_LINE: dropped
    try:
        while True:
            raw = stream.readline(MAX_LINE)
            if raw:
                if cut:
                    cut = not raw.endswith(b"\n")
                    continue
                pending += raw
                if not pending.endswith(b"\n"):
                    if len(pending) < MAX_LINE:
                        if str(path) != "-":
                            sleep(poll)  # a line being written: wait for its end
                            if expired():
                                return
                        continue
                    pending, cut = pending[:MAX_LINE], True
                line, pending = _decode(pending), b""
                yield from diagnosis.feed(line)
                if diagnosis.final:
                    return
                continue
            if str(path) == "-":
                if pending:
                    yield from diagnosis.feed(_decode(pending))
                yield from diagnosis.finish()
                return
            if expired():
                return
            try:
                if os.fstat(stream.fileno()).st_size < stream.tell():
                    on_wait(f"{path} shrank; reading it again from the start")
                    stream.seek(0)
                    pending = b""
                elif os.fstat(stream.fileno()).st_size > stream.tell() and _replaced(path, stream):
                    continue  # rotated, but the old file grew after the last read: read it to its end first
                elif _replaced(path, stream):  # rotated (renamed, a new file at the path)
                    on_wait(f"{path} was rotated; following the new file")
                    if pending:
                        yield from diagnosis.feed(_decode(pending))
                        pending = b""
                        if diagnosis.final:
                            return
                    stream.close()
                    stream = _open(path)
                    continue
            except (OSError, ValueError):
                pass
            sleep(poll)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _replaced(path: Path, stream: BinaryIO) -> bool:
    """The path now names another file than the open one (as `tail -F` checks); False while nothing is there."""
    try:
        now = os.stat(path)
    except OSError:
        return False
    was = os.fstat(stream.fileno())
    return (now.st_ino, now.st_dev) != (was.st_ino, was.st_dev)


# ------------------------------------------------------------------ A/B


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


# ------------------------------------------------------------------ preflight: GPU topology and P2P

P2P_STATUS = {
    "X": "self", "OK": "ok", "CNS": "chipset not supported", "GNS": "GPU not supported",
    "TNS": "topology not supported", "NS": "not supported", "DR": "disabled by regkey", "U": "unknown",
}
LINK_KINDS = {
    "X": "self",
    "SYS": "PCIe + the SMP interconnect between NUMA nodes",
    "NODE": "PCIe + the interconnect between PCIe host bridges in a NUMA node",
    "PHB": "PCIe + a PCIe host bridge",
    "PXB": "several PCIe bridges",
    "PIX": "at most one PCIe bridge",
}
_GPU_LABEL = re.compile(r"^GPU(\d+)$")
_COLUMN = re.compile(r"^(?:GPU|NIC)\d+$")


@dataclass
class Preflight:
    gpus: list[int]
    links: dict[tuple[int, int], str]  # from `nvidia-smi topo -m`
    p2p: dict[tuple[int, int], str]  # from `nvidia-smi topo -p2p r`
    status: str  # "ok", "blocked" or "unknown"
    blockers: list[tuple[int, int, str, str]]  # (gpu, gpu, P2P status, link) of each pair without P2P
    notes: list[str]


def parse_topology(text: str) -> tuple[dict[tuple[int, int], str], dict[tuple[int, int], str]]:
    """GPU-to-GPU cells of every matrix in text: (links, p2p), told apart by their values."""
    links: dict[tuple[int, int], str] = {}
    p2p: dict[tuple[int, int], str] = {}
    columns: list[str] = []
    for raw in text.splitlines():
        tokens = raw.split()
        if len(tokens) >= 1 and _COLUMN.match(tokens[0]) and (len(tokens) == 1 or _COLUMN.match(tokens[1]) or tokens[1] == "CPU"):
            columns = [t for t in tokens if _COLUMN.match(t)]
            continue
        m = _GPU_LABEL.match(tokens[0]) if tokens else None
        if not m or not columns:
            if not raw.strip() or raw.strip().startswith("Legend"):
                columns = [] if raw.strip().startswith("Legend") else columns
            continue
        row = int(m.group(1))
        for label, cell in zip(columns, tokens[1:1 + len(columns)]):
            col = _GPU_LABEL.match(label)
            if not col or int(col.group(1)) == row:
                continue
            pair = (row, int(col.group(1)))
            if cell in P2P_STATUS and cell != "X":
                p2p[pair] = cell
            elif cell in LINK_KINDS or re.fullmatch(r"NV\d+", cell):
                links[pair] = cell
    return links, p2p


def preflight(texts: Iterable[str], tp: int | None = None) -> Preflight:
    """Whether every GPU pair (the first tp GPUs, when given) can reach the others peer-to-peer.

    FlashInfer's allreduce fusion maps each rank's workspace into the other
    ranks through CUDA IPC and reads it with peer loads, so it needs P2P
    between every pair. PCIe topology without P2P is a known blocker.
    """
    links: dict[tuple[int, int], str] = {}
    p2p: dict[tuple[int, int], str] = {}
    for text in texts:
        l, p = parse_topology(text)
        links.update(l)
        p2p.update(p)
    gpus = sorted({g for pair in [*links, *p2p] for g in pair})
    if tp:
        gpus = [g for g in gpus if g < tp]
    pairs = [(a, b) for a in gpus for b in gpus if a < b]
    blockers: list[tuple[int, int, str, str]] = []
    notes: list[str] = []
    if not gpus:
        return Preflight([], links, p2p, "unknown", [], ["no GPU matrix found: give the output of `nvidia-smi topo -m` and `nvidia-smi topo -p2p r`"])
    if tp and len(gpus) < tp:
        notes.append(f"--tp {tp} but only {len(gpus)} GPU(s) in the topology")
    for a, b in pairs:
        status = p2p.get((a, b)) or p2p.get((b, a))
        link = links.get((a, b)) or links.get((b, a)) or ""
        if status and status != "OK":
            blockers.append((a, b, status, link))
    if blockers:
        state = "blocked"
        pcie = all(not (links.get(p) or links.get(p[::-1]) or "").startswith("NV") for p in pairs)
        if pcie and links:
            notes.append("PCIe topology without P2P: FlashInfer's allreduce fusion cannot run here (SGLang falls back, or fails at workspace setup)")
    elif p2p and all((p2p.get(p) or p2p.get(p[::-1])) == "OK" for p in pairs):
        state = "ok"
    elif links and all((links.get(p) or links.get(p[::-1]) or "").startswith("NV") for p in pairs):
        state = "ok"
        notes.append("every pair is on NVLink, which carries P2P (run `nvidia-smi topo -p2p r` to confirm)")
    else:
        state = "unknown"
        notes.append("PCIe links without a P2P matrix: run `nvidia-smi topo -p2p r` and pass its output too")
    return Preflight(gpus, links, p2p, state, blockers, notes)


def _link_words(link: str) -> str:
    if link.startswith("NV"):
        return f"{link[2:]} bonded NVLinks"
    return LINK_KINDS.get(link, "unknown link")


def read_topology_files(paths: Iterable[Path]) -> list[str]:
    """Saved `nvidia-smi topo -m` / `nvidia-smi topo -p2p r` output, one or both per file."""
    return [_read_text(path, "--topo") for path in paths]


def read_live_topology(run: Callable = subprocess.run) -> list[str]:
    """The output of `nvidia-smi topo -m` and `nvidia-smi topo -p2p r` on this machine."""
    out = []
    for args in (["nvidia-smi", "topo", "-m"], ["nvidia-smi", "topo", "-p2p", "r"]):
        try:
            proc = run(args, capture_output=True, text=True, timeout=60)
        except FileNotFoundError:
            raise errors.FileRefused(
                "nvidia-smi is not installed or not on PATH", where="preflight",
                hint="run on the GPU machine, or save `nvidia-smi topo -m` and `nvidia-smi topo -p2p r` there and pass them with --topo FILE",
            ) from None
        except subprocess.TimeoutExpired:
            raise errors.FileRefused(f"`{' '.join(args)}` did not answer in 60 s", where="preflight", hint="pass saved output with --topo FILE") from None
        if proc.returncode != 0:
            raise errors.FileRefused(
                f"`{' '.join(args)}` failed: {(proc.stderr or proc.stdout).strip()[:300]}", where="preflight",
                hint="pass saved output with --topo FILE",
            )
        out.append(proc.stdout)
    return out


# ------------------------------------------------------------------ outcome


def healthy(report: Report | None, comparison: Comparison | None = None, check: Preflight | None = None) -> bool:
    """Exit 0 or 1: nothing wrong seen (ready, or still starting) vs crashed, regressed or no P2P."""
    if report is not None and report.verdict == "crashed":
        return False
    if comparison is not None and comparison.recommend_revert:
        return False
    return not (check is not None and check.status == "blocked")


# ------------------------------------------------------------------ rendering (strings only; the CLI prints)


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


def _when(f: Fatal) -> str:
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


LAUNCHER_ADVICE = ("SGLang's own \"Possible solutions\" list (lower --mem-fraction-static, --cuda-graph-max-bs, "
                   "disable torch compile or CUDA graphs) is for running out of memory during capture; it does not help here")


def _tok(x: float) -> str:
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
        out.append(f"verdict: crashed (line {f.line}{where}: {f.message}){_when(f)}, {after}")
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
            out.append(f"note: a fatal line before the ready line (line {f.line}, {f.rule}{_when(f)}): {f.message[:200]}; the server still came up")
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
        out.append(f"recommend: codemod revert {recipe} --repo {repo or 'PATH'}")
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
