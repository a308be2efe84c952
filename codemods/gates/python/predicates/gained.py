"""The new predicates a widened chain or test gains: which ones, and the edits that make them exist.

`new_predicates` names the predicates that make a gate admit its targets,
spelled like one it names (`is_sm100_supported` -> `is_sm120_supported`, or a
family's `is_sm12x_supported`); with `meanings`, each admits its target and
nothing not asked for. `spelled` writes one as its template is written.
`supporting` adds what the new names need: a copy of a sibling's module-level
definition (`_define`), the flag passed in as a parameter (`_passed_in`), or
an import beside its sibling (`_placed`). Shared by python_arch_or and
python_arch_test; python_arch_or's docstring says what is written and what is
refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from collections.abc import Mapping
from typing import TYPE_CHECKING

from codemods.core.arch import Arch
from codemods.core.lazy import LazyModule
from codemods.gates import CannotWiden, Edit, Gate
from codemods.gates.python.predicates.named import PREDICATE_RE, Predicate, _number, admits_of, number_of, renamed
from codemods.gates.python.predicates.reading import Meaning
from codemods.gates.python.imports import import_beside_siblings, insert_at
from codemods.gates.python.cst_source import PythonSource

if TYPE_CHECKING:
    import libcst as cst
else:  # imported on first use: `codemod list` needs no libcst
    cst = LazyModule("libcst")


@dataclass(frozen=True)
class Plan:
    """What widening one gate takes: its edits, and the symbols they take from other modules."""

    edits: list[Edit]
    symbols: list[str]
    notes: list[str] = field(default_factory=list)  # what widening had to guess (python_arch_test's negation style)


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
