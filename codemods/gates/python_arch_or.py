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
`_predicates` from the project's source: FlashInfer's `is_sm120a_supported`
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
`if`/`elif`/`while` line the new predicate makes longer than the file's line
length is split as black splits it (`_wrap.wrapped`, python_arch_test's
split: `if (` / one predicate a line led by `or` / `):`). So that the
new predicate exists, it also

- copies the last module-level definition of a sibling name
  (`_is_sm100_supported = _is_cuda and is_sm100_supported()`) to a new line
  below it, with the number changed, when the new name is not defined yet;
- imports a new function (`is_sm120_supported`) in the `from ... import`
  that imports its sibling, right after the sibling with the next lower
  number (isort's order), on its own line when the import is written one
  name per line.

Attribute forms need no supporting edit. `missing_symbols` tells which
symbols the widened code takes from other modules, for the caller to check.
Nothing is guessed: a definition that spells out its major (`cap[0] == 10`)
or a function that is neither defined here nor imported like its sibling
raises `CannotWiden`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeGuard

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.core.lazy import LazyModule
from codemods.gates import CannotWiden, Edit, Gate
from codemods.gates._arch_predicate import PREDICATE_RE, Predicate, _number, admits_of, number_of, renamed
from codemods.gates._predicates import Meaning
from codemods.gates._imports import import_beside_siblings, insert_at
from codemods.gates._python import PythonSource, admits_of_expression, parse, parse_gate_expression
from codemods.gates._wrap import wrapped

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


@dataclass(frozen=True)
class Plan:
    """What widening one gate takes: its edits, and the symbols they take from other modules."""

    edits: list[Edit]
    symbols: list[str]


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
    an `if` whose body assigns that target directly.
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
        if assigns is not None and not _tests_if_assigning(parsed, node, assigns):
            continue
        start, end = parsed.outer_span(node)
        forms = {predicate.form for predicate in predicates}
        detail = {
            "form": forms.pop() if len(forms) == 1 else "mixed",
            "predicates": [predicate.ident.value for predicate in predicates],
        }
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


def new_predicates(
    predicates: list[Predicate],
    gate: Gate,
    targets: tuple[Arch, ...],
    universe: tuple[Arch, ...],
    meanings: Mapping[str, Meaning] | None,
    source: bytes = b"",
) -> tuple[Predicate | None, list[str]]:
    """The predicate to spell new ones like, and the names of those that make the gate admit `targets`.

    `(None, [])` when the gate admits them already. A new predicate is the last
    numbered one renamed (`is_sm100_supported` -> `is_sm120_supported`); in a
    test of named methods or attributes only (`cls.is_blackwell()`), it is the
    one method or attribute of the same object whose definition admits the
    target and nothing that was not asked (`cls.is_sm120()`). Raises
    CannotWiden when a predicate's meaning is unknown, or no such predicate
    admits a target without admitting more than was asked.
    """
    admits, unknown = admits_of(predicates, universe, meanings)
    if unknown:
        raise CannotWiden(
            f"line {gate.line}: what it admits is unknown ({'; '.join(unknown)}), so the gate is not widened"
        )
    missing = [a for a in targets if a not in admits.admitted]
    if not missing:
        return None, []
    numbered = [p for p in predicates if p.number is not None]
    if not numbered and not (meanings is not None and predicates[-1].form in ("attribute", "attribute_call")):
        raise CannotWiden(f"line {gate.line}: {gate.text} names no is_smNN predicate to spell a new one like")
    template = numbered[-1] if numbered else predicates[-1]
    if meanings is None:
        return template, [renamed(template.ident.value, n) for n in sorted({a.major * 10 for a in missing})]
    wanted = admits.admitted | set(targets)
    covered = set(admits.admitted)
    names: list[str] = []
    for arch in missing:
        if arch in covered:
            continue
        family = _family(template, arch, [a for a in missing if a.major == arch.major], universe, meanings, source)
        if family is not None:
            names.append(family)
            covered |= {a for a in missing if a.major == arch.major}
            continue
        tried = []
        for name in _candidates(template, arch, meanings):
            meaning = meanings.get(template.key(name))
            if meaning is None and template.form == "name" and name.startswith("_"):
                # `_is_sm120_supported` is to be defined by copying its sibling's definition,
                # which calls `is_sm120_supported()`: it admits what that admits
                meaning = meanings.get(name[1:])
            if meaning is None or not meaning.known or arch not in meaning.admitted(universe):
                tried.append(f"`{name}` " + ("is not defined" if meaning is None else "does not admit it" if meaning.known else f"is unknown ({meaning.reason})"))
                continue
            extra = meaning.admitted(universe) - wanted
            if extra:
                tried.append(f"`{name}` would also admit {', '.join(sorted(a.name for a in extra))}")
                continue
            names.append(name)
            covered |= meaning.admitted(universe)
            break
        else:
            if not tried:
                tried.append(f"no predicate of `{template.key()}`'s object is read")
            raise CannotWiden(f"line {gate.line}: no predicate admits {arch.name} here: " + "; ".join(tried))
    return template, names


def _family(
    template: Predicate, arch: Arch, group: list[Arch], universe: tuple[Arch, ...], meanings: Mapping[str, Meaning],
    source: bytes = b"",
) -> str | None:
    """The one predicate for a family when several targets of one major are missing and the code defines a
    predicate admitting exactly them (nothing admitted already, nothing not asked): FlashInfer 635505f75 wrote
    `or is_sm12x_supported(...)` for SM120 and SM121, not one predicate each; where sm_120 is admitted already,
    sm_121 keeps its own (`is_sm121a_supported`, 0f69698c7), and so does a file that already names each arch's
    own predicate (9f4fd04ac's prefill.py imports `is_sm120a_supported` and `is_sm121a_supported`)."""
    match = PREDICATE_RE.match(template.ident.value) if template.number is not None else None
    if match is None or len(group) < 2:
        return None
    own = [
        next((n for n in _candidates(template, a, meanings) if (m := meanings.get(template.key(n))) is not None
              and m.known and m.admitted(universe) == frozenset({a})), None)
        for a in group
    ]  # fmt: skip
    if all(name is not None and re.search(rb"\b%s\b" % re.escape(name.encode()), source) for name in own):
        return None
    rest = match["tail"].lstrip("afx")
    for name in (f"{match['head']}{arch.major}x{rest}", f"{match['head']}{arch.major * 10}f{rest}"):
        meaning = meanings.get(template.key(name))
        if meaning is not None and meaning.known and meaning.admitted(universe) == frozenset(group):
            return name
    return None


def _candidates(template: Predicate, arch: Arch, meanings: Mapping[str, Meaning]) -> list[str]:
    """The names a predicate admitting `arch` may have beside `template`: it renamed to the arch's number and
    its major's; for a named template (`cls.is_blackwell()`), the numbered predicates of the same object that
    `meanings` defines, those naming the arch's number or its major's first."""
    if template.number is not None:
        numbers = dict.fromkeys((arch.code, arch.major * 10))
        spelled = [renamed(template.ident.value, n) for n in numbers]
        # then the target's other build-target spellings the code defines: FlashInfer 0.7.0's aot.py has
        # `has_sm100f` but no `has_sm103f`; upstream wrote `if has_sm100f or has_sm103:` (meanings decide)
        match = PREDICATE_RE.match(template.ident.value)
        assert match is not None  # a numbered predicate
        rest = match["tail"].lstrip("afx")
        others = [f"{match['head']}{n}{letter}{rest}" for n in numbers for letter in ("", "a", "f")]
        return list(dict.fromkeys(spelled + others))
    prefix = template.key("")
    if prefix.endswith("()"):  # `.is_sm90()`: a method of an unknown class; nothing defines it
        return []
    found = [k[len(prefix):] for k in meanings if k.startswith(prefix) and PREDICATE_RE.match(k[len(prefix):])]
    return sorted(found, key=lambda name: (number_of(name) not in (arch.code, arch.major * 10), name))


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
    tested = _tested_by(parsed, chain)
    if tested is not None:
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


def supporting(
    parsed: PythonSource,
    chain: cst.CSTNode,
    predicates: list[Predicate],
    template: Predicate,
    names: list[str],
    edits: list[Edit],
    gate: Gate,
) -> Plan:
    """The gate's `edits` plus what the new predicates need: a copied definition, an import."""
    symbols: list[str] = []
    needed: list[tuple[str, list[str], cst.CSTNode]] = []  # (name to bind, its siblings, a node where it is used)
    if template.form == "name":
        undefined = [n for n in names if not parsed.bound(chain, n)]
        passed = _passed_in(parsed, chain, template, undefined) if undefined else None
        if passed is not None:
            edits += passed
        elif undefined:
            definition, uses, attributes = _define(parsed, predicates, template, [number_of(n) for n in undefined])
            edits.append(definition)
            symbols += attributes
            needed += [(new, [old], parsed.module) for new, old in uses]
    elif template.form == "call":
        siblings = [template.ident.value] + [
            p.ident.value for p in reversed(predicates) if p.form == "call" and p is not template
        ]
        needed += [(n, siblings, chain) for n in names]
    else:
        owner = template.operand
        if template.form == "attribute_call":
            assert isinstance(owner, cst.Call)  # predicate_of gives that form to a call only
            owner = owner.func
        start, end = parsed.span(owner)
        ident_start, ident_end = parsed.span(template.ident)
        for name in names:
            symbols.append(parsed.text(start, ident_start) + name + parsed.text(ident_end, end))
    import_edits, imported = import_beside_siblings(parsed, needed, _placed)
    edits += import_edits
    symbols += imported
    _check_disjoint(edits, gate)
    return Plan(sorted(edits), symbols)


def _passed_in(parsed: PythonSource, chain: cst.CSTNode, template: Predicate, new: list[str]) -> list[Edit] | None:
    """Edits that pass the new flags in as the template flag is, or None when it is not a parameter passed so.

    FlashInfer's aot.py hands its build flags down as parameters (`def gen_attention(..., has_sm90: bool,
    has_sm100: bool, add_gemma: bool)`, called from gen_all_modules with `has_sm90, has_sm100,`): a flag its
    function does not define is added as a parameter beside its numbered siblings, where its number sorts,
    spelled like the one before it (`has_sm103: bool,`), and passed at every call of the function in the file,
    beside the same sibling, as the caller's own flag of that name (FlashInfer 0.7.1). None, for the usual
    refusal, when the function is a method or a closure, takes the template otherwise than as a plain
    parameter, is not called in the file, or a call passes the sibling otherwise than by its own name, or its
    caller does not define the new flag.
    """
    function = next((a for a in parsed.ancestors(chain) if isinstance(a, (cst.FunctionDef, cst.ClassDef, cst.Lambda))), None)
    if not isinstance(function, cst.FunctionDef) or not parsed.at_module_level(function):
        return None
    params = list(function.params.params)
    names = [p.name.value for p in params]
    if template.ident.value not in names:
        return None
    calls = [
        node for node in parsed.nodes(cst.Call)
        if isinstance(node.func, cst.Name) and node.func.value == function.name.value
    ]  # fmt: skip
    if not calls or any(a.star for call in calls for a in call.args):
        return None  # not called in the file, or called with `*args`/`**kwargs`: which argument is which is not known
    at = names.index(template.ident.value)
    first, last = at, at  # the template's run of flag parameters: `has_sm90: bool, has_sm100: bool,`
    while first > 0 and PREDICATE_RE.match(names[first - 1]):
        first -= 1
    while last + 1 < len(names) and PREDICATE_RE.match(names[last + 1]):
        last += 1
    edits: list[Edit] = []
    for name in sorted(new, key=number_of):
        if name in names:
            return None  # a parameter already, yet not bound: not a shape this writes
        below = [i for i in range(first, last + 1) if number_of(names[i]) < number_of(name)]
        anchor = max(below) if below else at
        anchor_param = params[anchor]
        name_start, name_end = parsed.span(anchor_param.name)
        last_part = anchor_param.default or anchor_param.annotation  # `has_sm100: bool = False`
        end = parsed.span(last_part)[1] if last_part is not None else name_end
        copy = name + parsed.text(name_end, end)
        edits.append(_after(parsed, anchor_param, anchor_param.comma, copy))
        for call in calls:
            positional = [a for a in call.args if a.keyword is None]
            keyword = next((a for a in call.args if a.keyword is not None and a.keyword.value == names[anchor]), None)
            if keyword is not None and isinstance(keyword.value, cst.Name) and keyword.value.value == names[anchor]:
                arg, text = keyword, f"{name}={name}"
            elif anchor < len(positional) and isinstance(positional[anchor].value, cst.Name) and positional[anchor].value.value == names[anchor]:
                arg, text = positional[anchor], name
            else:
                return None
            if not parsed.bound(call, name):
                return None
            edits.append(_after(parsed, arg, arg.comma, text))
    return edits


def _after(parsed: PythonSource, item: cst.CSTNode, comma, text: str) -> Edit:
    """An edit putting `text` after a parameter or argument, laid out as it is: on a line of its own, or inline."""
    start, end = parsed.span(item)
    indent = parsed.indent(start)
    if indent is not None:  # one a line
        eol = parsed.eol(start)
        if isinstance(comma, cst.Comma):
            at = parsed.span(comma)[1]
            return Edit(at, at, eol + indent + text.encode() + b",")
        return Edit(end, end, b"," + eol + indent + text.encode())
    if isinstance(comma, cst.Comma):
        at = parsed.span(comma)[1]
        return Edit(at, at, b" " + text.encode() + b",")
    return Edit(end, end, b", " + text.encode())


def _append(parsed: PythonSource, template: Predicate, names: list[str]) -> Edit:
    """` or <predicate>` after the last operand, spelled like it."""
    text = b"".join(b" or " + spelled(parsed, template, name) for name in names)
    at = parsed.outer_span(template.operand)[1]
    return Edit(at, at, text)


def _define(
    parsed: PythonSource,
    predicates: list[Predicate],
    template: Predicate,
    numbers: list[int],
) -> tuple[Edit, list[tuple[str, str]], list[str]]:
    """A copy of the last module-level sibling definition per number, below it.

    Returns the edit, the (new, old) names the copies use besides the names
    they define, and the attributes they use (`get_platform().is_sm120`).
    """
    siblings = {p.ident.value: p for p in predicates if p.form == "name"}
    definitions = [
        node
        for node in parsed.nodes(cst.Assign)
        if len(node.targets) == 1
        and isinstance(node.targets[0].target, cst.Name)
        and node.targets[0].target.value in siblings
        and parsed.at_module_level(node)
    ]
    wanted = renamed(template.ident.value, numbers[0])
    if not definitions:
        raise CannotWiden(
            f"`{wanted}` is not defined, and there is no module-level "
            f"`{template.ident.value} = ...` to copy; define it by hand"
        )
    sibling = definitions[-1]
    target = sibling.targets[0].target
    number = siblings[target.value].number
    line = parsed.parent(sibling)
    start, end = parsed.span(sibling)
    indent = parsed.indent(start)
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1 or indent is None:
        raise CannotWiden(
            f"line {parsed.line(start)}: the definition of `{target.value}` shares its line"
        )
    renames = [
        name
        for name in parsed.nodes(cst.Name, within=sibling)
        if (match := PREDICATE_RE.match(name.value)) and _number(match) == number
    ]
    literals = {node.evaluated_value for node in parsed.nodes(cst.Integer, within=sibling.value)}
    # A named sibling (no number) renames nothing either: the same refusal.
    if number is None or len(renames) < 2 or literals & {number // 10, number, number * 10}:
        # Only a definition that names its arch through a predicate can be copied safely.
        raise CannotWiden(
            f"line {parsed.line(start)}: cannot derive `{wanted}` from "
            f"`{parsed.text(start, end)}`; define it by hand"
        )
    eol = parsed.eol(end)
    text = b""
    for new_number in numbers:
        copy, pos = [indent], start
        for name in renames:
            name_start, name_end = parsed.span(name)
            copy += [parsed.source[pos:name_start], renamed(name.value, new_number).encode()]
            pos = name_end
        copy += [parsed.source[pos:end], eol]
        text += b"".join(copy)
    at = parsed.line_end(end)
    if not parsed.source[:at].endswith(b"\n"):
        text = eol + text[: -len(eol)]
    # where the new number sorts among the definitions, in ascending order (SGLang 0.5.2 wrote
    # `_is_sm90_supported = ...` above `_is_sm100_supported = ...`), as the import's names are placed
    above = [d for d in definitions if (siblings[d.targets[0].target.value].number or 0) > max(numbers)]
    numbered = [siblings[d.targets[0].target.value].number or 0 for d in definitions]
    if above and numbered == sorted(numbered) and parsed.source[:at].endswith(b"\n"):
        first = above[0]
        first_line = parsed.parent(first)
        if isinstance(first_line, cst.SimpleStatementLine) and parsed.indent(parsed.span(first)[0]) == indent:
            at = parsed.line_start(parsed.span(first)[0])
    uses, attributes = [], []
    for new_number in numbers:
        for name in renames:
            parent = parsed.parent(name)
            if isinstance(parent, cst.Attribute) and parent.attr is name:
                owner_start = parsed.span(parent.value)[0]
                attributes.append(
                    parsed.text(owner_start, parsed.span(name)[0])
                    + renamed(name.value, new_number)
                )
            elif name is not target:
                uses.append((renamed(name.value, new_number), name.value))
    return Edit(at, at, text), uses, attributes


def _placed(
    node: cst.ImportFrom, added: list[cst.ImportAlias], names: list[tuple[str, str]]
) -> list[cst.ImportAlias]:
    """The import's names with each added alias among its siblings, by number.

    `is_sm120_supported` goes right after the highest-numbered sibling below
    it (`is_sm100_supported`), which is where isort's natural order puts it.
    """
    assert not isinstance(node.names, cst.ImportStar)  # importers() yields no `import *`
    aliases = list(node.names)
    by_name = {alias.evaluated_name: alias for alias in added}
    for new, old in names:
        if (
            new not in by_name
            or any(alias.evaluated_name == old and alias.asname is not None for alias in aliases)
            or old not in [alias.evaluated_name for alias in aliases]
        ):
            raise CannotWiden(f"`{old}` is imported under another name; import `{new}` by hand")
        number = number_of(new)
        siblings = [
            (i, number_of(alias.evaluated_name))
            for i, alias in enumerate(aliases)
            if renamed(alias.evaluated_name, number) == new
        ]
        if not siblings:  # `is_sm12x_supported` beside `is_sm100a_supported`: the numbered predicates, by number
            siblings = [(i, number_of(alias.evaluated_name)) for i, alias in enumerate(aliases)
                        if number_of(alias.evaluated_name) >= 0 and not alias.evaluated_name.startswith("has_")]
        below = [i for i, n in siblings if n < number]
        above = [i for i, n in siblings if n > number]
        index = below[-1] + 1 if below else min(above) if above else len(aliases)
        while below and index < len(aliases) and 0 <= number_of(aliases[index].evaluated_name) < number:
            index += 1  # past the sibling's own family (`is_sm100f_supported` after `is_sm100a_supported`)
        aliases = insert_at(node, aliases, index, by_name[new])
    return aliases


def spelled(parsed: PythonSource, template: Predicate, name: str) -> bytes:
    """`template`'s operand with its predicate named `name` (`cls.is_blackwell()` -> `cls.is_sm120()`)."""
    start, end = parsed.span(template.operand)
    ident_start, ident_end = parsed.span(template.ident)
    return parsed.source[start:ident_start] + name.encode() + parsed.source[ident_end:end]


def _check_disjoint(edits: list[Edit], gate: Gate) -> None:
    end = -1
    for edit in sorted(edits):
        if edit.start < end:
            raise CannotWiden(
                f"line {gate.line}: the supporting edits for {gate.text} overlap; widen it by hand"
            )
        end = edit.end


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
