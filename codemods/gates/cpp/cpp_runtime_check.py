"""C++ host-side checks of the device's compute capability, found with tree-sitter.

Host code decides at run time whether a kernel may run on the device:

    if (sm_version == 120) return (int)tile_config_sm120;
    TVM_FFI_ICHECK(props.major == 12 && props.minor == 0) << "needs 12.0";
    TVM_FFI_ICHECK_EQ(major, 10) << "needs SM100";

A gate of this kind is the part of a condition (an `if`, `while` or `?:`
condition, the expression a function `return`s, the first argument of a
check macro named `...CHECK`, or `assert`)
made only of comparisons of a capability variable with an integer literal,
joined by `&&`, `||`, `!` (or `and`, `or`, `not`) and parentheses; or a whole
comparison macro `..._CHECK_EQ(a, b)` (`_NE`, `_GE`, `_GT`, `_LE`, `_LT`).

What a variable holds is never guessed from an arbitrary name: the recipe
declares it (`names = {"getSMVersion()" = "sm"}`), or its last name is one of
the common ones in `COMMON_NAMES`. Meanings: `sm` (major * 10 + minor, 120 on
SM120), `major`, `minor`, `cuda_arch` (major * 100 + minor * 10). A selected
check (by `variable` or `macro`) whose variable has no known meaning, or that
compares with something other than an integer literal, admits unknown and is
refused with the reason.

A gate admits where the code it guards runs: where it holds, but where it is
false in an `if` whose body exits (`throw`, `return false`, `TVM_FFI_THROW`:
`cpp.checks.polarity`), under an odd number of `!`, or in a whole `if`/`while`
condition made only of `!=` comparisons (`if (major != 10) return kFallback;`).
Such a gate is widened by the dual rewrites; one that would need a test
removed or narrowed is refused.

`widen` rewrites the gate in its own style and keeps every other byte:

- an equality or a chain of them gains one equality per missing value, where
  it sorts (`sm_version == 120` -> `sm_version == 120 || sm_version == 121`),
  in parentheses when it stands inside `&&` or after `!`;
- in a conjunction, the one equality a target fails becomes a parenthesized
  chain (`props.major == 12 && props.minor == 0` ->
  `props.major == 12 && (props.minor == 0 || props.minor == 1)` for sm_121);
- but where the targets are every arch of their major in the universe
  (`admit = "family"`: sm_100 and sm_103 for sm_103), the conjuncts they fail
  are dropped first, if that admits nothing more (`major == 10 && minor == 0`
  -> `major == 10`, as FlashInfer beebc6074 wrote it);
- otherwise the conjuncts a target fails are dropped (`sm >= 90 && sm < 120`
  -> `sm >= 90`);
- a comparison macro becomes its condition macro with a chain
  (`TVM_FFI_ICHECK_EQ(major, 10)` -> `TVM_FFI_ICHECK(major == 10 || major == 12)`);
- a check of a major and its minors gets a new major as a disjunct of its
  own, not by a cross product (`major == 10 && (minor == 0 || minor == 3)` ->
  `(major == 10 && (minor == 0 || minor == 3)) || (major == 11 && minor == 0)`);
- a bound is kept and gains an equality per value (`sm_major < 10` ->
  `sm_major < 10 || sm_major == 12` for SM12x), as python_capability does;
- a range the targets adjoin moves its upper bound, in an `||` first, alone after the drop, where no arch lies
  between, as python_capability (`sm == 90 || (sm >= 100 && sm < 110)` -> `... sm < 120)` for sm_110).

New terms go inside the author's parentheses: `(sm == 89)` -> `(sm == 89 ||
sm == 120)`.

A line the rewrite makes longer than the file's column limit is broken as
clang-format breaks it, before a check's streamed `<< "msg"` and after a `&&`
or `||` (`cpp.wrap.fit`).

Each result must admit exactly the old archs plus the targets; it is parsed
and evaluated again to make sure, else the gate is refused.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

import tree_sitter

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet, moved_upper_bound, whole_families
from codemods.cpp import syntax
from codemods.gates import CannotWiden, Edit, Gate, apply_edits, decode, drop_operands, edit_between, line_of
from codemods.gates.cpp.checks.conditions import (
    Atom, COMPARISON_MACRO, MEANINGS, conditions, evaluate_node, gates_in, is_not, logical_op, macro_atom, macro_name, read_atom, range_bounds, unreadable, value_of,
)
from codemods.gates.cpp.checks.polarity import exit_of
from codemods.gates.cpp.wrap import fit

KIND = "cpp_runtime_check"

# `return`, not `(void)(`: after a cast's parenthesis tree-sitter reads `sm < 100 || sm >= 110` as a template
_WRAP_HEAD = b"void __codemod_check__() { return "
_WRAP_TAIL = b"; }\n"

def check_selector(name: str, value, meanings: tuple[str, ...] = MEANINGS) -> str:
    """`names` maps a variable's text to one of `meanings`; the other selectors are strings."""
    if name != "names":
        return "" if isinstance(value, str) and value else f"{name!r} must be a string"
    if not isinstance(value, dict) or not value:
        return "'names' must be a table of variable = meaning"
    for variable, meaning in value.items():
        if meaning not in meanings:
            return f"names: {variable!r} = {meaning!r}; a meaning is one of {', '.join(meanings)}"
    return ""


def find(
    source: bytes,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    language: str = "cuda",
    *,
    function: str | None = None,
    variable: str | None = None,
    macro: str | None = None,
    names: dict | None = None,
) -> list[Gate]:
    """Every capability check in the functions of `source` (or in `function`), in source order.

    With `variable`, only checks comparing that variable (as written,
    whitespace aside), whatever it means; without, only checks whose
    variables have a known meaning. With `macro`, only the checks of that
    macro (`TVM_FFI_ICHECK`, `TVM_FFI_ICHECK_EQ`); with a comparison macro, also
    the condition macro it is widened into (`TVM_FFI_ICHECK(major == 10 ||
    major == 12)`), so that a second run finds it unchanged.
    """
    names = dict(names or {})
    decode(source)
    tree = syntax.parse_code(source, language)
    bodies = list(syntax.function_bodies(tree.root_node, function))
    wanted = "".join(variable.split()) if variable else None

    def selected(atom: Atom) -> bool:
        return atom.variable == wanted if wanted is not None else atom.meaning is not None

    gates = []
    for body in bodies:
        for condition, holder in conditions(body, macro, language):
            if macro is not None and holder != macro and not _widened_comparison(condition, names):
                continue  # `macro = "X_EQ"` finds the `X(v == a || v == b)` it was widened into, no other `X`
            if condition.type == "call_expression":
                atom = macro_atom(condition, names)
                parts = [condition] if atom is not None and selected(atom) else []
            elif unreadable(condition, names, wanted):
                parts = [condition]  # it reads a capability in a way codemod cannot evaluate: unknown, refused
            else:
                parts = []
                gates_in(condition, names, selected, parts)
            definition = body.parent
            assert definition is not None  # function_bodies yields bodies of function definitions
            exit = exit_of(condition.parent.parent) if holder == "if" and condition.parent is not None else None
            for part in parts:
                # the code after an `if` that exits runs where its condition is false (`cpp.checks.polarity`), and a part
                # under an odd number of `!` is false where the condition holds
                flips = (exit is not None) != _under_odd_not(part[0] if isinstance(part, tuple) else part, condition)
                if isinstance(part, tuple):  # a run of a chain's operands: the gate is their text, read alone
                    run = _run_gate(source, part[0].start_byte, part[-1].end_byte, holder, names, universe,
                                    syntax.short_name(definition), flips, exit)
                    if run is not None:
                        gates.append(run)
                        continue
                    # a directive between them (`sm >= 100 &&` / `#else` / ...) does not parse alone: each read alone
                    gates += [_gate(source, p, holder, names, universe, syntax.short_name(definition), False, flips, exit)
                              for p in part]
                    continue
                whole = part.start_byte == condition.start_byte and part.end_byte == condition.end_byte
                gates.append(_gate(source, part, holder, names, universe, syntax.short_name(definition), whole, flips,
                                   exit))
        if gates and (builds := _builds_for(body)):
            for gate in gates:
                if body.start_byte <= gate.start < body.end_byte:
                    gate.detail["builds_for"] = builds
    gates.sort(key=lambda gate: gate.start)
    return gates


_ARCH_TARGET = re.compile(rb"\b(?:sm|compute)_(\d{2,3})a\b")


def _builds_for(body: tree_sitter.Node) -> list[str]:
    """The arch-specific targets a function's string literals name (`"--gpu-architecture=sm_90a"`, DeepGEMM's JIT
    compiler): code it builds runs on those archs alone, whatever its checks admit."""
    found: set[int] = set()
    stack = [body]
    while stack:
        node = stack.pop()
        if node.type in ("string_literal", "raw_string_literal"):
            found.update(int(code) for code in _ARCH_TARGET.findall(node.text or b""))
        else:
            stack.extend(node.children)
    return [f"sm_{code}a" for code in sorted(found)]


def _widened_comparison(condition: tree_sitter.Node, names) -> bool:
    """Whether a condition macro's argument is what `_macro_chain` writes: `v == a || v == b`, one variable."""
    chain = _chain_terms(condition, names)
    return chain is not None and len(chain[0]) > 1


def _variables(node: tree_sitter.Node, names) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    stack = [node]
    while stack:
        current = stack.pop()
        atom = read_atom(current, names) if current.type == "binary_expression" else None
        if current.type == "call_expression":
            atom = macro_atom(current, names) or atom
        if atom is not None:
            out[atom.variable] = atom.meaning
        stack.extend(current.children)
    return out


def _admits_node(node: tree_sitter.Node, names, universe, negated: bool = False) -> ArchSet:
    """Where the condition holds; for a `negated` check (`_negated_check`), where it does not."""
    verdicts = {arch: evaluate_node(node, arch, names) for arch in universe}
    if negated:
        verdicts = {arch: None if v is None else not v for arch, v in verdicts.items()}
    return ArchSet(
        tuple(universe),
        frozenset(a for a, v in verdicts.items() if v),
        frozenset(a for a, v in verdicts.items() if v is None),
    )


def _negated_check(node: tree_sitter.Node, names) -> bool:
    """Whether a condition is a check *for* the values it names, written negated: only `!=` comparisons, joined by
    `&&`/`||`, no `!` (`if (device_major != 10 || (device_minor != 0 && device_minor != 3)) return kFallback;`):
    the code it lets through is where it does not hold, as python_capability reads `if major != 9: skip()`."""
    inner = syntax.unparenthesized(node)
    logical = logical_op(inner)
    if logical is not None:
        return _negated_check(syntax.field(inner, "left"), names) and _negated_check(syntax.field(inner, "right"), names)
    atom = read_atom(inner, names)
    return atom is not None and atom.op == "!="


def _under_odd_not(part: tree_sitter.Node, condition: tree_sitter.Node) -> bool:
    """Whether an odd number of `!` stand between `part` and the whole `condition` it is found in."""
    odd, current = False, part
    while current != condition and current.parent is not None:
        current = current.parent
        odd ^= is_not(current)
    return odd


def _run_gate(
    source: bytes, start: int, end: int, holder: str, names, universe, context: str, flips: bool = False,
    exit: str | None = None,
) -> Gate | None:
    """The gate of a run of pure operands (`sm == 90 || sm == 100` inside `use_fast || ...`), read from the run's
    text parsed alone (one expression: the operands of one chain, joined by its operator, associate); None when
    the text does not parse alone."""
    text = source[start:end].decode("utf-8")
    node = _snippet(text)
    if node is None:
        return None
    return Gate(KIND, start, end, line_of(source, start), text, _admits_node(node, names, universe, flips), context,
                _detail(node, holder, names, flips, exit))


def _detail(node: tree_sitter.Node, holder: str, names, negated: bool = False, exit: str | None = None) -> dict[str, Any]:
    variables = _variables(node, names)
    known = {v: m for v, m in variables.items() if m is not None}
    detail: dict[str, Any] = {"in": holder, "names": known, "unknown": sorted(v for v, m in variables.items() if m is None)}
    if negated:
        detail["negated"] = True
    if exit is not None:
        detail["exit"] = exit
    return detail


def _gate(
    source: bytes, node: tree_sitter.Node, holder: str, names, universe, context: str, whole: bool = False,
    flips: bool = False, exit: str | None = None,
) -> Gate:
    """A gate; `whole` when `node` is all of an `if`/`while` condition (a negated check is read as one); `flips`
    when the code it guards runs where it is false (after an `if` that exits, under `!`)."""
    negated = flips or whole and holder in ("if", "while") and _negated_check(node, names)
    detail = _detail(node, holder, names, negated, exit)
    return Gate(
        kind=KIND,
        start=node.start_byte,
        end=node.end_byte,
        line=line_of(source, node.start_byte),
        text=source[node.start_byte : node.end_byte].decode("utf-8"),
        admits=_admits_node(node, names, universe, negated),
        context=context,
        detail=detail,
    )


# ---------------------------------------------------------------- widening


def _snippet(text: str, language: str = "cpp") -> tree_sitter.Node | None:
    """The expression `text` parsed on its own, or None when it is not one expression."""
    data = text.encode("utf-8")
    tree = syntax.parser(language).parse(_WRAP_HEAD + data + _WRAP_TAIL)
    if tree.root_node.has_error:
        return None
    node = tree.root_node.descendant_for_byte_range(len(_WRAP_HEAD), len(_WRAP_HEAD) + len(data))
    while node is not None and (node.start_byte, node.end_byte) != (len(_WRAP_HEAD), len(_WRAP_HEAD) + len(data)):
        node = node.parent
    return node


def admits(text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS, detail: Mapping[str, Any] | None = None) -> ArchSet:
    """What a check, given as text, admits; `detail` carries the meanings `find` used."""
    names = dict((detail or {}).get("names", {}))
    node = _snippet(text)
    if node is None:
        return ArchSet(universe, frozenset(), frozenset(universe))
    return _admits_node(node, names, universe, bool((detail or {}).get("negated")))


def widen(
    source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...] = DEFAULT_ARCHS
) -> list[Edit]:
    """The smallest edit of the gate's text after which it admits exactly its archs plus `targets`."""
    if source[gate.start : gate.end].decode("utf-8", "replace") != gate.text:
        raise CannotWiden(f"line {gate.line}: the source no longer has this check; find the gates again")
    names = dict(gate.detail.get("names", {}))
    scope = tuple(dict.fromkeys((*universe, *targets)))
    node = _snippet(gate.text) if gate.text.isascii() else None
    where = f"line {gate.line}"  # the caller names the gate's text
    if node is None:
        raise CannotWiden(f"{where}: it does not parse as one expression; widen it by hand")
    negated = bool(gate.detail.get("negated"))
    before = _admits_node(node, names, scope, negated)
    if before.unknown:
        unknown = gate.detail.get("unknown") or []
        why = (
            f"what {', '.join(unknown)} holds is not known; declare it in the recipe, e.g. names = {{\"{unknown[0]}\" = \"sm\"}}"
            if unknown
            else "it compares with something other than an integer literal"
        )
        raise CannotWiden(f"{where}: {why}; widen it by hand otherwise")
    if all(before.admits(t) for t in targets):
        return []
    expected = before.admitted | frozenset(targets)
    missing = [t for t in targets if not before.admits(t)]
    inside = _context_of(source, gate)
    candidates: list[Callable[..., str | None]] = [
        _extend_chain, _widen_conjunct, _drop_conjuncts, _macro_chain, _add_disjunct, _add_equality
    ]
    drop: Callable[..., str | None] = _drop_conjuncts
    if negated:  # the same rewrites, De Morgan's dual: `!=` chains joined by `&&` inside an `||`
        candidates, drop = [_extend_negated_chain, _widen_disjunct, _drop_disjuncts], _drop_disjuncts
    if whole_families(targets, scope):  # a whole major is asked for: its minor test goes (beebc6074)
        candidates = [drop, *(candidate for candidate in candidates if candidate is not drop)]
    if not negated:  # a range the targets adjoin: in an `||`, before an equality gains them; alone, after a drop
        candidates.insert(0 if logical_op(syntax.unparenthesized(node)) == "||" else 3, _move_range_bound)
    for candidate in candidates:
        text = candidate(gate.text, node, names, missing, inside)
        if text is None:
            continue
        rewritten = _snippet(text)
        if rewritten is None:
            continue
        after = _admits_node(rewritten, names, scope, negated)
        if not after.unknown and after.admitted == expected:
            edit = edit_between(gate.text.encode(), text.encode())
            return fit(source, [Edit(edit.start + gate.start, edit.end + gate.start, edit.text)]) if edit else []
    wanted = ", ".join(t.name for t in targets)
    if "exit" in gate.detail:
        raise CannotWiden(
            f"{where}: the code after this `if` runs where the check is false (the `if` ends in "
            f"`{gate.detail['exit']}`), and no rewrite makes it false for exactly its archs plus {wanted} "
            "(that needs a test removed or narrowed); widen it by hand"
        )
    raise CannotWiden(f"{where}: no rewrite admits exactly its archs plus {wanted}; widen it by hand")


def has_edit(gate: Gate, arch: Arch, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> bool:
    """Whether `widen` writes an edit after which the gate admits `arch` (scan: widenable, or needs a human): the
    rewrite is read from the gate's text alone, as `widen` reads it."""
    data = gate.text.encode()
    try:
        return bool(widen(data, dataclasses.replace(gate, start=0, end=len(data)), (arch,), universe))
    except CannotWiden:
        return False


def _context_of(source: bytes, gate: Gate) -> str:
    """`&&` or `!` when the gate is an operand of one (so an added `||` needs parentheses), else ""."""
    before = source[: gate.start].rstrip()
    after = source[gate.end :].lstrip()
    if before.endswith((b"&&", b"!")) or re.search(rb"\b(?:and|not)$", before) or after.startswith(b"&&") or re.match(rb"and\b", after):
        return "&&"
    return ""


def _span(node: tree_sitter.Node) -> tuple[int, int]:
    return node.start_byte - len(_WRAP_HEAD), node.end_byte - len(_WRAP_HEAD)


def _chain_terms(
    node: tree_sitter.Node, names, joiner: str = "||", op: str = "=="
) -> tuple[list[tree_sitter.Node], list[Atom], str] | None:
    """The equality terms of `a == 1 || a == 2` (one variable, known meaning) and the chain's `||` spelling;
    with `joiner="&&"` and `op="!="`, the terms of a negated chain `a != 1 && a != 2`."""
    terms: list[tree_sitter.Node] = []
    spelling = joiner

    def walk(current: tree_sitter.Node) -> bool:
        nonlocal spelling
        inner = syntax.unparenthesized(current)
        if logical_op(inner) == joiner:
            spelling = (syntax.field(inner, "operator").text or joiner.encode()).decode()
            return walk(syntax.field(inner, "left")) and walk(syntax.field(inner, "right"))
        terms.append(current)
        return True

    walk(node)
    if len(terms) == 1:  # a lone `(sm == 89)` gains its terms inside the author's parentheses
        terms = [syntax.unparenthesized(terms[0])]
    read = [read_atom(syntax.unparenthesized(term), names) for term in terms]
    atoms = [a for a in read if a is not None and a.op == op and a.meaning is not None]
    if len(atoms) != len(read):
        return None
    if len({a.variable for a in atoms}) != 1:
        return None
    return terms, atoms, spelling


def _new_terms(text: str, terms, atoms: list[Atom], values: list[int]) -> list[tuple[int, str]]:
    """(index of the term to insert after, -1 before the first; the new term's text) per missing value."""
    out = []
    numbers = [a.number for a in atoms]
    for value in values:
        after = max((i for i, n in enumerate(numbers) if n < value), default=-1)
        reference, atom = terms[max(after, 0)], atoms[max(after, 0)]
        start, end = _span(reference)
        n_start, n_end = _span(atom.number_node)
        out.append((after, text[start:n_start] + str(value) + text[n_end:end]))
    return out


def _chain_missing(node, names, missing: list[Arch], joiner: str = "||", op: str = "=="):
    """The chain of `node` and the values it must gain for `missing`; None when it is no chain or lacks none."""
    chain = _chain_terms(node, names, joiner, op)
    if chain is None:
        return None
    terms, atoms, spelling = chain
    meaning = atoms[0].meaning
    assert meaning is not None  # _chain_terms keeps only atoms of a known meaning
    values = sorted({value_of(meaning, t) for t in missing} - {a.number for a in atoms})
    return (terms, atoms, spelling, values) if values else None


def _extend_chain(text: str, node, names, missing: list[Arch], inside: str) -> str | None:
    found = _chain_missing(node, names, missing)
    if found is None:
        return None
    terms, atoms, spelling, values = found
    bare = len(terms) == 1 and _span(terms[0]) == _span(node)
    return _insert(text, terms, atoms, values, spelling, wrap=inside == "&&" and bare)


def _insert(text: str, terms, atoms, values, spelling: str, wrap: bool) -> str:
    grouped: dict[int, list[str]] = {}
    for after, term in _new_terms(text, terms, atoms, values):
        grouped.setdefault(after, []).append(term)
    edits = []
    for after, added in grouped.items():
        if after >= 0:
            edits.append((_span(terms[after])[1], "".join(f" {spelling} {term}" for term in added)))
        else:
            edits.append((_span(terms[0])[0], "".join(f"{term} {spelling} " for term in added)))
    out = text
    for at, piece in sorted(edits, key=lambda e: e[0], reverse=True):
        out = out[:at] + piece + out[at:]
    if wrap:
        start, end = _span(terms[0])[0], _span(terms[-1])[1] + len(out) - len(text)
        out = out[:start] + "(" + out[start:end] + ")" + out[end:]
    return out


def _conjuncts(node: tree_sitter.Node, joiner: str = "&&") -> list[tree_sitter.Node]:
    inner = syntax.unparenthesized(node)
    if logical_op(inner) == joiner:
        return [*_conjuncts(syntax.field(inner, "left"), joiner), syntax.field(inner, "right")]
    return [node]


def _failing(conjuncts, names, missing: list[Arch], failing: bool = False) -> list[int]:
    """The operands a missing arch evaluates to `failing` on: False for a conjunct, True for a negated disjunct."""
    return [i for i, c in enumerate(conjuncts) if any(evaluate_node(c, t, names) is failing for t in missing)]


def _widen_operand(text: str, node, names, missing: list[Arch], joiner: str, chain: str, op: str) -> str | None:
    """In a `joiner` of operands, the one operand a target fails gains its value in its `chain` of `op`s:
    a conjunct's `==` chain (`props.major == 12 && props.minor == 0`), or, De Morgan's dual, a negated check's
    disjunct's `!=` chain (`major != 10 || (minor != 0 && minor != 3)`)."""
    operands = _conjuncts(node, joiner)
    if len(operands) < 2:
        return None
    failing = _failing(operands, names, missing, joiner == "||")
    if len(failing) != 1:
        return None
    term = operands[failing[0]]
    found = _chain_missing(term, names, missing, chain, op)
    if found is None:
        return None
    terms, atoms, spelling, values = found
    if joiner == "&&" and atoms[0].meaning == "major" and "minor" in _variables(node, names).values():
        return None  # `(major == 10 || major == 11) && (minor == 0 || minor == 3)`: 11.3 too (round 11 bug 6)
    bare = len(terms) == 1 and _span(terms[0]) == _span(term)
    return _insert(text, terms, atoms, values, spelling, wrap=bare)


def _widen_conjunct(text: str, node, names, missing: list[Arch], inside: str) -> str | None:
    return _widen_operand(text, node, names, missing, "&&", "||", "==")


def _add_disjunct(text: str, node, names, missing: list[Arch], inside: str) -> str | None:
    """A check of a major and its minors gains a disjunct per new major, in the check's spelling:
    `major == 10 && (minor == 0 || minor == 3)` -> `(major == 10 && (minor == 0 || minor == 3)) || (major == 11
    && minor == 0)`, not a cross product of majors and minors."""
    top = logical_op(syntax.unparenthesized(node))
    variables = _variables(node, names)
    by_meaning = {m: v for v, m in variables.items()}
    if node.type == "call_expression" or top is None or len(variables) != 2 or set(by_meaning) != {"major", "minor"}:
        return None
    if any(evaluate_node(node, Arch(t.major, m), names) is not False for t in missing for m in range(10)):
        return None  # a major the check already tests gains its minor in the check's own chain, or nothing
    words = re.search(r"\b(?:and|or)\b", text) is not None
    both, either = ("and", "or") if words else ("&&", "||")
    minors: dict[int, list[int]] = {}
    for target in missing:
        minors.setdefault(target.major, []).append(target.minor)
    major, minor = by_meaning["major"], by_meaning["minor"]
    added = []
    for value, listed in sorted(minors.items()):
        tests = [f"{minor} == {m}" for m in sorted(set(listed))]
        test = tests[0] if len(tests) == 1 else "(" + f" {either} ".join(tests) + ")"
        added.append(f"({major} == {value} {both} {test})")
    old = text if top == "||" or syntax.unparenthesized(node) is not node else f"({text})"
    out = f" {either} ".join([old, *added])
    return f"({out})" if inside == "&&" else out


def _add_equality(text: str, node, names, missing: list[Arch], inside: str) -> str | None:
    """Keep a bound and add an equality per value: `sm_major < 10` -> `sm_major < 10 || sm_major == 12`, `sm < 100`
    -> `sm < 100 || sm == 120 || sm == 121`, as python_capability does (SGLang 0.5.19), inside the author's
    parentheses or in new ones inside `&&` or after `!`."""
    inner = syntax.unparenthesized(node)
    atom = read_atom(inner, names)
    if logical_op(inner) != "||" and (atom is None or atom.op in ("==", "!=")):
        return None  # an equality is _extend_chain's; an `&&` would need parentheses inside the `||`
    variables = _variables(node, names)
    meaning = next(iter(variables.values())) if len(variables) == 1 else None
    if node.type == "call_expression" or meaning is None:
        return None
    either = "or" if re.search(r"\b(?:and|or|not)\b", text) else "||"
    stack, first = [inner], None
    while first is None and stack:  # the leftmost comparison: its variable as written
        current = stack.pop()
        first = read_atom(current, names)
        stack.extend(reversed(current.children))
    if first is None:
        return None
    variable = text[slice(*_span(first.variable_node))]
    added = "".join(f" {either} {variable} == {value}" for value in sorted({value_of(meaning, t) for t in missing}))
    if _span(inner) != _span(node):  # `(sm < 100)`: the new terms go inside
        end = _span(inner)[1]
        return text[:end] + added + text[end:]
    return f"({text}{added})" if inside == "&&" else text + added


def _move_range_bound(text: str, node, names, missing: list[Arch], inside: str) -> str | None:
    """`sm == 90 || (sm >= 100 && sm < 110)` -> `... && sm < 120)` for sm_110 (`moved_upper_bound`)."""
    for atom in range_bounds(node, names):
        values = sorted({value_of(atom.meaning or "", t) for t in missing})
        new = moved_upper_bound(atom.meaning, atom.number, atom.op == "<=", values)
        start, end = _span(atom.number_node)
        if new is not None and text[start:end].rstrip("uUlL") == str(atom.number):  # `110u` keeps its `u`
            return text[:start] + str(new) + text[start + len(str(atom.number)) :]
    return None


def _extend_negated_chain(text: str, node, names, missing: list[Arch], inside: str) -> str | None:
    """`minor != 0 && minor != 3` -> `minor != 0 && minor != 3 && minor != 7`."""
    found = _chain_missing(node, names, missing, "&&", "!=")
    if found is None:
        return None
    terms, atoms, spelling, values = found
    return _insert(text, terms, atoms, values, spelling, wrap=False)


def _widen_disjunct(text: str, node, names, missing: list[Arch], inside: str) -> str | None:
    return _widen_operand(text, node, names, missing, "||", "&&", "!=")


def _drop_disjuncts(text: str, node, names, missing: list[Arch], inside: str) -> str | None:
    """`major != 10 || minor != 0` -> `major != 10` where the minor test refuses a target."""
    return _drop_conjuncts(text, node, names, missing, inside, "||")


def _drop_conjuncts(text: str, node, names, missing: list[Arch], inside: str, joiner: str = "&&") -> str | None:
    conjuncts = _conjuncts(node, joiner)
    failing = set(_failing(conjuncts, names, missing, joiner == "||"))
    if not failing or len(failing) == len(conjuncts):
        return None
    cuts = drop_operands([_span(c) for c in conjuncts], [i in failing for i in range(len(conjuncts))])
    return apply_edits(text.encode(), cuts).decode()


def _macro_chain(text: str, node, names, missing: list[Arch], inside: str) -> str | None:
    """`X_CHECK_EQ(major, 10)` -> `X_CHECK(major == 10 || major == 12)`."""
    if node.type != "call_expression":
        return None
    match = COMPARISON_MACRO.match(macro_name(node) or "")
    atom = macro_atom(node, names)
    if match is None or atom is None or atom.op != "==" or atom.meaning is None:
        return None
    values = sorted({atom.number} | {value_of(atom.meaning, t) for t in missing})
    variable_text = text[slice(*_span(atom.variable_node))]
    chain = " || ".join(f"{variable_text} == {value}" for value in values)
    function = node.child_by_field_name("function")
    arguments = node.child_by_field_name("arguments")
    start, _ = _span(function)
    a_start, a_end = _span(arguments)
    return text[:start] + match.group("base") + "(" + chain + ")" + text[a_end:]
