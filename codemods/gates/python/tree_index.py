"""One walk of a Python syntax tree, shared by every reader of that tree: its nodes in `ast.walk` order and each
node's parent.

The readers of a file (the arch-map reader, the dispatch rule, the predicate
and polarity readers, the callers search of the scan's assembly) each walked
the whole module again: on FlashInfer 0.7.4 a cold scan spent some 60 s of its
CPU time in `ast.walk` (bench/scan_results.md, 2026-12-05), 59 s of it finding
the `if` around each gate, once per gate. The index is made on first use and
kept on the tree itself, so it lives and dies with the tree (the trees are
shared and read-only: ast_text.ast_of, core.pytrees). Walking `nodes` gives
the nodes `ast.walk(tree)` gives, in the same order.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass, field

_ATTRIBUTE = "_codemod_tree_index"


@dataclass
class TreeIndex:
    nodes: list[ast.AST]  # in ast.walk order (breadth first)
    parents: dict[int, ast.AST]  # by id(child)
    _typed: dict[tuple[type, ...], list] = field(default_factory=dict)

    def of_type(self, *types: type) -> list:
        """The nodes that are instances of `types`, in walk order."""
        found = self._typed.get(types)
        if found is None:
            found = self._typed[types] = [node for node in self.nodes if isinstance(node, types)]
        return found


def index(tree: ast.AST) -> TreeIndex:
    """The tree's index, made by one walk the first time it is asked for."""
    found = tree.__dict__.get(_ATTRIBUTE)
    if found is None:
        nodes: list[ast.AST] = []
        parents: dict[int, ast.AST] = {}
        todo = deque([tree])
        while todo:
            node = todo.popleft()
            nodes.append(node)
            for child in ast.iter_child_nodes(node):
                parents[id(child)] = node
                todo.append(child)
        found = TreeIndex(nodes, parents)
        tree.__dict__[_ATTRIBUTE] = found
    return found
