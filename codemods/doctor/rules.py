"""Doctor's rulebook: log rules as data (targets/doctor/vllm.toml and sglang.toml plus the user's --rules files), loaded
and checked.

Each rule is a regular expression, a class and an explanation. The first rule
that matches a line decides what the line is, so a benign rule placed before
the fatal ones (the ServerArgs dump) keeps words inside it from counting as
events.

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

A fatal rule may carry `cause`, `remedy` and `command`: a known failure, with
what to do about it.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from codemods.core import errors
from codemods.doctor import needles
from codemods.doctor.logfile import read_text

CLASSES = ("fatal", "benign", "milestone", "metric", "phase")
RULE_EXTRAS = ("phase", "cause", "remedy", "command")  # optional rule keys, in LogRule's order
BLOCKS = ("traceback",)
READY = "ready"
FUSION_WORKSPACE = "fusion-workspace"
THROUGHPUT = "gen_throughput"
AUTOTUNER_SKIPS = "autotuner_skips"


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
    from codemods.core.targets import data_root

    return data_root() / "doctor" / "sglang.toml"


def builtin_rules_paths() -> list[Path]:
    """The built-in rule files: SGLang's (its shields, the ServerArgs dump, come first), then vLLM's, whose rules
    match only vLLM's process prefixes or messages (SGLang's JIT-refusal rule leaves vLLM's lines to them)."""
    return [builtin_rules_path(), builtin_rules_path().with_name("vllm.toml")]


def load_rules(extra: Iterable[Path] = ()) -> list[LogRule]:
    """The user's rule files first (in order), then the built-in ones; an id seen again is dropped.

    So a user rule wins over a built-in one of the same id, and over any
    built-in rule that would match the same line later.
    """
    rules: list[LogRule] = []
    seen: set[str] = set()
    for path in [*extra, *builtin_rules_paths()]:
        for rule in parse_rules(read_text(path), str(path)):
            if rule.id not in seen:
                seen.add(rule.id)
                rules.append(rule)
    return rules


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
            table.get("marks", ""), metric, table.get("tally", ""), needles.required(table["pattern"]),
            *(" ".join(str(table.get(k, "")).split()) for k in RULE_EXTRAS),
        ))
    if not out:
        raise errors.RecipeInvalid("has no [[rule]] tables", where=origin, hint="see targets/doctor/sglang.toml for the format")
    return out
