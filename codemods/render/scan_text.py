"""`codemod scan` as text: the audit of one arch, by what to do with each gate."""

from __future__ import annotations

from collections.abc import Callable

from codemods.audit import areas, classify
from codemods.audit.records import ScanResult, one_line


def summary(result: ScanResult, top: int = 3) -> list[dict]:
    """Per gate kind: how many gates, how many exclude the arch, and the files with the most gates."""
    kinds: dict[str, dict] = {}
    for gate in result.gates:
        entry = kinds.setdefault(gate["kind"], {"kind": gate["kind"], "gates": 0, "excluding": 0, "files": {}})
        entry["gates"] += 1
        entry["excluding"] += gate["excludes_arch"]
        entry["files"][gate["file"]] = entry["files"].get(gate["file"], 0) + 1
    out = []
    for kind in sorted(kinds, key=lambda k: (-kinds[k]["gates"], k)):
        entry = kinds[kind]
        ranked = sorted(entry["files"].items(), key=lambda item: (-item[1], item[0]))
        out.append({**entry, "files": len(ranked), "top": ranked[:top]})
    return out


# Group headings: what the user does with each group.
GROUP_TITLES = {
    classify.BLOCKER: ("blockers", "{arch} gets nothing here and codemod has no edit for these: change them by hand"),
    classify.WIDENABLE: ("widenable", "{arch} gets nothing here; `codemod run RECIPE --dry-run` shows the widening"),
    classify.NEEDS_HUMAN: (
        "needs a human",
        "{arch} takes a fallback here, the code needs instructions or hardware it lacks, or only code for other "
        "archs uses the module: decide, or port",
    ),
    classify.OTHER_ARCH: (
        "other-arch",
        "code written for another kind of arch than {arch} (sm_90; sm_100/103/110; sm_120/121; pre-Hopper): "
        "review, not widen",
    ),
    classify.TUNING: ("tuning", "block sizes or heuristics picked by capability: review the values {arch} gets"),
    classify.UNKNOWN: ("unknown", "codemod cannot tell what {arch} gets here: read the code"),
}
_COLORS = {classify.BLOCKER: "31", classify.WIDENABLE: "33", classify.NEEDS_HUMAN: "35", classify.OTHER_ARCH: "32",
           classify.TUNING: "34",
           classify.UNKNOWN: "36",
           "hazards": "1;31", "specific": "1"}


sibling = classify.sibling


def groups(result: ScanResult) -> dict[str, list[dict]]:
    """The gates that exclude the arch, by classification, in file order (the four groups of the audit)."""
    out: dict[str, list[dict]] = {name: [] for name in classify.GROUPS}
    for gate in result.gates:
        if gate.get("classification") in out:
            out[gate["classification"]].append(gate)
    return out


def to_text(result: ScanResult, *, verbose: bool = False, quiet: bool = False, color: bool = False) -> str:
    """The audit: a summary (groups, kinds), the hazards, then the gates that exclude the arch by what to do.

    Gates specific to the arch (admitting its family's first member, e.g.
    sm_120 but not sm_121) come first, in their own section. `verbose` also
    lists the gates that exclude the arch harmlessly (covered) and those that
    admit it; `quiet` prints the summary and the hazards only; `color` puts
    ANSI colours on the headings.
    """

    def paint(text: str, key: str) -> str:
        return f"\033[{_COLORS[key]}m{text}\033[0m" if color else text

    arch = result.arch.name
    excluding = [g for g in result.gates if g["excludes_arch"]]
    files = len({g["file"] for g in result.gates})
    definite = [h for h in result.hazards if not h["potential"]]
    grouped = groups(result)
    covered = [g for g in result.gates if g.get("classification") == classify.COVERED]
    definitions = [g for g in result.gates if g.get("classification") == classify.DEFINITION]
    lines = [f"{len(result.gates)} gates in {files} files; {len(excluding)} exclude {arch}"]
    for name, members in grouped.items():
        title = GROUP_TITLES[name][0]
        lines.append(f"  {paint(f'{len(members):>5} {title}', name)}{_by_area(members)}")
    lines.append(f"  {len(covered):>5} covered ({arch} takes other code there{'' if verbose else '; --verbose lists them'})")
    if definitions:
        lines.append(f"  {len(definitions):>5} definitions (arch predicates' own tests; their callers are the gates"
                     f"{'' if verbose else '; --verbose lists them'})")
    kinds = summary(result)
    if kinds:
        width = max(len(entry["kind"]) for entry in kinds)
        for entry in kinds:
            top = ", ".join(f"{name} ({count})" for name, count in entry["top"])
            lines.append(
                f"  {entry['kind']:<{width}}  {entry['gates']:>6} gates, {entry['excluding']:>5} exclude {arch}"
                f"  in {entry['files']} files; most in {top}"
            )
    lines.append(
        f"{len(result.hazards)} hazards for {arch}: {len(definite)} definite, "
        f"{len(result.hazards) - len(definite)} potential"
        + (f"; {len(result.modules)} JIT specs read ({result.layout} layout)" if result.layout else "")
    )
    if result.skipped:
        lines.append(f"{len(result.skipped)} skipped")
    if result.stats.get("excluded"):
        lines.append(f"{result.stats['excluded']} records left out (--exclude, or the project's [scan] exclude)")
    if result.hazards:
        lines += ["", paint("hazards:", "hazards")]
        for hazard in result.hazards:
            tag = "potential " if hazard["potential"] else ""
            lines.append(f"  {hazard['file']}:{hazard['line']}: {tag}{hazard['kind']}: {hazard['message']}")
    if quiet:
        return "\n".join(lines) + "\n"
    first = sibling(result.arch, result.universe)
    specific = {id(g) for g in excluding if first is not None and classify.differs(g, first.name)}
    sections: list[tuple[str | None, Callable[[dict], bool]]] = []
    if first is not None:
        sections.append((f"specific to {arch} (they admit {first.name}, not {arch})", lambda g: id(g) in specific))
        sections.append((None, lambda g: id(g) not in specific))
    else:
        sections.append((None, lambda g: True))
    for heading, wanted in sections:
        chosen = {name: [g for g in members if wanted(g)] for name, members in grouped.items()}
        if heading is not None:
            total = sum(len(m) for m in chosen.values())
            lines += ["", paint(f"== {heading}: {total}", "specific")]
        elif first is not None:
            lines += ["", paint("== the rest", "specific")]
        for name, members in chosen.items():
            if not members:
                continue
            title, what = GROUP_TITLES[name]
            lines += ["", paint(f"{title} ({len(members)}): {what.format(arch=arch)}", name)]
            lines += _by_areas(members)
    if verbose and covered:
        lines += ["", f"covered ({len(covered)}): they exclude {arch}, which takes other code there"]
        lines += [_entry(gate) for gate in covered]
    if verbose and definitions:
        lines += ["", f"definitions ({len(definitions)}): arch predicates' own tests, which their callers use"]
        lines += [_entry(gate) for gate in definitions]
    admitting = [g for g in result.gates if not g["excludes_arch"]]
    if verbose and admitting:
        lines += ["", f"gates that admit {arch} (or may):"]
        for gate in admitting:
            lines.append(f"  {gate['file']}:{gate['line']}: {gate['kind']} {one_line(gate['text'])}  {_admitted(gate)}")
            if gate.get("classification") == classify.ADMITS and gate.get("reason"):  # excludes it as written, never reached
                lines.append(f"      {gate['reason']}")
    if result.skipped:
        lines += ["", "skipped:"]
        lines += [f"  {item['file']}: {item['reason']}" for item in result.skipped]
    return "\n".join(lines) + "\n"


def _by_area(members: list[dict]) -> str:
    """` (30 library, 14 tests)`: a group's count per area, library first; "" when all are library."""
    counts = {area: 0 for area in areas.AREAS}
    for gate in members:
        counts[gate.get("area", areas.LIBRARY)] = counts.get(gate.get("area", areas.LIBRARY), 0) + 1
    if not members or counts[areas.LIBRARY] == len(members):
        return ""
    return " (" + ", ".join(f"{count} {area}" for area, count in counts.items() if count) + ")"


def _by_areas(members: list[dict]) -> list[str]:
    """A group's entries, library first; an `-- area (N)` line before each area when the group spans several."""
    ordered = sorted(members, key=lambda g: areas.rank(g.get("area", areas.LIBRARY)))  # stable: file order within
    present = list(dict.fromkeys(g.get("area", areas.LIBRARY) for g in ordered))
    if len(present) < 2:
        return [_entry(gate) for gate in ordered]
    lines = []
    for area in present:
        chosen = [g for g in ordered if g.get("area", areas.LIBRARY) == area]
        lines.append(f"  -- {area} ({len(chosen)})")
        lines += [_entry(gate) for gate in chosen]
    return lines


def _entry(gate: dict) -> str:
    """One gate of the audit: where (file:line, enclosing function, owning JIT module), what, and why."""
    where = f"{gate['file']}:{gate['line']}"
    if gate.get("symbol"):
        where += f" in {gate['symbol']}"
    if gate.get("owner"):
        where += f" [{gate['owner']}]"
    return f"  {where}: {gate['kind']} {one_line(gate['text'])}  {_admitted(gate)}\n      {gate.get('reason', '')}"


def _admitted(gate: dict) -> str:
    if not gate["admits"] and gate.get("features"):  # no plain arch of the universe has them (sm_90a features)
        text = f"needs {', '.join(gate['features'])} features"
    else:
        text = f"admits {', '.join(gate['admits']) or 'none'}"
    if gate["unknown"]:
        text += f"; unknown {', '.join(gate['unknown'])}"
    return f"({text})"
