"""A name a widened condition no longer reads, bound beside the one it still reads (`major, minor = ...` after
`and minor == 0` is dropped), becomes `_` in the file's own style (python_capability's widen)."""

from __future__ import annotations

import ast

from codemods.gates import Edit, apply_edits
from codemods.gates.python.ast_text import PythonText


def unused_halves(
    source: bytes, text: PythonText, tree: ast.Module, parents: dict[int, ast.AST], root: ast.expr, edits: list[Edit]
) -> list[Edit]:
    """The names of a `major, minor = ...` in the function around the condition that the edits left unused,
    renamed `_` where the file binds an unused half so elsewhere (ec0178acd: `major == 12 and minor == 0` became
    `major == 12`, and `major, minor =`, `major, _ =`, in a utils.py with seven `major, _ =`); kept in a file with
    none (SGLang 0.5.21's vision.py kept `major, minor =` when `and minor != 3` was dropped)."""
    if not any(_unpacks_into_underscore(node) for node in ast.walk(tree)):
        return []
    function = root
    while id(function) in parents and not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        function = parents[id(function)]  # type: ignore[assignment]
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    try:
        after = ast.parse(apply_edits(source, edits))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    same = (type(function), function.lineno, function.name)
    widened = next((n for n in ast.walk(after) if (type(n), getattr(n, "lineno", 0), getattr(n, "name", "")) == same), None)
    loads = {n.id for n in ast.walk(widened or function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    used = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    out = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple):
            for name in node.targets[0].elts:
                if isinstance(name, ast.Name) and name.id in used - loads and name.id != "_":
                    out.append(Edit(*text.span(name), b"_"))
    return out


def _unpacks_into_underscore(node: ast.AST) -> bool:
    """`major, _ = ...`: a tuple unpacking that binds one of its names to `_`."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple)):
        return False
    names = [e.id for e in node.targets[0].elts if isinstance(e, ast.Name)]
    return "_" in names and len(names) > 1
