"""C++ and CUDA syntax trees from tree-sitter: the one place grammars are built, and what gates ask of a tree.

A tree is read with its macros masked where a gate needs code only
(`parse_code`); the helpers name functions, find their bodies and tell
whether a span parsed cleanly. Nothing here reads files.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

import tree_sitter
import tree_sitter_cpp
import tree_sitter_cuda

from codemods.cpp import functions
from codemods.cpp.lexer import mask_macros

_GRAMMARS = {"cuda": tree_sitter_cuda.language, "cpp": tree_sitter_cpp.language}


@cache
def grammar(language: str) -> tree_sitter.Language:
    """The tree-sitter language for "cuda" or "cpp", built once."""
    if language not in _GRAMMARS:
        raise ValueError(f"unknown language {language!r}; use one of {sorted(_GRAMMARS)}")
    return tree_sitter.Language(_GRAMMARS[language]())


@cache
def parser(language: str) -> tree_sitter.Parser:
    return tree_sitter.Parser(grammar(language))


@cache
def query(language: str, pattern: str) -> tree_sitter.Query:
    return tree_sitter.Query(grammar(language), pattern)


def captures(tree: tree_sitter.Tree, language: str, pattern: str) -> dict[str, list[tree_sitter.Node]]:
    """The nodes `pattern` captures in `tree`, by capture name. One query of several patterns costs one
    compile (about 35 ms each, whatever it holds), so patterns read together go in one query."""
    return tree_sitter.QueryCursor(query(language, pattern)).captures(tree.root_node)


def parse_code(source: bytes, language: str) -> tree_sitter.Tree:
    """The tree of `source` with `#define`/`#undef` lines blanked (same offsets).

    tree-sitter mis-reads macro bodies with comments on continuation lines,
    and what a macro body holds is in no function anyway.
    """
    return parser(language).parse(mask_macros(source))


def has_syntax_error(tree: tree_sitter.Tree, start: int, end: int, near: tree_sitter.Node | None = None) -> bool:
    """Whether tree-sitter parsed `[start, end)` as an ERROR or with ERROR/MISSING inside.

    `near` is a node that may span the range (its directive): the search for the
    node covering it starts there, not at the root, which in nested `#if`s costs the depth.
    """
    top = near if near is not None and near.start_byte <= start and end <= near.end_byte else tree.root_node
    covering = top.descendant_for_byte_range(start, end)
    if covering is None or covering.is_error:
        return True
    pending = [covering]
    while pending:
        node = pending.pop()
        if node.is_missing and start <= node.start_byte <= end:
            return True
        if node.is_error and node.start_byte < end and node.end_byte > start:
            return True
        if node.has_error:
            for child in node.children:
                if child.start_byte > end:
                    break
                if child.end_byte >= start:
                    pending.append(child)
    return False


# ---------------------------------------------------------------- functions


def bodies(tree: tree_sitter.Tree, found: list[functions.Definition]) -> list[tuple[functions.Definition, tree_sitter.Node]]:
    """Each definition the lexer found (codemods.cpp.functions, the one namer) with the node spanning its body."""
    out = []
    for definition in found:
        node = tree.root_node.descendant_for_byte_range(definition.body_start, definition.body_end)
        if node is not None:
            out.append((definition, node))
    return out


class Definitions:
    """The function definitions of one tree that hold an offset.

    Found by descending from the root towards the offset (a cursor's first
    child for that byte, level by level: the depth of the tree per offset).
    Walking up from a node instead costs the depth of the tree per step
    (tree-sitter finds a parent from the root), cubic in the depth of nested
    `#if`s; listing every definition of the tree first (one query) cost 10x
    the descent on the bench corpus, where both gave the same definitions
    for 177,134 offsets.
    """

    def __init__(self, tree: tree_sitter.Tree, language: str) -> None:
        self._tree = tree

    def holding(self, offset: int) -> Iterator[tree_sitter.Node]:
        """The definitions whose text holds `offset`, innermost first."""
        path = []
        cursor = self._tree.walk()
        while cursor.goto_first_child_for_byte(offset) is not None:
            node = cursor.node
            assert node is not None  # the cursor just moved to it
            if node.start_byte > offset:
                break  # the offset lies between children: nothing deeper holds it
            if node.type == "function_definition":
                path.append(node)
        return reversed(path)

    def innermost(self, offset: int, body: bool = False) -> tree_sitter.Node | None:
        """The innermost definition holding `offset` (with `body`, in its body: not in its head or parameters)."""
        for node in self.holding(offset):
            if not body:
                return node
            block = node.child_by_field_name("body")
            if block is not None and block.start_byte <= offset < block.end_byte:
                return node
        return None


def field(node: tree_sitter.Node, name: str) -> tree_sitter.Node:
    """A child the grammar always gives `node` (a binary expression's operands, a call's function)."""
    child = node.child_by_field_name(name)
    assert child is not None, f"{node.type} without its {name}"  # tree-sitter marks a missing one MISSING, not absent
    return child


def unparenthesized(node: tree_sitter.Node) -> tree_sitter.Node:
    """`node` without the parentheses around it: `((a == 1))` -> `a == 1`."""
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node
