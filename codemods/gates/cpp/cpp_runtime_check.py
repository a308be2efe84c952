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

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet, whole_families
from codemods.cpp import syntax
from codemods.gates import CannotWiden, Edit, Gate, decode, edit_between, line_of
from codemods.gates.cpp.checks.conditions import (
    FIXED, Atom, MEANINGS, conditions, has_fixed, evaluate_node, gates_in, is_not, logical_op, macro_atom, read_atom, unreadable,
)
from codemods.gates.cpp.checks.polarity import exit_of
from codemods.gates.cpp.checks.widening import (
    _add_disjunct, _add_equality, _add_pair, _chain_terms, _context_of, _drop_conjuncts, _drop_disjuncts, _extend_chain,
    _extend_negated_chain, _macro_chain, _move_range_bound, _snippet, _variables, _widen_conjunct, _widen_disjunct,
)  # fmt: skip
from codemods.gates.cpp.wrap import fit

KIND = "cpp_runtime_check"


def check_selector(name: str, value, meanings: tuple[str, ...] = MEANINGS, fixed: bool = True) -> str:
    """`names` maps a variable's text to one of `meanings` (or, with `fixed`, a fixed arch: `"sm_100"`); the other
    selectors are strings."""
    if name != "names":
        return "" if isinstance(value, str) and value else f"{name!r} must be a string"
    if not isinstance(value, dict) or not value:
        return "'names' must be a table of variable = meaning"
    for variable, meaning in value.items():
        if meaning not in meanings and not (fixed and isinstance(meaning, str) and FIXED.match(meaning)):
            also = ', or a fixed arch such as "sm_100" (a config built for that arch)' if fixed else ""
            return f"names: {variable!r} = {meaning!r}; a meaning is one of {', '.join(meanings)}{also}"
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
            else "it compares with something other than an integer literal (a config's arch compared with the "
            "device's is read when the recipe names it as a fixed arch: names = {\"config.sm_version\" = \"sm_100\"})"
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
    if has_fixed(names):  # a config's arch against the device's: the new pair, as its own disjunct
        candidates.insert(0, _add_pair)
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


