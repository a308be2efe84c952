"""Comparisons of the device's compute capability in Python: read by `scan` and widened by recipes.

    if torch.cuda.get_device_capability()[0] >= 9:        # a bound
    if get_device_sm() == 120:                            # sm = major * 10 + minor
    if torch.cuda.get_device_capability()[0] != 9:        # negated: a check for 9
    major, minor = torch.cuda.get_device_capability()
    elif major == 10 and minor != 3:                      # one condition: sm_100, not sm_103
    major, minor = get_compute_capability(q.device)       # FlashInfer's helper: the same pair

What a comparison admits is decided per arch from its (major, minor): the
major (`[0]`, a name bound from it), the minor (`[1]`), the pair (`>= (9,
0)`) or SGLang's `get_device_sm()` (`major * 10 + minor`). Only comparisons
with integer literals (or tuples of them) are read; one with a computed
value (`== SM_VERSION`) is unknown. `scan` lists each comparison with where
it is true (`minor != 3` admits every minor but 3).

A recipe's gate is a whole condition: the comparisons joined by `and`,
`or` and `not` (in an `and`/`or` that also tests other things, its
comparisons together: `major == 12 and w.ok and minor == 0`). It admits
exactly the archs on which it holds, so `major == 10 and minor != 3` does
not admit sm_103; one unknown comparison makes it unknown (refused). A lone
negated comparison (`!=`, `not in`) is read as a check *for* its values
(`if cap != 9: raise`, `if cap != 9: fallback()`): it admits the archs its
values name, and widening adds the targets to those values; so is an `and`
of nothing but negated comparisons (`major != 9 and major != 10`), which
gains one more in its own style (`and major != 12`). Any other condition
deciding an `if` whose body leaves (`raise`, `return False`, a skip, or
records the device in a flag or list a later `if` raises on) or a
`skipif` admits where it fails, what the code after it admits (`if sm < 90:
return False` admits 90 and up): widening narrows it (a bound moved past the
targets, the `or` operands that hold on one dropped), never makes it hold on
a target (`polarity.need`).

`widen` tries, in order, and keeps the first rewrite that, read again,
admits exactly the old archs plus the targets (and what the condition
cannot tell from them: `major == 12` admits sm_121 with sm_120):
in an `or`, move the excluded upper bound of a range the targets adjoin
(`sm == 90 or (sm >= 100 and sm < 110)` gains sm_110 as `sm < 120`; alone, a
range does so after the drop below);
add the values to an equality or membership in its own style (`== 120`
becomes `in (120, 121)`, or `in [120, 121]` in a file whose one-line
membership tests list constants in brackets more often than in parentheses,
or, with none, for numbers in a project whose `[style] number_membership`
is "list": see
`python.capability.membership.membership_brackets`; `!= 9` alone becomes `not in (9, 12)`; `in (9, 10)` gains `, 12`);
drop the comparisons of an `and` that rule a target out (`major == 10 and
minor != 3` becomes `major == 10`); move a bound (`[0] >= 10` becomes `>= 9`
only where no arch lies between); keep a bound and add an equality (`major <
10` becomes `major < 10 or major == 12`, in parentheses inside an `and`).
Where the targets are part of a major the condition reads alone and a
recipe declares both `target.major` and `target.minor` (`names`), the pair
is added first (`target.major != 10 and (target.major, target.minor) != (12,
0)`), so that exactly the targets are admitted. CuTe DSL `Arch` members are
written only as ranges of one arch (`arch >= Arch.sm_103 and arch <=
Arch.sm_103f`), one more per target, joined by `or`.
Anything else is refused (`CannotWiden`, naming the line and the reason).

A capability is also read where real code holds it otherwise
(`python.capability.values`): an arch named by a string (`if sm_version !=
"sm_120": raise` becomes `not in ("sm_120", "sm_121")`), a platform's
capability object (`capability.to_int() != 90`, `capability.major`), and
names a recipe declares with `names` (`{"backend" = "sm"}`: `backend in
("100", "110")` gains `"107"` in its place). New values are spelled like
those there and go in their place where those are in ascending order.
`scan` reads a comparison deciding an `if` that raises or skips by what
runs after it (`if sm_version != "sm_120": raise` admits sm_120 only).

Selectors pick the condition: `function` (the function around it),
`assigns` (it is in the value assigned to that dotted target, or the body of
the `if` it is in assigns that target),
`calls` (that body calls that function, or any of a list) and `names`. A change's
`admits` picks one branch of an `if`/`elif` by what it admits.
"""


from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates import Gate
from codemods.gates.python import polarity
from codemods.gates.python.capability.blocks import (
    CAPABILITY_RE, CAPABILITY_TOKEN, HELPERS, TOKENS, callee, has_pair_token, may_compare, may_hold, nodes_in,
)  # fmt: skip
from codemods.gates.python.capability.finding import _conditions, _parents, _parse, gates
from codemods.gates.python.capability.pieces import blocks
from codemods.gates.python.capability.reading import (
    _DECLARED, _SIDES, KIND, LeafOf, Side, _leaves, _reading, _unreadable, admits,
)  # fmt: skip
from codemods.gates.python.capability.values import NAME_RE, QUOTED_ARCH_TOKENS, names_arch
from codemods.gates.python.capability.widen import widen
from codemods.gates.python.ast_text import PythonText, dotted

# The kind's hooks (registry), and what `codemod scan` reads through this module (audit.python_files, audit.prefilter).
# Made of: capability/blocks (where a comparison can be, from the bytes), capability/reading (what each one reads,
# where a condition holds), capability/finding (every one in a file), capability/widen (the rewrites), capability/values (values spelled as strings).
__all__ = [
    "CAPABILITY_RE", "CAPABILITY_TOKEN", "HELPERS", "KIND", "PythonText", "admits", "blocks", "check_selector", "find",
    "gates", "has_pair_token", "may_compare", "may_hold", "names_arch", "nodes_in", "widen", "TOKENS", "QUOTED_ARCH_TOKENS",
]  # fmt: skip


def check_selector(name: str, value) -> str:
    """The same selectors as python_arch_test (function, assigns, calls), checked the same way; `names` a table
    of name = sm | major | minor | cuda_arch (cpp_runtime_check's meanings) | pair (the `(major, minor)` tuple:
    `compute_capability: tuple[int, int]`, a parameter holding the device's capability)."""
    from codemods.gates.python import python_arch_test

    if name == "names":
        from codemods.gates.cpp import cpp_runtime_check

        wrong = cpp_runtime_check.check_selector(name, value, (*cpp_runtime_check.MEANINGS, "pair"), fixed=False)
        if wrong:
            return wrong
        for spelled in value:
            if not NAME_RE.fullmatch(spelled):
                return f"names: {spelled!r} is not a name as Python code writes it (`x`, `self.backend`, `cap.to_int()`)"
        return ""
    return python_arch_test.check_selector(name, value)


def _body_assigns(statements: list[ast.stmt], target: str) -> bool:
    for stmt in statements:
        for node in ast.walk(stmt):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                for leaf in ast.walk(t):
                    if dotted(leaf) == target:
                        return True
    return False


def _body_calls(statements: list[ast.stmt], wanted: set[str]) -> bool:
    for stmt in statements:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and ({callee(node), dotted(node.func)} & wanted):
                return True
    return False


def _pair(text: PythonText, leaves: list, declared: Mapping[str, Side]) -> tuple[str, dict[str, str]] | None:
    """The (major, minor) pair as code can write it beside a condition over the major alone, and the names that
    reading it needs: `(target.major, target.minor)` where a recipe declares both halves (`names`); None for any
    other operand. Only there: upstream widens a major it reads alone by its majors (`[0] not in (9, 12)`)."""
    operands = {text.data[slice(*text.span(leaf.operand))].decode("utf-8") for leaf in leaves}
    if len(operands) != 1 or any(leaf.side != 0 for leaf in leaves):
        return None
    operand = leaves[0].operand
    if isinstance(operand, ast.Attribute) and operand.attr == "major":
        base = text.data[slice(*text.span(operand.value))].decode("utf-8")
        if declared.get(f"{base}.major") == 0 and declared.get(f"{base}.minor") == 1:
            return f"({base}.major, {base}.minor)", {f"{base}.minor": "minor"}
    return None


def _condition_gate(
    text: PythonText, root: ast.expr, leaf_of: LeafOf, universe, context: str, declared: Mapping[str, Side],
    parents: dict[int, ast.AST],
) -> Gate:
    leaves = _leaves(root, leaf_of)
    names = {name: _SIDES[side] for leaf in leaves for name, side in leaf.names}
    detail: dict[str, Any] = {"names": names}
    test, runs = polarity.need(root, parents)
    up, negations = root, 0
    while up is not test and id(up) in parents:  # `if not (cuda and cap >= 10): return None` runs where it holds
        up = parents[id(up)]  # type: ignore[assignment]
        negations += isinstance(up, ast.UnaryOp) and isinstance(up.op, ast.Not)
    # `if sm < 90: return False` (or a skipif): the code after runs where the condition fails; under a `not` there,
    # where it holds. A body that does not leave keeps the condition's own reading (the body is the path).
    exits = not runs and negations % 2 == 0
    if exits:
        detail["runs_where"] = "false"
    pair = _pair(text, leaves, declared)
    if pair is not None:  # what widen writes to admit one (major, minor) of a major it cannot admit whole
        detail["pair"] = pair[0]
        names.update(pair[1])
    admits = _reading(root, leaf_of, universe, exits)
    if any(leaf.computed for leaf in leaves):
        detail["unknown"] = next(_unreadable(leaf) for leaf in leaves if leaf.computed)
    elif admits.unknown:
        detail["unknown"] = "a major compared with a pair"
    start, end = text.span(root)
    return Gate(
        kind=KIND, start=start, end=end, line=root.lineno, text=text.data[start:end].decode("utf-8"),
        admits=admits, context=context, detail=detail,
    )  # fmt: skip


def _qualified(function: ast.AST, parents: dict[int, ast.AST]) -> str:
    """`Class.method` for a method (FlashInfer 0.7.2's three `supported` classmethods, one per config class)."""
    owner = parents.get(id(function))
    if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and isinstance(owner, ast.ClassDef):
        return f"{owner.name}.{function.name}"
    return ""


def find(
    source: bytes,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    *,
    function: str | None = None,
    assigns: str | None = None,
    calls: str | list[str] | None = None,
    names: Mapping[str, str] | None = None,
) -> list[Gate]:
    """Every condition over the capability the selectors pick, computed ones included (unknown: refused by `widen`).

    `function` is the function around the comparison, or `Class.method` for one method of several alike.
    `names` declares what other names hold (`{"_device_sm": "sm", "backend": "sm"}`, as cpp_runtime_check's):
    their comparisons are read too, with ints or strings (`backend in ("100", "110")`) as values.
    """
    text, tree = _parse(source)
    wanted = {calls} if isinstance(calls, str) else set(calls or [])
    parents = _parents(tree)
    declared = {spelled: _DECLARED[meaning] for spelled, meaning in (names or {}).items()}
    roots, leaf_of = _conditions(text, tree, universe, parents, declared)
    out = []
    for root in roots:
        up: ast.AST
        around, statement, assigned, up = "", None, False, root
        while id(up) in parents:
            child, up = up, parents[id(up)]
            if statement is None and isinstance(up, (ast.If, ast.While)) and up.test is child:
                statement = up
            if assigns is not None and isinstance(up, (ast.Assign, ast.AnnAssign)) and up.value is child:
                targets = up.targets if isinstance(up, ast.Assign) else [up.target]
                assigned = assigned or any(dotted(t) == assigns for t in targets)
            if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)):
                around = up.name
                break
        if function is not None and function not in (around, _qualified(up, parents)):
            continue
        if assigns is not None and not (assigned or statement is not None and _body_assigns(statement.body, assigns)):
            continue
        if wanted and not (statement is not None and _body_calls(statement.body, wanted)):
            continue
        out.append(_condition_gate(text, root, leaf_of, universe, around, declared, parents))
    return out
