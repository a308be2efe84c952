"""Which nodes of a module python_arch_list's `_find` examines, and what its walk from the root would carry to each,
read from the tree's one shared walk (tree_index) instead of a walk of its own over every node.

`_find` took an argument or a literal from a few of a module's nodes, and
walked all of them to carry each one's place (the def or class around it,
whether it is in an f-string, the targets it is assigned to): on FlashInfer
0.7.4 that walk was 1.4 million calls. `candidates` picks the nodes it can
take something from, `where` and `assigned` give their place by their
parents, and `TreeIndex.depth_first` puts them in the walk's order (the
first of two calls naming one list makes the gate).
"""

from __future__ import annotations

import ast
from typing import Protocol

from codemods.gates.python import tree_index
from codemods.gates.python.ast_text import called, dotted


class Shape(Protocol):
    """python_arch_list's `_Shape`: which arguments of which calls it selects."""

    @property
    def call(self) -> str | None: ...

    @property
    def position(self) -> int | None: ...

    def matches(self, callee: str | None, keyword: str | None, index: int | None) -> bool: ...


def by_position(shapes: tuple[Shape, ...], callee: str | None) -> bool:
    """Whether a call of `callee` may have a positional argument some shape selects: the call's own shapes, or a
    shape by position of any call."""
    return any(shape.call == callee or shape.call is None and shape.position is not None for shape in shapes)


def by_keyword(shapes: tuple[Shape, ...], callee: str | None, keyword: str) -> bool:
    """Whether some shape selects the `keyword` argument of a call of `callee` (None: a class's keywords)."""
    return any(shape.matches(callee, keyword, None) for shape in shapes)


def candidates(walked: tree_index.TreeIndex, shapes: tuple[Shape, ...], literals: bool) -> list[ast.AST]:
    """The nodes python_arch_list's `_find` (`consider`, `assigned_literal`) may take an argument or a literal
    from: a call given an argument some shape selects (`by_position`, `by_keyword`), a class given such a
    keyword, and with `literals` an assignment of a list, tuple or set literal."""
    found: list[ast.AST] = []
    for node in walked.of_type(ast.Call, ast.ClassDef, ast.Assign, ast.AnnAssign):
        if isinstance(node, (ast.Call, ast.ClassDef)):
            callee = called(node) if isinstance(node, ast.Call) else None
            positional = isinstance(node, ast.Call) and bool(node.args) and by_position(shapes, callee)
            if positional or any(kw.arg is not None and by_keyword(shapes, callee, kw.arg) for kw in node.keywords):
                found.append(node)
        elif literals and isinstance(node.value, (ast.List, ast.Tuple, ast.Set)):
            found.append(node)
    return found


def where(walked: tree_index.TreeIndex, node: ast.AST) -> tuple[str, bool]:
    """As python_arch_list's walk carries it: the name of the innermost def or class at or around `node` ("" for
    none), and whether `node` is in (or is) an f-string."""
    name: str | None = None
    fstring = False
    at: ast.AST | None = node
    while at is not None:
        if name is None and isinstance(at, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = at.name
        fstring = fstring or isinstance(at, ast.JoinedStr)
        at = walked.parents.get(id(at))
    return name or "", fstring


def assigned(walked: tree_index.TreeIndex, node: ast.AST) -> frozenset[str]:
    """As python_arch_list's walk carries it: the targets of every assignment whose value holds `node`."""
    targets: set[str] = set()
    child = node
    while (parent := walked.parents.get(id(child))) is not None:
        if isinstance(parent, ast.Assign) and child is parent.value:
            targets.update(dotted(target) for target in parent.targets)
        elif isinstance(parent, (ast.AnnAssign, ast.NamedExpr)) and child is parent.value:
            targets.add(dotted(parent.target))
        child = parent
    return frozenset(targets)
