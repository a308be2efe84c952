"""python_arch_list finds through the tree's shared index (lists.walk) what its walk over every node found.

The whole walk stays for a module nested deeper than codemod reads (it refuses at the first such node it
meets); forcing it here, by making the index report a node too deep, gives the reference to compare with.
"""

import ast
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.gates.python import python_arch_list, tree_index

ROOT = Path(__file__).resolve().parents[2]

# Statements in the shapes scan lists and recipes select, where their place matters: in an f-string, a
# decorator, a class keyword, a lambda, a conditional expression (whose test the walk meets before its body),
# two calls naming one list (the first met makes the gate), pairs assigned to a capability name.
LEAVES = [
    "f(supported_major_versions=[9, 10])",
    "g(supported_major_versions=MAJORS)",
    "h(supported_major_versions=MAJORS, other=[1])",
    "ok = _match_sm_version(dev, ['100', '103'])",
    "s = f'{pick(supported_major_versions=[9])}'",
    "v = a(supported_major_versions=[12]) if b(supported_major_versions=[10]) else c(supported_major_versions=[9])",
    "k = lambda: ctx.flags(supported_major_versions=[9, 10])",
    "supported_capabilities = {(9, 0), (10, 0)}",
    "self.device_capabilities: list = [(12, 0)]",
    "w = (n := f(supported_major_versions=[10]))",
    "spec = gen(x, y, [9, 10], supported_major_versions=(9,))",
    "pass",
]


@st.composite
def modules(draw, depth: int = 0) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        choice = draw(st.integers(0, 9 if depth < 3 else 5))
        if choice <= 5:
            lines.append(draw(st.sampled_from(LEAVES)))
            continue
        body = ["    " + line for line in draw(modules(depth + 1))]
        if choice == 6:
            lines += ["@supported_compute_capability([100, 103])", f"def fn{depth}(a, b=[9]):", *body]
        elif choice == 7:
            lines += [f"class C{depth}(Base, supported_major_versions=[9, 10]):", *body]
        elif choice == 8:
            lines += ["if x:", *body, "else:", *body]
        else:
            lines += ["try:", *body, "except E:", *body]
    return lines


def _whole_walk(find):
    """What `find` gives when _find walks every node, as it does for a module nested too deeply."""
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(tree_index.TreeIndex, "deeper_than", lambda self, limit: self.nodes[0])
        return find()


def _gates(found) -> list:
    return [(g.start, g.end, g.line, g.text, g.context, g.detail, g.admits) for g in found]


@settings(max_examples=150, deadline=None)
@given(modules())
def test_the_index_finds_what_the_whole_walk_finds(lines: list[str]) -> None:
    data = ("MAJORS = [9, 10]\n" + "\n".join(lines) + "\n").encode()
    finders = [
        lambda: python_arch_list.find_known(data),
        lambda: python_arch_list.find(data),
        lambda: python_arch_list.find(data, call="supported_compute_capability", position=0),
        lambda: python_arch_list.find(data, call="_match_sm_version"),
        lambda: python_arch_list.find(data, assigns="v"),
        lambda: python_arch_list.find(data, assigns="supported_capabilities"),
        lambda: python_arch_list.find(data, position=2),
    ]
    for find in finders:
        assert _gates(find()) == _gates(_whole_walk(find))


def test_two_calls_naming_one_list_keep_the_first_the_walk_meets() -> None:
    # the conditional expression's test comes first in the walk, after its body in the source
    data = b"MAJORS = [9, 10]\nv = a(supported_major_versions=MAJORS) if b(other=1, supported_major_versions=MAJORS) else 0\n"
    [gate] = python_arch_list.find_known(data)
    assert gate.text == "[9, 10]" and gate.line == 1 and gate.detail["named_at"] == 2
    assert _gates([gate]) == _gates(_whole_walk(lambda: python_arch_list.find_known(data)))


def test_depth_first_is_the_recursive_walks_order() -> None:
    def preorder(node: ast.AST) -> list[ast.AST]:
        return [node] + [n for child in ast.iter_child_nodes(node) for n in preorder(child)]

    for path in sorted((ROOT / "codemods" / "gates" / "python").glob("*.py"))[:12]:
        tree = ast.parse(path.read_bytes())
        walked = tree_index.index(tree)
        assert [id(n) for n in walked.nodes] == [id(n) for n in ast.walk(tree)]
        expected = [n for n in preorder(tree) if isinstance(n, (ast.Call, ast.Name))]
        shuffled = sorted(expected, key=lambda n: (type(n).__name__, id(n)))
        assert [id(n) for n in walked.depth_first(shuffled)] == [id(n) for n in expected]


def _first_deeper(tree: ast.AST, limit: int) -> ast.AST | None:
    """The reference: a breadth-first walk carrying each node's depth, a level per operand of an `or`."""
    todo = [(tree, 0)]
    while todo:
        node, depth = todo.pop(0)
        if depth > limit:
            return node
        step = len(node.values) if isinstance(node, ast.BoolOp) else 1
        todo += [(child, depth + step) for child in ast.iter_child_nodes(node)]
    return None


@settings(max_examples=100, deadline=None)
@given(st.recursive(st.sampled_from(["x", "f(y)", "a.b", "[1]"]), lambda inner: st.one_of(
    st.tuples(inner, inner).map(lambda p: f"({p[0]} or {p[1]} or z)"),
    inner.map(lambda e: f"g({e})"),
    st.tuples(inner, inner).map(lambda p: f"[{p[0]}, {p[1]}]"),
), max_leaves=30), st.integers(0, 12))
def test_deeper_than_is_the_walks_first_node_too_deep(expression: str, limit: int) -> None:
    tree = ast.parse(f"v = {expression}\nif c:\n    w = {expression}\n")
    assert tree_index.index(tree).deeper_than(limit) is _first_deeper(tree, limit)
