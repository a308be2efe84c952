"""Python syntax trees, kept within a memory budget: the one kind of cache every tree reader goes through.

A stdlib `ast` tree takes some 30 times the bytes of its source: the
FlashInfer 0.7.4 wheel's package files the JIT readers parse (19 MB) made
610 MB of trees when every tree was kept. `ParsedFiles` keeps the most
recently used trees up to `budget` bytes of source (and always the last
one), and parses again what it let go. Pure: the bytes come from the caller.
"""

from __future__ import annotations

import ast
from collections import OrderedDict
from collections.abc import Callable, Hashable

# 2 MiB of source is some 60 MB of trees; on that wheel the JIT readers parse 30 MB, where keeping every tree
# parsed 22 MB (bench/scan_results.md).
BUDGET = 2 << 20


def parse_or_none(data: bytes) -> ast.Module | None:
    """`ast.parse` of the bytes (their `# coding:` line honoured), None when they do not parse."""
    try:
        return ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # MemoryError: the parser's depth limit
        return None


class ParsedFiles:
    """Sources and their trees by key (a file's path, or the source itself), the most recently used first to stay.

    `parse` makes a tree of a source; what it raises reaches the caller and nothing is kept.
    """

    def __init__(self, budget: int = BUDGET, parse: Callable[[bytes], ast.Module | None] = parse_or_none) -> None:
        self.budget = budget
        self._parse = parse
        self._held: OrderedDict[Hashable, tuple[bytes, ast.Module | None]] = OrderedDict()
        self._size = 0

    def held(self, key: Hashable) -> tuple[bytes, ast.Module | None] | None:
        """The source and tree held for `key` (now the most recently used), else None."""
        entry = self._held.get(key)
        if entry is not None:
            self._held.move_to_end(key)
        return entry

    def file(self, key: Hashable, read: Callable[[], bytes | None]) -> ast.Module | None:
        """The tree held for `key`, else of the bytes `read()` gives (None: no file, and no tree)."""
        entry = self.held(key)
        if entry is not None:
            return entry[1]
        data = read()
        return None if data is None else self.tree(key, data)

    def tree(self, key: Hashable, data: bytes) -> ast.Module | None:
        """The tree of `data`, the source of `key`; parsed again only when `key` is not held with these bytes."""
        entry = self.held(key)
        if entry is not None and (entry[0] is data or entry[0] == data):
            return entry[1]
        module = self._parse(data)
        if entry is not None:
            self._size -= len(entry[0])
        self._held[key] = (data, module)
        self._held.move_to_end(key)
        self._size += len(data)
        while self._size > self.budget and len(self._held) > 1:
            _, (dropped, _) = self._held.popitem(last=False)
            self._size -= len(dropped)
        return module
