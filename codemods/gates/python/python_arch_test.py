"""Arch predicates tested alone by an `if`, `elif`, `while` or `assert`: single, negated and flags.

    if is_sm100_supported():                     # single
    assert is_sm90_supported(), "needs SM90"     # single, in an assert
    if not is_sm120a_supported(query.device):    # negated
    if not has_sm90 and not has_sm100:           # a chain of negated predicates
    if has_sm120:                                # a build flag (FlashInfer's aot.py)
    if cond and is_sm100_supported():            # one operand of the test's `and`

A predicate is spelled as python_arch_or's are (`is_smNN[a|f][_supported]`,
a name, call or attribute), or is a build flag `has_smNNN[a|f]`; what it
admits is what its definition says (`meanings`, see `python.predicates.reading`), never
its name. An `or`-chain of predicates tested by an `if` (`if P or Q:`, `if not (P or
Q):`) is this kind's too, so that what `widen` makes is found again (and
left alone); python_arch_or finds such chains anywhere.

`widen` adds the predicate of each target it does not admit yet, spelled like
the last one (`is_sm121a_supported` beside `is_sm120a_supported`), with the
import or definition it needs (as python_arch_or does):

- single: `P` becomes `P or Q`, parenthesized when it is one operand of an
  `and` (`cond and (P or Q)`);
- negated: `not P` becomes `not (P or Q)` or `not P and not Q`: the form the
  file already uses for negated predicates; in a file with neither, a
  predicate called with arguments (FlashInfer's `is_sm120a_supported(device)`,
  9e5ec6a0c) gets the parentheses and one without (SGLang's
  `is_sm90_supported()`) the `and not`;
- a negated chain gains ` and not Q`, an `or` chain ` or Q`; the negated
  predicates of one `and` are one chain among other conditions too
  (`cond and not P and not Q`), so a second pass finds what the first made.

An `and` that requires one predicate and refuses another (`is_sm90_supported()
and not is_sm100_supported()`): `not Q` there excludes Q rather than guarding
for it. Widening the required one drops the refusals when they refuse nothing
it admits or gains (`is_sm90_supported() or is_sm120_supported()`, SGLang
0.5.16); otherwise, and for the refused chain itself, the gate is refused
(widen it by hand).

An `if`/`elif`/`while` line the widening makes longer than the file's line
length (88, or the longest line long for its code) is split as black splits
it: `... and not (` / the predicates one level deeper / `):`, and before each
`or` if they still do not fit (see `python.layout.wrap.wrapped`, which python_arch_or shares).
A negated call black had split over lines is laid out anew (`python.layout.wrap.relaid`).

A predicate (or an `or` of them) in a value assigned is a gate only where a
change names its target with `assigns` (scan lists every one): `flag =
is_sm120a_supported(dev)`, `use: bool = P and other`, `ok &= P`,
`pick(P, other)`; it widens as a test does (`flag = P or Q`, `(P or Q) and
other`), a negated one never (what `not P` stored means is its readers').

Selectors pick the `if`: `function` (the function around it), `assigns` (its
body assigns that dotted target, or, for a conditional expression, `X = a if
P else b`, or a value, the value is assigned to it), `tests` (its test names that
predicate or flag: `if has_sm100f:` beside `if has_sm100:`, both of which
admit sm_100 alone) and `calls` (its body calls that function,
or any of a list). With `calls`, the feature is the body's statements that
call one of them, and, to a fixpoint, the statements that only serve those:

- backward: a statement whose every bound name (import or assignment target)
  the feature reads and no other statement of the body does (`from flashinfer
  import nvfp4_kv_dequantize`, `quant_2d = quant.view(...).reshape(...)`);
- forward: a statement that binds nothing, reads a name the feature binds and
  calls no free function outside the list (`return output_2d.reshape(b, m,
  -1)`; a method call is no free function).

A body that runs any other statement is not widened: upstream split such
blocks (c25bd1486 moved `gen_fp4_quantization_sm121_module` out of `if
has_sm121:`), so the gate fails as "needs a human", naming those lines.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, TypeGuard

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.core.lazy import LazyModule
from codemods.gates import CannotWiden, Edit, Gate, SourceError, drop_operands
from codemods.gates.python.predicates import named
from codemods.gates.python.predicates import gained
from codemods.gates.python.predicates.calls import _calls, _other_statements
from codemods.gates.python import python_arch_or as chains
from codemods.gates.python.predicates.reading import Meaning
from codemods.gates.python.cst_source import PythonSource, parse, parse_gate_expression
from codemods.gates.python.layout.wrap import joined, relaid, wrapped

if TYPE_CHECKING:
    import libcst as cst
    from libcst import helpers as cst_helpers
else:  # imported on first use: `codemod list` needs no libcst
    cst = LazyModule("libcst")
    cst_helpers = LazyModule("libcst.helpers")

KIND = "python_arch_test"

_FLAG_RE = re.compile(r"^_?has_sm\d{2,3}[af]?$")
@cache
def _tested() -> tuple[type[cst.If], type[cst.While], type[cst.Assert], type[cst.IfExp]]:
    return (cst.If, cst.While, cst.Assert, cst.IfExp)


NEGATIONS = ("parentheses", "and_not")


def check_selector(name: str, value) -> str:
    if name == "negation":
        if value in NEGATIONS:
            return ""
        return "'negation' must be \"parentheses\" (`not (P or Q)`) or \"and_not\" (`not P and not Q`)"
    if name == "tests":
        return "" if isinstance(value, str) and value else "'tests' must be a predicate's name (`has_sm100f`)"
    if name == "calls":
        if isinstance(value, str) or (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
            return ""
        return "'calls' must be a function name or a list of them"
    return "" if isinstance(value, str) else f"{name!r} must be a string"


def find(
    source: bytes, universe: tuple[Arch, ...] = DEFAULT_ARCHS, meanings: Mapping[str, Meaning] | None = None,
    values: bool = False, *, function: str | None = None, assigns: str | None = None,
    calls: str | list[str] | None = None, negation: str | None = None, tests: str | None = None,
) -> list[Gate]:
    """Every predicate test (single, negated, negated chain, flag chain), in source order.

    `negation` ("parentheses" or "and_not") is how `widen` is to negate several predicates where a lone one is
    negated, whatever the file shows (`_negation_style`): kept in each gate's detail. A predicate (or `or` of
    them) in a value assigned (`flag = is_sm120a_supported(dev)`) is a gate where `assigns` names its target, or
    with `values` (what scan lists); never a negated one (what `not P` stored means is up to its readers)."""
    parsed = parse(source, chains.MENTIONS)
    wanted = [calls] if isinstance(calls, str) else list(calls or [])
    gates = []
    for node, shape, predicates in _shapes(parsed):
        statement = _tested_by(parsed, node)
        value = chains.assignment_of(parsed, node) if statement is None and shape in ("single", "or") else None
        local = bool(parsed.enclosing_function(node))
        if value is not None and not chains.aliases(value[0], local) and (values and assigns is None or value[0] == assigns):
            statement = parsed.parent(node)  # the value: selected by its target, never by `calls`
        if statement is None or _local_values(parsed, node, predicates) or shape == "not" and _beside_required(parsed, node):
            continue
        context = parsed.enclosing_function(node)
        if function is not None and context != function:
            continue
        if tests is not None and tests not in [p.ident.value for p in predicates]:
            continue
        if assigns is not None and value is None and not (
            isinstance(statement, cst.If) and chains.assigned_in(statement.body, assigns)
            or isinstance(statement, cst.IfExp) and chains.value_assigned_to(parsed, statement, assigns)
        ):
            continue
        detail: dict = {
            "shape": shape,
            "predicates": [p.ident.value for p in predicates],
            "form": predicates[-1].form,
            **chains.value_detail(value, local),
        }
        if negation is not None and shape == "not":
            detail["negation"] = negation
        if wanted:
            if not isinstance(statement, cst.If) or not _calls(statement.body, wanted):
                continue
            others = _other_statements(parsed, statement.body, wanted)
            if others:
                detail["needs_human"] = others
        start, end = parsed.outer_span(node)
        cls = chains.owner(parsed, node)
        if cls:
            detail["class"] = cls
        admits, unknown = named.admits_of(predicates, universe, chains.scoped(meanings, cls))
        if unknown:
            detail["unknown"] = unknown
        gates.append(
            Gate(
                kind=KIND, start=start, end=end, line=parsed.line(start), text=parsed.text(start, end),
                admits=admits, context=context, detail=detail,
            )
        )
    return gates


def widen(
    source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    meanings: Mapping[str, Meaning] | None = None, negation: str = "",
) -> list[Edit]:
    """Edits that make the test admit `targets` too; `[]` if it does already. `negation` is the style of the
    nearest file in the file's folder that shows one (`negation_shown`), for a file that shows none."""
    return _plan(source, gate, targets, universe, meanings, negation).edits


def notes(
    source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    meanings: Mapping[str, Meaning] | None = None, negation: str = "",
) -> list[str]:
    """What widening the test had to guess, for the run to say (the negation style no file showed)."""
    return _plan(source, gate, targets, universe, meanings, negation).notes


def missing_symbols(
    source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    meanings: Mapping[str, Meaning] | None = None,
) -> list[str]:
    """Symbols the widened test takes from other modules (python_arch_or.missing_symbols' form: an import's
    `module.name`), for the planner to check; `[]` when it admits the targets already."""
    return _plan(source, gate, targets, universe, meanings).symbols


def _plan(
    source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...], meanings: Mapping[str, Meaning] | None,
    negation: str = "",
) -> gained.Plan:
    parsed = parse(source, chains.MENTIONS)
    node, shape, predicates = _locate(parsed, gate)
    template, names = gained.new_predicates(
        predicates, gate, targets, universe, chains.scoped(meanings, gate.detail.get("class")), parsed.source
    )
    if template is None:
        return gained.Plan([], [])
    if gate.detail.get("needs_human"):
        lines = "; ".join(gate.detail["needs_human"])
        raise CannotWiden(
            f"needs a human: the block of line {gate.line} also runs {lines}, which the recipe does not name; "
            "split the block (upstream did) or name those calls too"
        )
    scoped = chains.scoped(meanings, gate.detail.get("class"))
    dropped, alone = _drop_needless_refusals(parsed, node, gate, targets, names, universe, scoped)
    spelled = [gained.spelled(parsed, template, n) for n in names]
    start, end = parsed.outer_span(template.operand)
    guessed: list[str] = []
    if shape in ("or", "single", "not_or"):
        text = b"".join(b" or " + s for s in spelled)
        parent = parsed.parent(node)
        if shape == "single" and not alone and _needs_parentheses(parsed, node, parent):
            edits = [Edit(start, start, b"("), Edit(end, end, text + b")")]
        else:
            edits = [Edit(end, end, text)]
    elif shape == "and_not":
        edits = [Edit(end, end, b"".join(b" and not " + s for s in spelled))]
    else:  # "not": `not P`
        lone = not isinstance(parsed.parent(node), cst.BooleanOperation)  # `if not P:`, not `if x and not P:`
        style = gate.detail.get("negation") or _negation_style(parsed, template, lone) or negation
        if not style:  # neither this file nor one beside it shows one: a guess, which the run's notes say
            called_with_arguments = isinstance(template.operand, cst.Call) and bool(template.operand.args)
            style = "parentheses" if called_with_arguments else "and_not"
            guessed.append(
                f"line {gate.line}: negation style guessed ({_STYLES[style]}): neither this file nor one in its folder "
                f'negates several predicates; set negation = "parentheses" or "and_not" in the change to choose'
            )
        if style == "parentheses":
            text = b"".join(b" or " + s for s in spelled)
            edits = [Edit(start, start, b"("), Edit(end, end, text + b")")]
            old = joined(parsed.source[start:end].decode("utf-8"))
            new = [joined(s.decode("utf-8")) for s in spelled]
            if b"\n" in parsed.source[start:end] and old is not None and None not in new:
                # black split the call (`if not P(` / `    device or ...` / `):`): the test is laid out anew
                written = "(" + old + "".join(f" or {s}" for s in new) + ")"
                edits = relaid(parsed.source, Edit(start, end, written.encode("utf-8"))) or edits
        else:
            at = parsed.outer_span(node)[1]
            edits = [Edit(at, at, b"".join(b" and not " + s for s in spelled))]
    if shape in ("or", "not_or", "and_not"):
        edits = _in_order(parsed, shape, predicates, [named.number_of(n) for n in names], spelled) or edits
    edits = wrapped(parsed.source, edits + dropped)
    plan = gained.supporting(parsed, node, predicates, template, names, edits, gate)
    return gained.Plan(plan.edits, plan.symbols, guessed)


def admits(
    text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS, meanings: Mapping[str, Meaning] | None = None
) -> ArchSet:
    """The archs a predicate test, given as text, admits (those its predicates admit)."""
    try:
        node = parse_gate_expression(text)
    except cst.ParserSyntaxError:
        return ArchSet(universe, frozenset(), frozenset(universe))
    predicates = _read(node)
    if predicates is None:
        return ArchSet(universe, frozenset(), frozenset(universe))
    return named.admits_of(predicates, universe, meanings)[0]


# ---------------------------------------------------------------- shapes


def _predicate(node: cst.BaseExpression):
    found = chains.predicate_of(node)
    if found is not None:
        return found
    if isinstance(node, cst.Name) and _FLAG_RE.match(node.value):
        assert named.PREDICATE_RE.match(node.value) is not None  # a name _FLAG_RE matches, PREDICATE_RE matches too
        number = named.number_of(node.value)
        return named.Predicate(node, node, "name", number, frozenset({number // 10}))
    return None


def _negated(node: cst.BaseExpression):
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return _predicate(node.expression)
    return None


def _is_and(node: cst.CSTNode | None) -> TypeGuard[cst.BooleanOperation]:
    return isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And)


def _and_operands(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of an `and` chain; parenthesized chains in it are flattened: `(a and b) and c` is `a and b and c`."""
    if _is_and(node):
        return _and_operands(node.left) + _and_operands(node.right)
    return [node]


def _negated_operands(node: cst.BooleanOperation) -> list[cst.BaseExpression]:
    """The operands of an `and` chain that are negated predicates (`not P`), whatever else it tests."""
    return [o for o in _and_operands(node) if _negated(o) is not None]


def _read(node: cst.BaseExpression):
    """The predicates of a test in one of this kind's shapes (after widening included), else None."""
    while isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        node = node.expression
    if chains.is_or(node):
        predicates = [_predicate(o) for o in chains.operands(node)]
        return None if any(p is None for p in predicates) else predicates
    if _is_and(node):
        # `cond and not P and not Q`: the other operands are conditions
        predicates = [_negated(o) for o in _negated_operands(node)]
        return predicates or None
    single = _predicate(node)
    return None if single is None else [single]


def _shapes(parsed: PythonSource):
    """(node, shape, predicates) for every candidate, in source order; the test position is checked later."""
    taken: set[int] = set()
    for node in parsed.nodes((cst.BooleanOperation, cst.UnaryOperation, cst.Name, cst.Call, cst.Attribute)):
        if id(node) in taken:
            continue
        if chains.is_or(node):
            if chains.is_or(parsed.parent(node)):
                continue
            predicates = [_predicate(o) for o in chains.operands(node)]
            if any(p is None for p in predicates):
                continue
            taken.update(id(n) for p in predicates for n in parsed.nodes(cst.CSTNode, within=p.operand))
            yield node, "or", predicates  # what `P` and `not (P)` widen into, so a second pass finds it
            continue
        if _is_and(node):
            if _is_and(parsed.parent(node)):
                continue
            # the negated predicates of one `and` chain are one gate, among other operands too, so that
            # `cond and not P` widened into `cond and not P and not Q` is found again as admitting both
            negated = _negated_operands(node)
            if len(negated) >= 2:
                # the whole chain is the gate: an arch test among its other operands is no gate of its own (see widen)
                taken.update(id(n) for o in _and_operands(node) for n in parsed.nodes(cst.CSTNode, within=o))
                yield node, "and_not", [_negated(o) for o in negated]
            continue
        if isinstance(node, cst.UnaryOperation):
            inner = node.expression
            if chains.is_or(inner) and all(_predicate(o) is not None for o in chains.operands(inner)):
                predicates = [_predicate(o) for o in chains.operands(inner)]
                taken.update(id(n) for n in parsed.nodes(cst.CSTNode, within=node))
                yield node, "not_or", predicates
                continue
            predicate = _negated(node)
            if predicate is not None:
                taken.update(id(n) for n in parsed.nodes(cst.CSTNode, within=node))
                yield node, "not", [predicate]
            continue
        predicate = _predicate(node)
        if predicate is not None and not (isinstance(node, cst.Attribute) and isinstance(parsed.parent(node), cst.Call)):
            taken.update(id(n) for n in parsed.nodes(cst.CSTNode, within=node))
            yield node, "single", [predicate]


def _sides(parsed: PythonSource, node: cst.CSTNode) -> tuple[cst.CSTNode, list, list, list]:
    """The outermost `and` around `node` (or `node`), its operands, and those of them that require a predicate
    and that refuse one (`not P`): ([], [], []) outside an `and`."""
    top = node
    while _is_and(parent := parsed.parent(top)):
        top = parent
    operands = _and_operands(top) if _is_and(top) else []
    required = [o for o in operands if not _is_not(o) and _read(o) is not None]
    refused = [o for o in operands if _is_not(o) and _read(o.expression) is not None]
    return top, operands, required, refused


def _beside_required(parsed: PythonSource, node: cst.CSTNode) -> bool:
    """Whether `not P` is an operand of an `and` that requires a predicate (`is_sm90_supported() and not
    is_sm100_supported()`): a refusal, not a guard; the gate there is the required predicate."""
    return bool(_sides(parsed, node)[2])


def _is_not(node: cst.CSTNode) -> TypeGuard[cst.UnaryOperation]:
    return isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not)


def _drop_needless_refusals(
    parsed: PythonSource, node: cst.CSTNode, gate: Gate, targets: tuple[Arch, ...], names: list[str],
    universe: tuple[Arch, ...], meanings: Mapping[str, Meaning] | None,
) -> tuple[list[Edit], bool]:
    """The edits that drop the refused predicates of the `and` around `node`, and whether `node` is then the
    whole `and`; ([], False) when it refuses none.

    An `and` that requires a predicate and refuses another (`is_sm90_supported() and not is_sm100_supported()`)
    is widened only when the refused ones admit nothing the gate admits or gains: they refuse nothing then, and
    upstream drops them (SGLang 0.5.16: `-> is_sm90_supported() or is_sm120_supported()`). Otherwise `not Q`
    excludes Q rather than guarding for it: refused (widen it by hand).
    """
    top, operands, required, refused = _sides(parsed, node)
    if not refused or not required:
        return [], False
    if not any(o is node for o in required):  # the gate is the refused chain: it guards for nothing
        raise CannotWiden(
            f"line {gate.line}: its test has `{parsed.text(*parsed.span(required[0]))}` beside"
            f" `{parsed.text(*parsed.span(refused[0]))}`: a predicate required and one refused in one `and`, so what"
            " it admits is no one set; widen it by hand"
        )
    gains = set(gate.admits.admitted) | set(targets)
    for name in names:
        meaning = (meanings or {}).get(name)
        if meaning is not None and meaning.known:
            gains |= meaning.admitted(universe)
    kept = parsed.text(*parsed.span(node))
    for operand in refused:
        shut, unknown = named.admits_of(_read(operand.expression) or [], universe, meanings)
        overlap = sorted(a.name for a in shut.admitted & gains)
        if unknown or shut.unknown or gate.admits.unknown or overlap:
            why = f"it refuses {', '.join(overlap)}" if overlap else "what it refuses is not known"
            raise CannotWiden(
                f"line {gate.line}: its test has `{kept}` beside `{parsed.text(*parsed.span(operand))}`: a"
                f" predicate required and one refused in one `and`, and {why}; widen it by hand"
            )
    cuts = drop_operands([parsed.outer_span(o) for o in operands], [any(o is r for r in refused) for o in operands])
    alone = len(operands) - len(refused) == 1 and isinstance(parsed.parent(top), _tested())
    return cuts, alone


def _local_values(parsed: PythonSource, node: cst.CSTNode, predicates) -> bool:
    """Whether the test names a function's own variable or parameter spelled like a predicate (FlashInfer's
    `is_sm120 = major == 12 and minor == 0` then `if is_sm120 and use_nvfp4:`): a value, not a predicate; what
    it holds is read where it is assigned (python_capability: "a value, not a guard"), never from its name.
    Build flags (`has_sm120`, aot.py's locals) are read from their definitions (`python.predicates.reading`)."""
    return any(
        p.form == "name" and not _FLAG_RE.match(p.ident.value) and parsed.local(node, p.ident.value)
        for p in predicates
    )


def _tested_by(parsed: PythonSource, node: cst.CSTNode) -> cst.CSTNode | None:
    """The if/elif/while/assert/conditional whose test is `node`, or an operand of that test's `and`."""
    child, parent = node, parsed.parent(node)
    while _is_and(parent):
        child, parent = parent, parsed.parent(parent)
    if isinstance(parent, _tested()) and parent.test is child:
        return parent
    return None


def _needs_parentheses(parsed: PythonSource, node: cst.CSTNode, parent) -> bool:
    """`P or Q` needs parentheses unless it is the whole test, or the whole value assigned or passed
    (`flag = P or Q`, `f(P or Q)`)."""
    if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Arg)):
        return parent.value is not node
    return not (isinstance(parent, _tested()) and parent.test is node)


def _locate(parsed: PythonSource, gate: Gate):
    for node, shape, predicates in _shapes(parsed):
        if parsed.outer_span(node) == (gate.start, gate.end):
            return node, shape, predicates
    raise CannotWiden(f"line {gate.line}: {gate.text} is no longer at this place; find the gates again")


def _in_order(parsed: PythonSource, shape: str, predicates: list, numbers: list[int], spelled: list[bytes]) -> list[Edit]:
    """Edits that put each new predicate where its arch sorts, when the chain's predicates (two or more) are in
    ascending arch order: `not P90 and not P120` + sm_100 is `not P90 and not P100 and not P120` (SGLang
    0.5.17). [] to append: a single predicate or an unordered chain gives no order to keep (upstream appended
    `is_sm110` after a lone `is_sm120`, 0.5.22)."""
    known = [p.number for p in predicates]
    if len(known) < 2 or None in known or known != sorted(set(known)):
        return []
    inserted: dict[int, bytes] = {}
    for number, text in zip(numbers, spelled):
        following = next((p for p in predicates if p.number > number), None)
        if following is None:
            return []  # it sorts last: appending is the same
        operand = following.operand
        if shape == "and_not":
            negation = parsed.parent(operand)
            if not isinstance(negation, cst.UnaryOperation):
                return []
            operand, text = negation, b"not " + text + b" and "
        else:
            text += b" or "
        at = parsed.outer_span(operand)[0]
        inserted[at] = inserted.get(at, b"") + text
    return [Edit(at, at, text) for at, text in sorted(inserted.items())]


def _negation_style(parsed: PythonSource, template, lone: bool = False) -> str:
    """How this file negates several predicates: `not (A or B)` ("parentheses") or `not A and not B`, as it
    already does; for a `lone` negation (`if not P:`), a predicate negated beside another test elsewhere in
    the file counts for the latter. Where the file shows neither or both, a predicate called with arguments
    takes the parentheses (`_plan`, after the style of a file beside it: "" here).

    That evidence counts for a lone negation only: FlashInfer's test_deepseek_mla.py (beebc6074) wrote `if not
    P and not Q:` beside its `if backend == "fa3" and not P:`, while SGLang 0.5.17's server_args.py wrote
    `if x and not (P or Q):` among its `if y and not P:` tests."""
    grouped = any(
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Not)
        and chains.is_or(node.expression)
        and all(_predicate(o) is not None for o in chains.operands(node.expression))
        for node in parsed.nodes(cst.UnaryOperation)
    )
    own_start, own_end = parsed.outer_span(template.operand)

    def elsewhere(node: cst.CSTNode) -> bool:
        start, end = parsed.outer_span(node)
        return not (start <= own_start and own_end <= end)

    # `not A and not B`, or a predicate negated beside another test elsewhere in the file (`if backend == "fa3"
    # and not is_sm90a_supported(device):`, FlashInfer's test_deepseek_mla.py, where upstream beebc6074 wrote
    # `not is_sm100a_supported(device) and not is_sm110a_supported(device)`)
    spread = any(
        _is_and(node) and (len(_negated_operands(node)) >= 2 or lone and elsewhere(node) and bool(_negated_operands(node)))
        for node in parsed.nodes(cst.BooleanOperation)
    )
    if grouped != spread:
        return "parentheses" if grouped else "and_not"
    return ""


_STYLES = {"parentheses": "`not (P or Q)`", "and_not": "`not P and not Q`"}


def negation_shown(source: bytes) -> str:
    """The negation style a file shows (`_negation_style`'s evidence for a lone `if not P:`), "" for neither or
    both: what a file that shows none borrows from the nearest file in its folder (issue 34)."""
    try:
        parsed = parse(source, chains.MENTIONS)
    except SourceError:  # a neighbour that does not parse shows nothing
        return ""
    grouped = any(
        isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not) and chains.is_or(node.expression)
        and all(_predicate(o) is not None for o in chains.operands(node.expression))
        for node in parsed.nodes(cst.UnaryOperation)
    )  # fmt: skip
    spread = any(_is_and(node) and bool(_negated_operands(node)) for node in parsed.nodes(cst.BooleanOperation))
    return "" if grouped == spread else ("parentheses" if grouped else "and_not")
