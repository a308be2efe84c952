"""Widening a C++ runtime check: the rewrites cpp_runtime_check's `widen` tries on a condition (extend an
`==` chain, add a disjunct or an equality, move a range's bound, drop the conjuncts or disjuncts that exclude
the targets, rewrite a check macro's argument), and the parse of a condition on its own they share.

Pure: text in, text out.
"""

from __future__ import annotations

import re

import tree_sitter

from codemods.core.arch import Arch, moved_upper_bound
from codemods.cpp import syntax
from codemods.gates import Gate, apply_edits, drop_operands
from codemods.gates.cpp.checks.conditions import (
    Atom, COMPARISON_MACRO, _chain, evaluate_node, logical_op, macro_atom, macro_name, range_bounds, read_atom, reads_fixed,
    relation, relation_variables, side_value, value_of,
)  # fmt: skip


# `return`, not `(void)(`: after a cast's parenthesis tree-sitter reads `sm < 100 || sm >= 110` as a template
_WRAP_HEAD = b"void __codemod_check__() { return "


_WRAP_TAIL = b"; }\n"


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
        elif current.type == "binary_expression" and relation(current, names) is not None:
            out.update(relation_variables(current, names))
        stack.extend(current.children)
    return out


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
    spelling = _chain_walk(node, joiner, terms) or joiner
    if len(terms) == 1:  # a lone `(sm == 89)` gains its terms inside the author's parentheses
        terms = [syntax.unparenthesized(terms[0])]
    read = [read_atom(syntax.unparenthesized(term), names) for term in terms]
    atoms = [a for a in read if a is not None and a.op == op and a.meaning is not None]
    if len(atoms) != len(read):
        return None
    if len({a.variable for a in atoms}) != 1:
        return None
    return terms, atoms, spelling


def _chain_walk(current: tree_sitter.Node, joiner: str, terms: list[tree_sitter.Node]) -> str | None:
    """`_chain_terms`' walk: the terms of the `joiner` chain into `terms`, in order; the spelling of the chain's last
    `joiner` in the walk's order (None: no `joiner`, one term)."""
    inner = syntax.unparenthesized(current)
    if logical_op(inner) != joiner:
        terms.append(current)
        return None
    own = (syntax.field(inner, "operator").text or joiner.encode()).decode()
    left = _chain_walk(syntax.field(inner, "left"), joiner, terms)
    right = _chain_walk(syntax.field(inner, "right"), joiner, terms)
    return right or left or own


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


def _add_pair(text: str, node, names, missing: list[Arch], inside: str) -> str | None:
    """A check that a config's arch matches the device's gains the new pair as a disjunct of its own, in the
    check's spelling: `cfg / 10 == sm_ / 10` with `cfg` named `"sm_100"`, for sm_110 ->
    `(cfg / 10 == sm_ / 10) || (cfg / 10 == 10 && sm_ / 10 == 11)` (FlashInfer 8f4e806e2: SM100 MoE configs on
    SM110 devices)."""
    inner = syntax.unparenthesized(node)
    top = logical_op(inner)
    operands = [inner] if top is None else [syntax.unparenthesized(o) for o in _chain(inner, "||")] if top == "||" else []
    for operand in operands:
        sides = relation(operand, names)
        op = operand.child_by_field_name("operator") if sides is not None else None
        if sides is None or op is None or op.text != b"==":
            continue
        fixed, other = sides if reads_fixed(sides[0], names) else sides[::-1]
        if not reads_fixed(fixed, names) or reads_fixed(other, names):
            continue
        fixed_value = side_value(fixed, missing[0], names)
        values = sorted({side_value(other, target, names) for target in missing}, key=lambda v: -1 if v is None else v)
        if fixed_value is None or None in values or any(side_value(fixed, t, names) != fixed_value for t in missing):
            return None
        fixed_text, other_text = (text[slice(*_span(side))] for side in (fixed, other))
        tests = [f"{other_text} == {value}" for value in values]
        device = tests[0] if len(tests) == 1 else "(" + " || ".join(tests) + ")"
        old = text if top == "||" or inner is not node else f"({text})"
        out = f"{old} || ({fixed_text} == {fixed_value} && {device})"
        return f"({out})" if inside == "&&" else out
    return None

