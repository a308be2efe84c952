"""What a C++ capability condition says: the comparisons cpp_runtime_check reads, and the conditions it finds them in.

A condition is read with tree-sitter's C++ grammar: each comparison of a
variable whose meaning is known (`sm`, `major`, `minor`, `cuda_arch`: from
COMMON_NAMES or the recipe's `names`) with an integer literal is an atom;
`&&`, `||` and `!` over atoms evaluate for each arch (None where a part
cannot be read). `conditions` finds, in a function body, every condition
(`if`, `while`, `?:`, `return`, a check macro's argument) that holds one.

Pure: tree-sitter nodes in, verdicts out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter

from codemods.core.arch import Arch
from codemods.cpp import syntax
from codemods.cpp.expression import COMPARISONS, integer

MEANINGS = ("sm", "major", "minor", "cuda_arch")
# A fixed arch as a meaning (`"sm_100"`): the variable holds that arch's sm number whatever the device is (a config
# built for SM100), so a check comparing it with the device's capability says which devices may run it.
FIXED = re.compile(r"^sm_(?P<code>\d{2,3})$")
# Last names (after `.` or `->`, or a call's name with `()`) whose meaning is recognised without a declaration.
COMMON_NAMES = {
    "sm_version": "sm", "smVersion": "sm", "sm": "sm", "mSM": "sm", "getSMVersion()": "sm", "get_sm_version()": "sm",
    "major": "major", "cc_major": "major", "sm_major": "major",
    "minor": "minor", "cc_minor": "minor", "sm_minor": "minor",
}  # fmt: skip
_COMPARISONS = {"==", "!=", "<", "<=", ">", ">=", "not_eq"}
_LOGICAL = {"&&": "&&", "and": "&&", "||": "||", "or": "||"}
_CONDITION_MACRO = re.compile(r"^(?:[A-Z][A-Z0-9_]*_)?I?CHECK$|^assert$")
COMPARISON_MACRO = re.compile(r"^(?P<base>(?:[A-Z][A-Z0-9_]*_)?I?CHECK)_(?P<op>EQ|NE|GE|GT|LE|LT)$")
_MACRO_OPS = {"EQ": "==", "NE": "!=", "GE": ">=", "GT": ">", "LE": "<=", "LT": "<"}
_VARIABLE_TYPES = {"identifier", "field_expression", "qualified_identifier", "call_expression"}



def _spelled(node: tree_sitter.Node) -> str:
    return "".join((node.text or b"").decode("utf-8", "replace").split())


@dataclass(frozen=True)
class Atom:
    """`variable op number` (either side first), with what the variable means (None: not known)."""

    variable: str
    meaning: str | None
    op: str  # as if the variable were on the left
    number: int
    variable_node: tree_sitter.Node
    number_node: tree_sitter.Node


_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _literal(node: tree_sitter.Node) -> int | None:
    value = integer((node.text or b"").decode()) if node.type == "number_literal" else None
    return None if value is None else value[0]


def _meaning(variable: str, names: dict[str, str]) -> str | None:
    if variable in names:
        return names[variable]
    last = re.split(r"\.|->|::", variable)[-1]
    return COMMON_NAMES.get(last)


def read_atom(node: tree_sitter.Node, names: dict[str, str]) -> Atom | None:
    """The comparison `node` is, when one side is a variable and the other an integer literal."""
    if node.type != "binary_expression":
        return None
    op = node.child_by_field_name("operator")
    op_text = (op.text or b"").decode() if op is not None else ""
    op_text = "!=" if op_text == "not_eq" else op_text
    if op_text not in _FLIPPED:
        return None
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if left is None or right is None:
        return None
    for variable, number, flipped in ((left, right, False), (right, left, True)):
        value = _literal(number)
        if value is not None and variable.type in _VARIABLE_TYPES:
            text = _spelled(variable)
            return Atom(text, _meaning(text, names), _FLIPPED[op_text] if flipped else op_text, value, variable, number)
    return None


def value_of(meaning: str, arch: Arch) -> int:
    fixed = FIXED.match(meaning)
    if fixed:
        return int(fixed.group("code"))
    return {"sm": arch.code, "major": arch.major, "minor": arch.minor, "cuda_arch": arch.cuda_arch}[meaning]


_ARITHMETIC = {"/": lambda a, b: a // b if b else None, "*": lambda a, b: a * b, "%": lambda a, b: a % b if b else None,
               "+": lambda a, b: a + b, "-": lambda a, b: a - b}


def has_fixed(names: dict[str, str]) -> bool:
    """Whether the recipe names a variable as a fixed arch (`"sm_100"`): only then are comparisons of two
    capability expressions read (`cfg / 10 == sm_ / 10`)."""
    return any(FIXED.match(meaning) for meaning in names.values())


def side_value(node: tree_sitter.Node, arch: Arch, names: dict[str, str]) -> int | None:
    """An integer expression's value on `arch`: literals, named variables, and `/ * % + -` of them (C++'s
    integer division; capabilities are not negative); None when a part is neither."""
    node = syntax.unparenthesized(node)
    literal = _literal(node)
    if literal is not None:
        return literal
    if node.type in _VARIABLE_TYPES:
        meaning = _meaning(_spelled(node), names)
        return None if meaning is None else value_of(meaning, arch)
    if node.type != "binary_expression":
        return None
    op = node.child_by_field_name("operator")
    apply = _ARITHMETIC.get((op.text or b"").decode() if op is not None else "")
    if apply is None:
        return None
    left = side_value(syntax.field(node, "left"), arch, names)
    right = side_value(syntax.field(node, "right"), arch, names)
    return None if left is None or right is None else apply(left, right)


def relation(node: tree_sitter.Node, names: dict[str, str]) -> tuple[tree_sitter.Node, tree_sitter.Node] | None:
    """(left, right) of a comparison of two integer expressions of named variables and literals (`cfg / 10 == sm_ /
    10`, `sm_ / 10 == 11`), read only when the recipe names a fixed-arch variable; None otherwise."""
    if not has_fixed(names) or node.type != "binary_expression":
        return None
    op = node.child_by_field_name("operator")
    if op is None or (op.text or b"").decode() not in _FLIPPED:
        return None
    left, right = syntax.field(node, "left"), syntax.field(node, "right")
    probe = Arch(9, 0)
    if side_value(left, probe, names) is None or side_value(right, probe, names) is None:
        return None
    return (left, right) if _literal(syntax.unparenthesized(left)) is None or _literal(syntax.unparenthesized(right)) is None else None


def reads_fixed(node: tree_sitter.Node, names: dict[str, str]) -> bool:
    """Whether `node` reads a variable named as a fixed arch."""
    return any(FIXED.match(meaning) for meaning in relation_variables(node, names).values())


def relation_variables(node: tree_sitter.Node, names: dict[str, str]) -> dict[str, str]:
    """The named variables a relation reads, with their meanings."""
    out, stack = {}, [node]
    while stack:
        current = stack.pop()
        if current.type in _VARIABLE_TYPES:
            meaning = _meaning(_spelled(current), names)
            if meaning is not None:
                out[_spelled(current)] = meaning
                continue
        stack.extend(current.children)
    return out


def logical_op(node: tree_sitter.Node) -> str | None:
    if node.type != "binary_expression":
        return None
    op = node.child_by_field_name("operator")
    return _LOGICAL.get((op.text or b"").decode()) if op is not None else None


def is_not(node: tree_sitter.Node) -> bool:
    op = node.child_by_field_name("operator") if node.type == "unary_expression" else None
    return op is not None and (op.text or b"") in (b"!", b"not")


def evaluate_node(node: tree_sitter.Node, arch: Arch, names: dict[str, str]) -> bool | None:
    """True, False, or None (unknown) for a pure condition on `arch`."""
    node = syntax.unparenthesized(node)
    logical = logical_op(node)
    if logical is not None:
        left = evaluate_node(syntax.field(node, "left"), arch, names)
        right = evaluate_node(syntax.field(node, "right"), arch, names)
        settles = logical == "||"
        if left is settles or right is settles:
            return settles
        return None if left is None or right is None else not settles
    if is_not(node):
        inner = evaluate_node(syntax.field(node, "argument"), arch, names)
        return None if inner is None else not inner
    if node.type == "call_expression":
        macro = macro_name(node)
        if macro is not None:
            return _evaluate_macro(node, macro, arch, names)
    if relation(node, names) is not None:
        op = syntax.field(node, "operator").text or b""
        sides = [side_value(syntax.field(node, side), arch, names) for side in ("left", "right")]
        if sides[0] is None or sides[1] is None:
            return None
        return COMPARISONS[op.decode().replace("not_eq", "!=")](sides[0], sides[1])
    atom = read_atom(node, names)
    if atom is None or atom.meaning is None:
        return None
    return COMPARISONS[atom.op](value_of(atom.meaning, arch), atom.number)


def macro_name(node: tree_sitter.Node) -> str | None:
    function = node.child_by_field_name("function")
    return (function.text or b"").decode() if function is not None and function.type == "identifier" else None


def _arguments(node: tree_sitter.Node) -> list[tree_sitter.Node]:
    arguments = node.child_by_field_name("arguments")
    return list(arguments.named_children) if arguments is not None else []


def _evaluate_macro(node: tree_sitter.Node, macro: str, arch: Arch, names: dict[str, str]) -> bool | None:
    args = _arguments(node)
    if _CONDITION_MACRO.match(macro) and args:
        return evaluate_node(args[0], arch, names)
    match = COMPARISON_MACRO.match(macro)
    if match and len(args) == 2:
        atom = macro_atom(node, names)
        if atom is not None and atom.meaning is not None:
            return COMPARISONS[atom.op](value_of(atom.meaning, arch), atom.number)
    return None


def macro_atom(node: tree_sitter.Node, names: dict[str, str]) -> Atom | None:
    match = COMPARISON_MACRO.match(macro_name(node) or "")
    args = _arguments(node)
    if match is None or len(args) != 2:
        return None
    op = _MACRO_OPS[match.group("op")]
    for variable, number, flipped in ((args[0], args[1], False), (args[1], args[0], True)):
        value = _literal(number)
        if value is not None and variable.type in _VARIABLE_TYPES:
            text = _spelled(variable)
            return Atom(text, _meaning(text, names), _FLIPPED[op] if flipped else op, value, variable, number)
    return None


def _pure(node: tree_sitter.Node, names: dict[str, str], selected) -> bool | None:
    """Whether `node` is made only of capability comparisons; None when it holds none at all."""
    node = syntax.unparenthesized(node)
    logical = logical_op(node)
    if logical is not None:
        left = _pure(syntax.field(node, "left"), names, selected)
        right = _pure(syntax.field(node, "right"), names, selected)
        return bool(left and right)
    if is_not(node):
        return _pure(syntax.field(node, "argument"), names, selected)
    if relation(node, names) is not None:
        return True
    atom = read_atom(node, names)
    return atom is not None and selected(atom)


def _chain(node: tree_sitter.Node, logical: str) -> list[tree_sitter.Node]:
    """The operands of `a || b || c` (tree-sitter's `(a || b) || c`), left to right; a parenthesized one is one."""
    if logical_op(node) != logical:
        return [node]
    return [*_chain(syntax.field(node, "left"), logical), *_chain(syntax.field(node, "right"), logical)]


def range_bounds(node: tree_sitter.Node, names: dict[str, str]) -> list[Atom]:
    """The upper bounds (`<`, `<=`) of the ranges the condition or the operands of its `||` are: two bounds of one
    variable joined by `&&`, one lower and one upper (`sm == 90 || (sm >= 100 && sm < 110)`: `sm < 110`)."""
    bounds = []
    for operand in _chain(syntax.unparenthesized(node), "||"):
        inner = syntax.unparenthesized(operand)
        if logical_op(inner) != "&&":
            continue
        pair = [read_atom(syntax.unparenthesized(syntax.field(inner, side)), names) for side in ("left", "right")]
        two = [a for a in pair if a is not None and a.meaning is not None and a.op in ("<", "<=", ">", ">=")]
        uppers = [a for a in two if a.op in ("<", "<=")]
        if len(two) == 2 and len(uppers) == 1 and two[0].variable == two[1].variable:
            bounds.append(uppers[0])
    return bounds


def gates_in(node: tree_sitter.Node, names, selected, out: list) -> None:
    """The maximal pure parts of a condition: a node, or a tuple of them for a run of pure operands of one chain
    (`use_fast || sm == 90 || sm == 100` holds one gate, `sm == 90 || sm == 100`, not two)."""
    if _pure(node, names, selected):
        out.append(node)
        return
    inner = syntax.unparenthesized(node)
    logical = logical_op(inner)
    if logical is not None:
        run: list[tree_sitter.Node] = []
        for operand in [*_chain(inner, logical), None]:
            if operand is not None and _pure(operand, names, selected):
                run.append(operand)
                continue
            if run:
                out.append(run[0] if len(run) == 1 else tuple(run))
            run = []
            if operand is not None:
                gates_in(operand, names, selected, out)
    elif is_not(inner):
        gates_in(syntax.field(inner, "argument"), names, selected, out)


def unreadable(condition: tree_sitter.Node, names: dict[str, str], wanted: str | None) -> bool:
    """Whether a comparison in `condition` reads a capability variable but is no `variable op literal`."""
    stack = [condition]
    while stack:
        node = stack.pop()
        op = node.child_by_field_name("operator") if node.type == "binary_expression" else None
        if (op is not None and (op.text or b"").decode() in _FLIPPED | {"not_eq": "!="} and read_atom(node, names) is None
                and relation(node, names) is None):
            if _reads_capability(node, names, wanted):
                return True
        stack.extend(node.children)
    return False


def _reads_capability(node: tree_sitter.Node, names: dict[str, str], wanted: str | None) -> bool:
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in _VARIABLE_TYPES:
            text = _spelled(current)
            if text == wanted or (wanted is None and _meaning(text, names) is not None):
                return True
        stack.extend(current.children)
    return False


_HOLDERS = "[(if_statement) (while_statement) (conditional_expression) (call_expression) (return_statement)] @holder"


def conditions(body: tree_sitter.Node, macro: str | None, language: str) -> list[tuple[tree_sitter.Node, str]]:
    """(condition or comparison-macro call, what holds it) in a function body, in source order (outer first)."""
    found = []
    held = tree_sitter.QueryCursor(syntax.query(language, _HOLDERS)).captures(body).get("holder", [])
    for node in sorted(held, key=lambda node: (node.start_byte, -node.end_byte)):
        if node.type in ("if_statement", "while_statement") and macro is None:
            clause = node.child_by_field_name("condition")
            value = clause.child_by_field_name("value") if clause is not None else None
            if value is not None and value.type != "declaration":
                found.append((value, node.type.split("_")[0]))
        elif node.type == "return_statement" and macro is None:
            # a predicate written as one expression: `return (sm_ == 90 && hopper_ok()) || (sm_ == 120 && ...);`
            value = next((child for child in node.named_children if child.type != "comment"), None)
            if value is not None:
                found.append((value, "return"))
        elif node.type == "conditional_expression" and macro is None:
            condition = node.child_by_field_name("condition")
            if condition is not None:
                found.append((condition, "?:"))
        elif node.type == "call_expression":
            name = macro_name(node)
            if name is not None and (macro is None or name in (macro, _condition_macro_of(macro))):
                args = _arguments(node)
                if COMPARISON_MACRO.match(name) and len(args) == 2:
                    found.append((node, name))
                elif (_CONDITION_MACRO.match(name) or name == macro) and args:
                    # a macro the recipe names takes its condition first (`TLLM_CHECK_WITH_INFO(cond, "fmt", ...)`)
                    found.append((args[0], name))
    return found


def _condition_macro_of(macro: str) -> str | None:
    """The condition macro an equality macro is widened into (`_macro_chain`): `TVM_FFI_ICHECK_EQ` ->
    `TVM_FFI_ICHECK`."""
    match = COMPARISON_MACRO.match(macro)
    return match.group("base") if match and match.group("op") == "EQ" else None
