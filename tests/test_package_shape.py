"""The package's shape: no module imports itself through others, and no module is over the 600-line guide."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "codemods"
MAX_LINES = 600


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, path: Path) -> set[str]:
    """The codemods modules `name` imports anywhere: at the top, in functions, under TYPE_CHECKING, or lazily by name."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names}
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            if node.args[0].value in MODULES and getattr(node.func, "id", getattr(node.func, "attr", "")) in {"LazyModule", "import_module"}:
                found.add(node.args[0].value)
    return {module for module in found if module in MODULES and module != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_two_codemods_modules_import_each_other():
    graph = {name: imported(name, path) for name, path in MODULES.items()}
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_is_over_600_lines():
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_bytes().splitlines())) > MAX_LINES}
    assert long == {}


def self_calling_nested_functions(source: str) -> list[str]:
    """The functions defined inside another that name themselves in their own body (a reference cycle, which
    keeps whatever their closure holds until the collector's next full pass: tests/audit/test_no_cycles.py)."""
    found = []
    for outer in ast.walk(ast.parse(source)):
        if not isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(outer):
            if inner is not outer and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(isinstance(node, ast.Name) and node.id == inner.name for node in ast.walk(inner)):
                    found.append(f"{outer.name}.{inner.name}:{inner.lineno}")
    return found


def test_no_nested_function_calls_itself():
    found = {str(path.relative_to(ROOT)): self_calling_nested_functions(path.read_text()) for path in MODULES.values()}
    assert {path: names for path, names in found.items() if names} == {}


def test_the_self_call_finder_finds_a_walk_in_a_function():
    source = "def outer(tree):\n    def visit(node):\n        for child in node:\n            visit(child)\n    visit(tree)\n"
    assert self_calling_nested_functions(source) == ["outer.visit:2"]
    assert self_calling_nested_functions("def outer():\n    def helper():\n        return 1\n    return helper()\n") == []
