"""One walk of a Python syntax tree, shared by every reader of that tree: its nodes in `ast.walk` order and each
node's parent.

The readers of a file (the arch-map reader, the dispatch rule, the predicate
and polarity readers, the callers search of the scan's assembly) each walked
the whole module again: on FlashInfer 0.7.4 a cold scan spent some 60 s of its
CPU time in `ast.walk` (bench/scan_results.md, 2026-12-05), 59 s of it finding
the `if` around each gate, once per gate. The index is made on first use and
kept for the last few trees asked for (a file's readers run one after
another), so it holds no tree longer than a few readings: a tree kept on
itself would be a reference cycle, freed only by the cyclic collector, and
raised a cold scan's peak memory by a hundred MB. The trees are shared and
read-only (ast_text.ast_of, core.pytrees). Walking `nodes` gives the nodes
`ast.walk(tree)` gives, in the same order.
"""

from __future__ import annotations

import ast
from collections import OrderedDict
from dataclasses import dataclass, field

_KEPT = 4  # the indexes of the trees asked for last, each with its tree (so its id stays its own)
_RECENT: OrderedDict[int, tuple[ast.AST, TreeIndex]] = OrderedDict()


@dataclass
class TreeIndex:
    nodes: list[ast.AST]  # in ast.walk order (breadth first)
    parents: dict[int, ast.AST]  # by id(child)
    # each node's depth below the root, by its place in `nodes` (ast shares some nodes, `Load()`: depths are the
    # walk's, not the parents map's); an `a or b or c` is a level per operand, as libcst counts them
    depths: list[int]
    _typed: dict[tuple[type, ...], list] = field(default_factory=dict)

    def deeper_than(self, limit: int) -> ast.AST | None:
        """The first node (in walk order) nested deeper than `limit` levels below the tree's root, as libcst counts
        them (an `a or b or c` is a level per operand), or None: from the depths `index` notes as it walks."""
        if max(self.depths) <= limit:
            return None
        return next(node for node, depth in zip(self.nodes, self.depths) if depth > limit)

    def depth_first(self, nodes: list[ast.AST]) -> list[ast.AST]:
        """`nodes` (of this tree) in the order a depth-first walk from the root meets them: by each one's path of
        child positions (ast.iter_child_nodes' order), a node before the nodes below it."""
        positions: dict[int, dict[int, int]] = {}

        def path(node: ast.AST) -> list[int]:
            steps = []
            while (parent := self.parents.get(id(node))) is not None:
                table = positions.get(id(parent))
                if table is None:
                    table = positions[id(parent)] = {id(child): i for i, child in enumerate(ast.iter_child_nodes(parent))}
                steps.append(table[id(node)])
                node = parent
            return steps[::-1]

        return sorted(nodes, key=path)

    def of_type(self, *types: type) -> list:
        """The nodes that are instances of `types`, in walk order."""
        found = self._typed.get(types)
        if found is None:
            found = self._typed[types] = [node for node in self.nodes if isinstance(node, types)]
        return found


def index(tree: ast.AST) -> TreeIndex:
    """The tree's index: made by one walk, unless one of the last trees asked for is this one."""
    entry = _RECENT.get(id(tree))
    if entry is not None and entry[0] is tree:
        _RECENT.move_to_end(id(tree))
        return entry[1]
    # breadth first, as ast.walk: the list is its own queue, and each node's fields are read as
    # ast.iter_child_nodes reads them, without its two generators per node (a third of the walk's time)
    nodes: list[ast.AST] = [tree]
    depths = [0]
    parents: dict[int, ast.AST] = {}
    append, deepen, node_type, either = nodes.append, depths.append, ast.AST, ast.BoolOp
    done = 0
    while done < len(nodes):
        node = nodes[done]
        below = depths[done] + (len(node.values) if isinstance(node, either) else 1)
        done += 1
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, node_type):
                parents[id(value)] = node
                append(value)
                deepen(below)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, node_type):
                        parents[id(item)] = node
                        append(item)
                        deepen(below)
    found = TreeIndex(nodes, parents, depths)
    _RECENT[id(tree)] = (tree, found)
    _RECENT.move_to_end(id(tree))
    while len(_RECENT) > _KEPT:
        _RECENT.popitem(last=False)
    return found
