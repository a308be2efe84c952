"""python_arch_test's `calls` selector: whether a tested body calls what a recipe names, and which of its
statements are no part of that feature (a body that runs any is not widened: "needs a human").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from codemods.core.lazy import LazyModule
from codemods.gates.python.cst_source import PythonSource

if TYPE_CHECKING:
    import libcst as cst
    from libcst import helpers as cst_helpers
else:  # imported on first use: `codemod list` needs no libcst
    cst = LazyModule("libcst")
    cst_helpers = LazyModule("libcst.helpers")


def _called(node: cst.CSTNode) -> set[str]:
    names = set()
    for call in _walk(node, cst.Call):
        func = call.func
        if isinstance(func, cst.Name):
            names.add(func.value)
        elif isinstance(func, cst.Attribute):
            names.add(func.attr.value)
            full = cst_helpers.get_full_name_for_node(func)
            if full:
                names.add(full)
    return names


def _walk(node: cst.CSTNode, kind: type | tuple[type, ...]) -> list:
    found: list = []

    class _Visitor(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, kind):
                found.append(n)
            return True

    node.visit(_Visitor())
    return found


def _statements(body: cst.BaseSuite) -> list[cst.CSTNode]:
    return list(body.body)


def _calls(body: cst.BaseSuite, wanted: list[str]) -> bool:
    return bool(_called(body) & set(wanted))


def _other_statements(parsed: PythonSource, body: cst.BaseSuite, wanted: list[str]) -> list[str]:
    """`line N (`text`)` for each statement of the body that is not part of the feature `wanted` names.

    The feature is the statements calling one of `wanted`, plus, to a fixpoint,
    each statement that only serves them: one whose every bound name (import
    or assignment target) the feature reads and no other statement of the body
    does (`from flashinfer import f`, `x_2d = x.reshape(...)` before `f(x_2d)`),
    and one that binds nothing, reads a name the feature binds and calls no
    free function outside `wanted` (`return out.reshape(b, m, -1)` after
    `out = f(...)`). Both conditions only grow with the feature, so the
    fixpoint does not depend on the order statements are looked at.
    """
    statements = _statements(body)
    names = set(wanted)
    binds = [_binding_names(s)[1] for s in statements]
    reads = [_read_names(s) for s in statements]
    free = [_free_calls(s) for s in statements]
    feature = {i for i, s in enumerate(statements) if _called(s) & names}
    grown = True
    while grown:
        grown = False
        for i in range(len(statements)):
            if i in feature:
                continue
            read_by_feature = set().union(*(reads[j] for j in feature))
            read_by_others = set().union(*(reads[j] for j in range(len(statements)) if j != i and j not in feature))
            bound_by_feature = set().union(*(binds[j] for j in feature))
            backward = bool(binds[i]) and binds[i] <= read_by_feature and not binds[i] & read_by_others
            forward = not binds[i] and bool(reads[i] & bound_by_feature) and free[i] <= names
            if backward or forward:
                feature.add(i)
                grown = True
    out = []
    for i, statement in enumerate(statements):
        if i in feature:
            continue
        start, end = parsed.span(statement)
        text = parsed.text(start, end).strip().splitlines()[0]
        out.append(f"line {parsed.line(start)} (`{text}`)")
    return out


def _target_names(target: cst.BaseExpression) -> list[cst.Name]:
    """The names an assignment target binds: `x`, each of `x, (y, *z)`; none for `x.a` or `x[i]`."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for element in target.elements for n in _target_names(element.value)]
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []


def _binding_names(statement: cst.CSTNode) -> tuple[list[cst.Name], set[str]]:
    """The Name nodes a statement binds without reading them, and the names it binds (imports included)."""
    targets: list[cst.Name] = []
    for assign in _walk(statement, cst.Assign):
        targets += [n for t in assign.targets for n in _target_names(t.target)]
    for node in _walk(statement, (cst.AnnAssign, cst.For, cst.NamedExpr)):
        targets += _target_names(node.target)
    for item in _walk(statement, cst.WithItem):
        if item.asname is not None:
            targets += _target_names(item.asname.name)
    for node in _walk(statement, (cst.FunctionDef, cst.ClassDef)):
        targets.append(node.name)
    names = {n.value for n in targets}
    names |= {n.value for n in _walk(statement, cst.AugAssign) for n in _target_names(n.target)}
    for alias in _walk(statement, cst.ImportAlias):
        if alias.asname is not None:
            names |= {n.value for n in _target_names(alias.asname.name)}
        else:
            names.add(alias.evaluated_name.split(".")[0])
    return targets, names


def _read_names(statement: cst.CSTNode) -> set[str]:
    """The names a statement reads: every name but attribute and keyword names, imported names and the
    targets it only assigns."""
    skipped = {id(n) for n in _binding_names(statement)[0]}
    skipped |= {id(a.attr) for a in _walk(statement, cst.Attribute)}
    skipped |= {id(a.keyword) for a in _walk(statement, cst.Arg) if a.keyword is not None}
    for node in _walk(statement, (cst.Import, cst.ImportFrom)):
        skipped |= {id(n) for n in _walk(node, cst.Name)}
    return {n.value for n in _walk(statement, cst.Name) if id(n) not in skipped}


def _free_calls(statement: cst.CSTNode) -> set[str]:
    """The free functions a statement calls (`f(x)`, not the method `x.f()`)."""
    return {c.func.value for c in _walk(statement, cst.Call) if isinstance(c.func, cst.Name)}
