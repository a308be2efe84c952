"""`or`-chains of arch predicates.

SGLang turns a feature on for the archs whose predicates it names:

    _is_sm90_supported = _is_cuda and is_sm90_supported()
    _is_sm100_supported = _is_cuda and is_sm100_supported()
    ...
    (_is_sm90_supported or _is_sm100_supported)
    and (is_sm90_supported() or is_sm100_supported())
    get_platform().is_sm90 or get_platform().is_sm100

A gate is a maximal `or` chain (nested and parenthesized `or`s flattened)
whose operands are all arch predicates: a name (`_is_sm90_supported`), a call
(`is_sm100_supported()`), an attribute (`get_platform().is_sm90`) or a call of
one (`x.is_sm100_supported()`), spelled `is_smNN`, `is_smNN_supported` or
FlashInfer's `is_smNNa_supported`, with or without a leading underscore.
What a predicate admits is what its definition says (`meanings`, read by
`python.predicates.reading` from the project's source: FlashInfer's `is_sm120a_supported`
admits SM120 only, SGLang's `is_sm120_supported` every SM12x). A predicate
whose definition was not read is unknown: the chain is reported with the
archs it cannot decide and is never widened. Without `meanings` (a direct
call that knows no project) predicate NN (or NNN) admits every arch of major
NN // 10. A chain with any other operand is not a gate and is left alone.

`widen` appends ` or <predicate>` after the last operand, spelled like it,
for each target the chain does not admit yet: the predicate numbered like the
target (`is_sm121a_supported` for sm_121), else like its major
(`is_sm120_supported`), whichever `meanings` says admits it; one that would
also admit an arch neither admitted nor asked for is not used.
`(is_sm90_supported() or is_sm100_supported())` becomes
`(is_sm90_supported() or is_sm100_supported() or is_sm120_supported())`. The
parentheses and line breaks the author wrote stay where they are; an
`if`/`elif`/`while` line (or assignment) the new predicate makes longer than the file's line
length is split as black splits it (`python.layout.wrap.wrapped`, python_arch_test's
split: `if (` / one predicate a line led by `or` / `):`). So that the
new predicate exists, it also

- copies the last module-level definition of a sibling name
  (`_is_sm100_supported = _is_cuda and is_sm100_supported()`) to a new line
  below it, with the number changed, when the new name is not defined yet;
- imports a new function (`is_sm120_supported`) in the `from ... import`
  that imports its sibling, right after the sibling with the next lower
  number (isort's order), on its own line when the import is written one
  name per line.

`function` selects the chains of one function, `assigns` those in the value
assigned to a target (`self.use_x = (is_sm100() or is_sm120()) and other`)
or deciding an `if` whose body assigns it.

Attribute forms need no supporting edit. `missing_symbols` tells which
symbols the widened code takes from other modules, for the caller to check.
Nothing is guessed: a definition that spells out its major (`cap[0] == 10`)
or a function that is neither defined here nor imported like its sibling
raises `CannotWiden`.
"""

from __future__ import annotations

import re

from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeGuard

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.core.lazy import LazyModule
from codemods.gates import CannotWiden, Edit, Gate
from codemods.gates.python.predicates.named import PREDICATE_RE, Predicate, _number, admits_of
from codemods.gates.python.predicates.gained import Plan, new_predicates, spelled, supporting
from codemods.gates.python.predicates.reading import Meaning
from codemods.gates.python.cst_source import PythonSource, admits_of_expression, parse, parse_gate_expression
from codemods.gates.python.layout.wrap import wrapped

if TYPE_CHECKING:
    import libcst as cst
    from libcst import helpers as cst_helpers
else:  # imported on first use: `codemod list` needs no libcst
    cst = LazyModule("libcst")
    cst_helpers = LazyModule("libcst.helpers")

KIND = "python_arch_or"


# Predicates named for a product line rather than a number, with the majors
# they check (SGLang utils: is_blackwell_supported uses device_capability_majors=[10, 12]).
NAMED_PREDICATES: dict[str, frozenset[int]] = {
    "is_blackwell_supported": frozenset({10, 12}),
    "is_blackwell": frozenset({10, 12}),
}

# The statements this kind and python_arch_test read (`parse`'s keep): those naming a predicate or flag,
# which holds every chain, test, sibling definition and import they find or widen.
MENTIONS = re.compile(rb"(?:is|has)_sm\d|" + b"|".join(re.escape(name.encode()) for name in sorted(NAMED_PREDICATES)))


def find(
    source: bytes,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    meanings: Mapping[str, Meaning] | None = None,
    *,
    function: str | None = None,
    assigns: str | None = None,
) -> list[Gate]:
    """Every `or` chain of arch predicates, in source order.

    With `function`, only chains whose innermost enclosing function or method
    has that name. With `assigns` (a dotted target such as
    `self.enable_flashinfer_allreduce_fusion`), only chains inside the test of
    an `if` whose body assigns that target directly, or inside the value
    assigned to it (`self.use_x = (is_sm100() or is_sm120()) and other`).
    """
    parsed = parse(source, MENTIONS)
    gates = []
    for node in parsed.nodes(cst.BooleanOperation):
        if not is_or(node) or is_or(parsed.parent(node)):
            continue
        predicates = _predicates(node)
        if predicates is None:
            continue
        context = parsed.enclosing_function(node)
        if function is not None and context != function:
            continue
        value = assignment_of(parsed, node)
        if assigns is not None and not (
            _tests_if_assigning(parsed, node, assigns) or value is not None and value[0] == assigns
        ):
            continue
        start, end = parsed.outer_span(node)
        forms = {predicate.form for predicate in predicates}
        detail = {
            "form": forms.pop() if len(forms) == 1 else "mixed",
            "predicates": [predicate.ident.value for predicate in predicates],
        }
        detail.update(value_detail(value, bool(context)))
        cls = owner(parsed, node)
        if cls:
            detail["class"] = cls
        admits, unknown = admits_of(predicates, universe, scoped(meanings, cls))
        if unknown:
            detail["unknown"] = unknown
        gates.append(
            Gate(
                kind=KIND,
                start=start,
                end=end,
                line=parsed.line(start),
                text=parsed.text(start, end),
                admits=admits,
                context=context,
                detail=detail,
            )
        )
    return gates


def owner(parsed: PythonSource, node: cst.CSTNode) -> str:
    """The class whose method holds `node` (what `cls.` and `self.` call there), "" outside a method."""
    function = next((a for a in parsed.ancestors(node) if isinstance(a, cst.FunctionDef)), None)
    if function is None:
        return ""
    for ancestor in parsed.ancestors(function):
        if isinstance(ancestor, cst.ClassDef):
            return ancestor.name.value
        if not isinstance(ancestor, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            return ""
    return ""


def scoped(meanings: Mapping[str, Meaning] | None, cls: str | None) -> Mapping[str, Meaning] | None:
    """`meanings` as a method of class `cls` sees them: `cls.is_sm90` is that class's own `is_sm90`
    (`_predicates` reads it as `Class.is_sm90`); without a class, `cls.` calls have no meaning."""
    if meanings is None or not cls:
        return meanings
    prefix = cls + "."
    own = {"cls." + k[len(prefix):]: m for k, m in meanings.items() if k.startswith(prefix)}
    return {**meanings, **own} if own else meanings


def widen(
    source: bytes,
    gate: Gate,
    targets: tuple[Arch, ...],
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    meanings: Mapping[str, Meaning] | None = None,
) -> list[Edit]:
    """Edits that make the chain admit the majors of `targets`; `[]` if it does already.

    Besides the edit to the chain, the list holds the supporting edits the new
    predicate needs (a copied definition line, an import), each minimal and
    none overlapping. Two gates of one file may need the same supporting
    edit; it comes out as the same `Edit`, which `apply_edits` applies once.
    """
    return _plan(source, gate, targets, universe, meanings).edits


def missing_symbols(
    source: bytes,
    gate: Gate,
    targets: tuple[Arch, ...],
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    meanings: Mapping[str, Meaning] | None = None,
) -> list[str]:
    """Symbols the widened chain takes from other modules, which this file cannot vouch for.

    One string per symbol; the part after the last dot is the symbol, the part
    before says where it must exist:

    - `sglang.srt.utils.is_sm120_supported`: `widen` imports it from that
      module (a relative import keeps its dots: `.utils.is_sm120_supported`);
    - `get_platform().is_sm120`: an attribute the object must have.

    Names this file already defines or imports are not listed. `[]` when the
    gate already admits the targets; raises `CannotWiden` when `widen` would.
    """
    return _plan(source, gate, targets, universe, meanings).symbols


def is_or(node: cst.CSTNode | None) -> TypeGuard[cst.BooleanOperation]:
    return isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.Or)


def operands(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    if is_or(node):
        return operands(node.left) + operands(node.right)
    return [node]


def predicate_of(operand: cst.BaseExpression) -> Predicate | None:
    expr, called = operand, False
    if isinstance(expr, cst.Call):
        expr, called = expr.func, True
    if isinstance(expr, cst.Name):
        ident, form = expr, "call" if called else "name"
    elif isinstance(expr, cst.Attribute):
        ident, form = expr.attr, "attribute_call" if called else "attribute"
    else:
        return None
    match = PREDICATE_RE.match(ident.value)
    if match is not None and "has_" in match["head"]:
        return None
    if match is None:
        named = NAMED_PREDICATES.get(ident.value.lstrip("_"))
        return None if named is None else Predicate(operand, ident, form, None, named)
    number = _number(match)
    return Predicate(operand, ident, form, number, frozenset({number // 10}))


def _predicates(chain: cst.BooleanOperation) -> list[Predicate] | None:
    read = [predicate_of(operand) for operand in operands(chain)]
    predicates = [predicate for predicate in read if predicate is not None]
    if len(predicates) != len(read):
        return None
    return predicates


def _tests_if_assigning(parsed: PythonSource, node: cst.CSTNode, target: str) -> bool:
    child = node
    for ancestor in parsed.ancestors(node):
        if (
            isinstance(ancestor, cst.If)
            and ancestor.test is child
            and assigned_in(ancestor.body, target)
        ):
            return True
        child = ancestor
    return False


def assigned_in(body: cst.BaseSuite, target: str) -> bool:
    """True when a statement directly in `body` assigns the dotted `target`."""
    if isinstance(body, cst.SimpleStatementSuite):
        statements = list(body.body)
    else:
        statements = [
            small
            for line in body.body
            if isinstance(line, cst.SimpleStatementLine)
            for small in line.body
        ]
    return any(_assigns(statement, target) for statement in statements)


def _assigns(statement: cst.CSTNode, target: str) -> bool:
    """Whether `statement` is an assignment (`=`, annotated, augmented) to the dotted `target`."""
    if isinstance(statement, cst.Assign):
        targets = [assign_target.target for assign_target in statement.targets]
    elif isinstance(statement, (cst.AnnAssign, cst.AugAssign)):
        targets = [statement.target]
    else:
        return False
    return any(cst_helpers.get_full_name_for_node(node) == target for node in targets)


def assignment_of(parsed: PythonSource, node: cst.CSTNode) -> tuple[str, bool] | None:
    """(the target, as written, of the assignment (`=`, annotated, augmented) whose value holds `node`, whether
    that value is `node` or an `and`/`or`/`not` of it: a flag stored, `flag = P`, `self.use_x = (P or Q) and
    other`); None outside an assignment's value (a test, a call's statement, a lambda's body)."""
    child, flag = node, True
    for ancestor in parsed.ancestors(node):
        if isinstance(ancestor, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            if ancestor.value is not child:
                return None
            target = ancestor.targets[0].target if isinstance(ancestor, cst.Assign) else ancestor.target
            return parsed.text(*parsed.span(target)), flag
        if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.SimpleStatementLine, cst.Lambda)):
            return None
        flag = flag and isinstance(ancestor, (cst.BooleanOperation, cst.UnaryOperation))
        child = ancestor
    return None


def value_detail(value: tuple[str, bool] | None, local: bool = False) -> dict[str, str]:
    """A gate's detail for where it is assigned (`assignment_of`): `assigns`, the target that selects it; `value`,
    what decides instead of the gate (as python_capability's gates say it, `polarity.use`): what uses the target."""
    if value is None or aliases(value[0], local):
        return {}
    return {"assigns": value[0], "value": f"what uses `{value[0]}` decides"}


def aliases(target: str, local: bool = False) -> bool:
    """Whether an assignment outside any function (not `local`) is to a name spelled like a predicate
    (`_is_sm100_supported = _is_cuda and is_sm100_supported()`, SGLang's module flags): a definition of one,
    read as the predicate it names (`python.predicates.reading`), not a value gate. A function's own
    `is_sm120 = major == 12 and minor == 0` (FlashInfer) is a value."""
    name = target.rpartition(".")[2]
    return not local and (PREDICATE_RE.match(name) is not None or name.lstrip("_") in NAMED_PREDICATES)


def value_assigned_to(parsed: PythonSource, node: cst.CSTNode, target: str) -> bool:
    """Whether `node` is (part of) the value an assignment to the dotted `target` is given
    (`backend = "fa4" if P else "triton"`)."""
    child = node
    for ancestor in parsed.ancestors(node):
        if isinstance(ancestor, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            return ancestor.value is child and _assigns(ancestor, target)
        if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.SimpleStatementLine)):
            return False
        child = ancestor
    return False


def _locate(parsed: PythonSource, gate: Gate) -> cst.BooleanOperation:
    for node in parsed.nodes(cst.BooleanOperation):
        if is_or(node) and parsed.outer_span(node) == (gate.start, gate.end):
            return node
    raise CannotWiden(
        f"line {gate.line}: {gate.text} is no longer at this place; find the gates again"
    )


def _plan(
    source: bytes,
    gate: Gate,
    targets: tuple[Arch, ...],
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    meanings: Mapping[str, Meaning] | None = None,
) -> Plan:
    parsed = parse(source, MENTIONS)
    chain = _locate(parsed, gate)
    predicates = _predicates(chain)
    if predicates is None:
        raise CannotWiden(
            f"line {gate.line}: {gate.text} has an operand that is not an arch predicate"
        )
    template, names = new_predicates(
        predicates, gate, targets, universe, scoped(meanings, gate.detail.get("class")), parsed.source
    )
    if template is None:
        return Plan([], [])
    predicates = [p for p in predicates if p.number is not None]
    edits = [_append(parsed, template, names)]
    if _tested_by(parsed, chain) is not None or assignment_of(parsed, chain) is not None:
        edits = wrapped(parsed.source, edits)
    return supporting(parsed, chain, predicates, template, names, edits, gate)


def _tested_by(parsed: PythonSource, chain: cst.CSTNode) -> cst.If | cst.While | None:
    """The `if`/`elif`/`while` whose test holds the chain (the line black would split when it grows too long)."""
    for ancestor in parsed.ancestors(chain):
        if isinstance(ancestor, (cst.If, cst.While)):
            start, end = parsed.outer_span(ancestor.test)
            inside = start <= parsed.outer_span(chain)[0] < end
            return ancestor if inside else None
        if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.Lambda)):
            return None
    return None


def _append(parsed: PythonSource, template: Predicate, names: list[str]) -> Edit:
    """` or <predicate>` after the last operand, spelled like it."""
    text = b"".join(b" or " + spelled(parsed, template, name) for name in names)
    at = parsed.outer_span(template.operand)[1]
    return Edit(at, at, text)


def admits(
    text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS, meanings: Mapping[str, Meaning] | None = None
) -> ArchSet:
    """The archs an `or` chain of predicates, given as text, admits."""
    if meanings is None:

        def majors(node: cst.BaseExpression) -> set[int] | None:
            predicates = _predicates(node) if is_or(node) else None
            return None if predicates is None else set().union(*(p.majors for p in predicates))

        return admits_of_expression(text, universe, majors)
    try:
        node = parse_gate_expression(text)
    except cst.ParserSyntaxError:
        node = None
    predicates = _predicates(node) if is_or(node) else None
    if predicates is None:
        return ArchSet(universe, frozenset(), frozenset(universe))
    return admits_of(predicates, universe, meanings)[0]
