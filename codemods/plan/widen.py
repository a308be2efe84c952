"""Planning one change on one file: the gates its selectors pick, the edits that widen them, each re-checked.

What a gate kind does is asked through its `GateKind` hooks (codemods.gates.registry):
find, blockers, widen, missing_symbols, admits. The planner never asks a kind's name.
"""

from __future__ import annotations

import bisect
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import replace

from codemods.jit import kernel_paths
from codemods.core.arch import Arch
from codemods.cpp.lexer import C_SUFFIXES, one_line
from codemods.gates import CannotWiden, Edit, Gate, SourceError, TooDeep, apply_edits
from codemods.gates.python.predicates import reading
from codemods.gates.python.ast_text import defines
from codemods.gates.base import GateKind, Where
from codemods.plan import dispatch, picks
from codemods.plan.changes import GateChange, PlannedChange
from codemods.plan.rewrites import plan_rewrite
from codemods.recipes.load import projects
from codemods.recipes.model import Change, Project, ProjectTree

Read = Callable[[str], bytes]


def plan_change(
    pc: PlannedChange,
    kind: GateKind,
    universe: tuple[Arch, ...],
    targets: tuple[Arch, ...],
    tree: ProjectTree | None,
    read: Read | None,
    force: bool = False,
) -> None:
    """Fill `pc` (whose `before` holds the file) with its gates, edits and outcome.

    Without a tree (`codemod recipe test`), what needs other files (the project's
    predicate files, kernel paths, required symbols) is left out.
    """
    change = pc.change
    source = pc.before
    pc.after = source
    if b"\0" in source[:8192]:
        pc.outcome, pc.reason = "failed", f"{pc.file}: looks like a binary file (NUL bytes), not source"
        return
    if kind.edit_kind:
        plan_rewrite(pc, kind)
        return
    meanings = None
    project = tree.project if tree is not None else projects().get(change.project)
    if kind.reads_predicates and project is not None:
        meanings = meanings_for(project, pc.file, source, tree, read)
    where = Where(pc.file, meanings, project.number_membership if project is not None else "")
    if kind.style is not None and tree is not None and read is not None and not kind.style(source):
        where = replace(where, styles=_neighbour_style(kind.style, tree, pc.file, read))
    find, widen, admits = kind.find, kind.widen, kind.admits
    assert find is not None and widen is not None and admits is not None  # a gate kind has all three (GateKind.__post_init__)
    selectors, chosen = picks.split(pc.selector if pc.selector is not None else change.selector)
    try:
        found = find(source, universe, where, selectors)
    except SourceError as exc:
        pc.outcome, pc.reason = "failed", f"{pc.file}: {exc}"
        pc.too_deep = isinstance(exc, TooDeep)
        return
    undecided = [g for g in found if _undecided(g, change)]
    found = picks.pick(source, [g for g in found if all(g.admits.admits(a) for a in change.admits)], chosen)
    skipped = [_skipped(g, change, source, targets, universe, where, widen) for g in undecided]
    if not found:
        pc.outcome, pc.reason = "failed", f"{_describe(change, pc.selector)} not found in {pc.file}"
        if skipped:
            pc.reason += "; " + "; ".join(f"skipped line {g.gate.line}: {g.reason}" for g in skipped)
        pc.missed = True
        return
    contested = [g for g in found if not all(g.admits.admits(a) for a in targets)]
    if len(contested) > 1 and not kind.every_match and not chosen.get("all"):

        def narrowed(extra: dict) -> list[Gate]:
            """The gates left to widen with `extra` added to the change (plan.picks offers only fields that pick one)."""
            shape = tuple(Arch.parse_target(a) for a in extra["admits"]) if "admits" in extra else change.admits
            more = {k: v for k, v in extra.items() if k != "admits" and k not in picks.PICKS}
            try:
                gates = find(source, universe, where, {**selectors, **more})
            except SourceError:
                return []
            gates = picks.pick(source, [g for g in gates if all(g.admits.admits(a) for a in shape)], {**chosen, **extra})
            return [g for g in gates if not all(g.admits.admits(a) for a in targets)]

        pc.outcome, pc.failure = "failed", "ambiguous"
        pc.reason = picks.ambiguity(
            pc.file, source, found, contested, _describe(change, pc.selector), kind.selector_names, narrowed
        )
        return
    edits: list[Edit] = []
    symbol_missing = False
    pc.gates += skipped
    arms = _chain_readers(kind, source, universe, where, selectors, contested)
    for gate in found:
        if all(gate.admits.admits(a) for a in targets):
            pc.gates.append(GateChange(gate, "unchanged", gate.text, gate.admits, "already admits " + ", ".join(a.name for a in targets)))
            continue
        arm = _later_arm(source, gate, targets, arms, where)
        if arm is not None:
            pc.gates.append(GateChange(gate, "failed", reason=arm.reason(pc.file), refused_by="dispatch"))
            continue
        blockers = kind.blockers(source, gate, targets)
        paths = _kernel_paths(kind, pc.file, source, gate, targets, universe, tree, read)
        warnings = paths.warnings() if paths is not None else []
        if paths is not None:
            blockers += paths.blockers()
        if blockers and not force:
            pc.gates.append(
                GateChange(gate, "failed", reason="not widenable: " + "; ".join(blockers) + " (--force overrides)", warnings=warnings)
            )
            continue
        try:
            gate_edits = widen(source, gate, targets, universe, where)
        except SourceError as exc:  # the file, read whole to edit it (a kind may find from a cut-down parse)
            pc.outcome, pc.reason = "failed", f"{pc.file}: {exc}"
            pc.too_deep = isinstance(exc, TooDeep)
            pc.gates.clear()
            return
        except CannotWiden as exc:
            if change.requires_symbol and tree is not None and not _symbol_defined(change, tree, source, read):
                symbol_missing = True  # said below, the way every version without the predicate is refused
                pc.gates.append(GateChange(gate, "changed"))
                continue
            pc.gates.append(GateChange(gate, "failed", reason=str(exc), warnings=warnings))
            continue
        if tree is not None and gate_edits:
            needed = kind.missing_symbols(source, gate, targets, universe, where)
            if change.requires_symbol and _symbol_unresolved(change, tree, needed, read):
                symbol_missing = True  # said below: this version has no predicate for the arch
            elif absent := _not_in_their_modules(tree, pc.file, needed, read):
                pc.gates.append(GateChange(gate, "failed", reason="; ".join(absent), warnings=warnings))
                continue
        edits += gate_edits
        if gate_edits:
            warnings = warnings + kind.notes(source, gate, targets, universe, where)
        pc.gates.append(GateChange(gate, "changed", forced=blockers, warnings=warnings))
    failed = [g for g in pc.gates if g.outcome == "failed"]
    if failed:
        pc.outcome = "failed"
        pc.failure = "dispatch" if all(g.refused_by == "dispatch" for g in failed) else ""
        pc.reason = "; ".join(
            f"{pc.file}:{g.gate.line}: cannot widen `{_quoted(g.gate.text)}`: {g.reason.removeprefix(f'line {g.gate.line}: ')}"
            for g in failed
        )
        return
    if not edits and not symbol_missing:
        pc.outcome, pc.reason = "unchanged", "already enabled: every gate admits " + ", ".join(a.name for a in targets)
        return
    if symbol_missing:
        assert tree is not None
        pc.outcome = "failed"
        pc.reason = (
            f"{change.requires_symbol} is not defined in this {tree.project.title} "
            f"(looked in {', '.join(tree.resolve(f) for f in change.symbol_files) or pc.file}); "
            "this version has no predicate for the arch, so none can be imported"
        )
        return
    edits = sorted(set(edits))  # gates that need one import each give the same import edit
    try:
        after = apply_edits(source, edits)
    except ValueError as exc:
        pc.outcome, pc.reason = "failed", f"{pc.file}: {exc}"
        return
    shifts = _shifts(edits)
    if meanings is not None:  # the edits may define a predicate in this file (`_is_sm120_supported = ...`)
        where = Where(pc.file, {**meanings, **reading.read(after, pc.file, meanings)}, where.number_membership)
    for gc in pc.gates:
        if gc.outcome != "changed":
            continue
        start, end = _span_after(gc.gate, shifts)
        gc.after_text = after[start:end].decode("utf-8", errors="replace")
        gc.admits_after = admits(gc.after_text, universe, where, gc.gate.detail)
        if not all(gc.admits_after.admits(a) for a in targets):
            pc.outcome, pc.reason = "failed", f"{pc.file}:{gc.gate.line}: the rewritten gate does not admit the target (internal check)"
            return
    pc.after = after
    pc.edits = edits
    pc.outcome = "changed"


def refusal(
    kind: GateKind, source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...], where: Where,
    found: dict | None = None,
) -> str:
    """Why `codemod run` would refuse to widen `gate` for `targets` through its kind's `widen` (the one
    implementation of widening), "" when it widens it: what `scan` asks before it calls a gate widenable, so that
    scan and run agree (issue 38). `found` keeps the kind's finds of one file between calls."""
    if not kind.editable(gate, targets[0] if len(targets) == 1 else None) or kind.find is None or kind.widen is None:
        return "codemod has no edit for this gate"
    # the gate as a change naming its file and function finds it (scan may list a part of it: one comparison)
    scope = {"function": gate.context} if "function" in kind.selector_names and gate.context not in ("", "<module>") else {}
    key = (kind.name, tuple(scope.items()))
    try:
        if found is None or key not in found:
            found = {} if found is None else found
            found[key] = kind.find(source, universe, where, scope)
        own = [g for g in found[key] if g.start <= gate.start and gate.end <= g.end]
        if not own:
            return f"a change naming its file{' and function' if scope else ''} does not find it"
        kind.widen(source, min(own, key=lambda g: g.end - g.start), targets, universe, where)
    except (CannotWiden, SourceError) as exc:
        return str(exc).removeprefix(f"line {gate.line}: ")
    if not kind.every_match:
        return ""
    # a kind that widens every match of the change (cuda_guard) fails the change on any of them that run refuses
    if ("others", key) not in found:
        found[("others", key)] = [(g, _refused(kind, source, g, targets, universe, where)) for g in found[key]]
    for other, why in found[("others", key)]:
        if why and other.start != gate.start:
            return (
                f"a change naming its file{' and function' if scope else ''} also takes line {other.line} "
                f"(`{one_line(other.text)}`), which it cannot widen: {why}"
            )
    return ""


def _refused(kind: GateKind, source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...], where: Where) -> str:
    """Why plan_change refuses `gate` of a change that takes it ("" when it widens it, or it admits the targets)."""
    if all(gate.admits.admits(a) for a in targets):
        return ""
    arm = _later_arm(source, gate, targets, [], where)
    if arm is not None:
        return arm.reason(where.file)
    blockers = kind.blockers(source, gate, targets)
    if blockers:
        return "not widenable: " + "; ".join(blockers)
    assert kind.widen is not None  # refusal asked only of kinds that widen
    try:
        kind.widen(source, gate, targets, universe, where)
    except (CannotWiden, SourceError) as exc:
        return str(exc).removeprefix(f"line {gate.line}: ")
    return ""


def _later_arm(source: bytes, gate: Gate, targets: tuple[Arch, ...], arms: list[Gate], where: Where) -> dispatch.Arm | None:
    """The branch rule (plan.dispatch): the later arm of the gate's `if`/`elif` chain (read by `arms`), or of its
    `#if`/`#elif` group in a C file, that takes a target today."""
    if where.file.endswith(".py"):
        return dispatch.later_arm(source, gate, targets, arms) if arms else None
    if where.file.endswith(C_SUFFIXES):
        arm = dispatch.later_directive(source, gate, targets)
        return arm if arm is not None or not arms else dispatch.later_statement(source, gate, targets, arms, where.language)
    return None


def _chain_readers(
    kind: GateKind, source: bytes, universe: tuple[Arch, ...], where: Where, selectors: dict, contested: list[Gate]
) -> list[Gate]:
    """The gates that read the arms of the `if`/`elif` (`else if`) chains around the contested gates
    (plan.dispatch): the kind's gates of the same function, any other selector left out ([] for a file that is
    neither Python nor C)."""
    if not contested or not where.file.endswith((".py", *C_SUFFIXES)) or kind.find is None:
        return []
    scope = {k: selectors[k] for k in ("function", "names") if k in selectors}  # `names`: how the arms read too
    try:
        return kind.find(source, universe, where, scope)
    except SourceError:
        return []


def _neighbour_style(style: Callable[[bytes], Mapping[str, str]], tree: ProjectTree, file: str, read: Read) -> Mapping[str, str]:
    """The spellings of the nearest file in `file`'s folder that shows any (a kind's `style`), for a file that
    shows none: the files beside it with its suffix, nearest by name first (issue 34: the negation style)."""
    folder, name = posixpath.split(file)
    suffix = posixpath.splitext(name)[1]
    try:
        siblings = [p.name for p in (tree.root / folder).iterdir() if p.suffix == suffix and p.name != name]
    except OSError:
        return {}
    for other in sorted(siblings, key=lambda other: (-len(posixpath.commonprefix([name, other])), other)):
        try:
            shown = style(read(posixpath.join(folder, other)))
        except OSError:
            continue
        if shown:
            return shown
    return {}


def meanings_for(project: Project, file: str, source: bytes, tree: ProjectTree | None = None, read: Read | None = None) -> dict:
    """What each arch predicate `file` can use admits: the project's table, then the definitions in its
    predicate files (through `read`), then those in `file` itself; the later wins."""
    known = project.predicate_table(tree.version(read) if tree is not None else "")
    if tree is not None and read is not None:
        for template in project.predicate_files:
            rel = tree.resolve(template)
            try:
                data = read(rel)
            except OSError:
                continue
            # a class's methods (`Class.is_sm90`) are what `cls.` means in that file only
            known.update({k: m for k, m in reading.read(data, rel, known).items() if not reading.is_method(k)})
        for module, base in reading.base_classes(source):  # `cls.is_sm120()` defined in another file's class
            found = _module_file(tree, file, module, read)
            if found is not None:
                known.update(reading.inherited(module, base, reading.read(found[1], found[0], known)))
    known.update(reading.read(source, file, known))
    return known


def _module_file(tree: ProjectTree, file: str, module: str, read: Read) -> tuple[str, bytes] | None:
    """The project file `module` (as `file` imports it: `pkg.a.b` or `.b`) is, and its bytes; None when
    `read` cannot read it (outside the project)."""
    name = module.lstrip(".")
    parts = [p for p in name.split(".") if p]
    if len(name) < len(module):  # relative: from the importing file's package, one level up per extra dot
        up = len(module) - len(name) - 1
        folder = posixpath.dirname(file)
        for _ in range(up):
            folder = posixpath.dirname(folder)
    else:
        python = tree.layout.places.get("python")
        if python is None or not parts or parts[0] != posixpath.basename(python.rstrip("/")):
            return None
        folder, parts = python, parts[1:]
    base = posixpath.join(folder, *parts)
    for rel in (base + ".py", posixpath.join(base, "__init__.py")):
        try:
            return rel, read(rel)
        except OSError:
            continue
    return None


def _span_after(gate: Gate, shifts: tuple[list[Edit], list[int], list[int]]) -> tuple[int, int]:
    """Where the gate's text sits after the edits; pure insertions at its edges belong to it.

    O(log n) per gate with `shifts` from _shifts, for files with thousands of edits.
    """
    ordered, ends, deltas = shifts
    lo, hi = bisect.bisect_left(ends, gate.start), bisect.bisect_right(ends, gate.start)
    inserted_at_start = sum(len(e.text) for e in ordered[lo:hi] if e.start == e.end == gate.start)
    start = gate.start + deltas[hi] - inserted_at_start
    end = gate.end + deltas[bisect.bisect_right(ends, gate.end)]
    return start, end


def _shifts(edits: list[Edit]) -> tuple[list[Edit], list[int], list[int]]:
    """Edits sorted by end, their ends, and prefix sums of their length changes."""
    ordered = sorted(edits, key=lambda e: (e.end, e.start))
    deltas = [0]
    for e in ordered:
        deltas.append(deltas[-1] + len(e.text) - (e.end - e.start))
    return ordered, [e.end for e in ordered], deltas


def _undecided(gate: Gate, change: Change) -> bool:
    """Whether codemod cannot tell if the gate has the change's shape: unknown on an arch the shape needs, excluding none."""
    answers = [gate.admits.admits(a) for a in change.admits]
    return None in answers and False not in answers


def _skipped(gate: Gate, change: Change, source: bytes, targets, universe, where: Where, widen) -> GateChange:
    """A gate left alone because it cannot be evaluated (too deeply nested, an unknown macro), and why."""
    unknown = ", ".join(a.name for a in change.admits if gate.admits.admits(a) is None)
    why = "it cannot be evaluated"
    try:
        widen(source, gate, targets, universe, where)
    except (CannotWiden, SourceError) as exc:
        why = str(exc).removeprefix(f"line {gate.line}: ")
        if len(gate.text) > 80:
            why = why.replace(one_line(gate.text), one_line(gate.text)[:60] + " ...")
    reason = f"cannot tell whether it admits {unknown} (the change's shape), so it is left as it is: {why}"
    return GateChange(gate, "skipped", reason=reason)


def _describe(change: Change, selector: dict | None = None) -> str:
    chosen = change.selector if selector is None else selector
    parts = [f"{k}={v}" for k, v in chosen.items()]
    if change.admits:
        parts.append("admits " + "+".join(a.name for a in change.admits))
    return f"{change.kind} gate" + (f" ({', '.join(parts)})" if parts else "")


def _kernel_paths(
    kind: GateKind, file: str, source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...],
    tree: ProjectTree | None, read: Read | None,
) -> kernel_paths.PathCheck | None:
    """What widening a Python gate that selects a JIT module makes the targets compile (kernel_paths.check),
    less what every arch of `universe` the gate admits already compiles and lacks as well.

    None for a kind whose gates select no kernels (a CUDA guard), without a
    tree to read (recipe test), or in a project whose layout names no csrc and
    include folders (no JIT specs).
    """
    if not kind.selects_kernels or tree is None or read is None:
        return None
    places = tree.layout.places
    if not {"python", "csrc", "include"} <= places.keys():
        return None
    csrc, include = tree.resolve("{csrc}"), tree.resolve("{include}")
    libraries = tuple(d for d in tree.layout.include_dirs if d not in (csrc, include))
    files = kernel_paths.tree(read, tree.resolve("{python}"), csrc, include, libraries)
    admitted = tuple(a for a in universe if gate.admits.admits(a) is True)
    return kernel_paths.check(files, file, source, gate.kind, gate.line, gate.context, targets, admitted)


def _symbol_defined(change: Change, tree: ProjectTree, source: bytes, read: Read | None) -> bool:
    """Whether the file, or one of the change's symbol files, defines or imports `requires_symbol`."""
    return defines(source, change.requires_symbol) or _in_symbol_files(change, tree, read)


def _symbol_unresolved(change: Change, tree: ProjectTree, needed: list[str], read: Read | None) -> bool:
    """Whether the widened gate takes `requires_symbol` from another module (the kind's `missing_symbols`)
    that none of the change's symbol files defines."""
    takes = any(symbol.rsplit(".", 1)[-1] == change.requires_symbol for symbol in needed)
    return takes and not _in_symbol_files(change, tree, read)


def _not_in_their_modules(tree: ProjectTree, file: str, needed: list[str], read: Read | None) -> list[str]:
    """Why each symbol the widened gate imports (`missing_symbols`' `module.name`) is not there: the project file
    of that module neither defines nor imports it. The predicate table says what a name means, not that this
    version has it (SGLang 0.4.10's srt/layers/utils.py has `is_sm100_supported` and no `is_sm90_supported`).
    A module outside the project, one that imports `*`, or one this Python does not read is not vouched for
    either way."""
    if read is None:
        return []
    absent = []
    for symbol in needed:
        module, _, name = symbol.rpartition(".")
        if not module.strip(".") or "(" in module:  # `get_platform().is_sm120`: an attribute, no import
            continue
        found = _module_file(tree, file, module, read)
        if found is None or re.search(rb"^\s*from\s+\S+\s+import\s+\*", found[1], re.MULTILINE):
            continue
        if defines(found[1], name) is False:  # None: this Python does not read the module
            absent.append(
                f"`{name}` is not defined in {found[0]}, which the new import would take it from: this version"
                " has no such predicate, and a recipe does not write one"
            )
    return absent


def _in_symbol_files(change: Change, tree: ProjectTree, read: Read | None) -> bool:
    if read is None:
        return False
    for template in change.symbol_files:
        try:
            data = read(tree.resolve(template))
        except OSError:
            continue
        if defines(data, change.requires_symbol):
            return True
    return False


def _quoted(text: str) -> str:
    """A gate's text as a message quotes it: its first line, and ` ...` for the rest (a dict of five lines)."""
    lines = text.strip().splitlines() or [""]
    return lines[0].rstrip() + (" ..." if len(lines) > 1 else "")
