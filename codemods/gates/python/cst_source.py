"""Shared libcst plumbing for the Python gate kinds.

libcst decides where an edit goes; the edit itself is a byte splice on the
original file. `PythonSource` parses the bytes once and maps every node to its
byte span in those bytes, so anything outside an edit (comments, quotes,
CRLF line endings, a BOM) is kept as it was.

libcst's cost grows with every line of a module (SGLang's server_args.py has
5,500), so a kind says which statements it reads (`parse(source, keep)`): the
stdlib `ast` locates them, `Pruned` blanks every other statement (same
offsets back), and libcst parses the few hundred bytes left. `codemod scan`
prunes the same way (audit.python_files).

The stdlib `ast` side (the shared tree, the depth check, ast positions in
bytes) is `python.ast_text`; lines, trivia and layout in the bytes, `python.layout.text`.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import re
import symtable
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from functools import cached_property, lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING, cast

from codemods.core.arch import Arch, ArchSet
from codemods.core.lazy import LazyModule
from codemods.gates import Gate, SourceError, decode, line_of
from codemods.gates.python.ast_text import _BOM, COMPOUND, PythonText, ast_of, check_depth, nested_too_deeply
from codemods.gates.python.layout.text import LONE_CR, eol, line_end, line_start

if TYPE_CHECKING:
    import libcst as cst
    from libcst import metadata
    from libcst.metadata import Scope
else:  # imported on first parse: `codemod list` and a scan answered from the cache need no libcst (a fifth of a second)
    cst = LazyModule("libcst")
    metadata = LazyModule("libcst.metadata")


@lru_cache(maxsize=8)
def parse(source: bytes, keep: re.Pattern[bytes] | None = None) -> PythonSource:
    """The parsed source, shared by `find` and `widen` calls on the same bytes (and the same `keep`).

    With `keep`, only the statements whose bytes `keep` matches are handed to
    libcst (see `PythonSource`); a kind passes a pattern that matches every
    statement its `find` and `widen` read, and asks no question about others.
    Shared, so read-only: a `PythonSource` refuses new attribute values, its
    tables are read-only views, and libcst's nodes are immutable.
    """
    return PythonSource(source, keep)


@lru_cache(maxsize=32)
def mentioning(words: tuple[str, ...]) -> re.Pattern[bytes]:
    """A `keep` pattern for `parse`: any of `words` anywhere in a statement (one pattern object per tuple, so
    `find` and `widen` share the cached parse)."""
    return re.compile(b"|".join(re.escape(word.encode()) for word in sorted(set(words))))


def _rejected(source: bytes) -> str:
    """Why Python's own parser rejects `source`, which libcst read."""
    try:
        ast_of(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return f"not valid Python: line {getattr(exc, 'lineno', None)}: {getattr(exc, 'msg', exc)}"
    return "not valid Python"


def _cut(
    body: list, in_function: bool, text: PythonText, wanted: Callable[[bytes, ast.stmt, bool], bool],
    whole: Callable[[bytes], object] | None, cuts: list[tuple[int, int]],
) -> None:
    """The runs of unwanted statements in `body` (Pruned), nested bodies too."""
    run: list[int] | None = None
    for stmt in body:
        start, end = text.span(stmt)
        if not wanted(text.data[start:end], stmt, in_function):
            run = [run[0], end] if run else [start, end]
            continue
        if run:
            cuts.append((run[0], run[1]))
            run = None
        if isinstance(stmt, COMPOUND):
            if whole is not None:
                if isinstance(stmt, ast.Match):  # a case has no position of its own; its pattern has
                    pattern = stmt.cases[0].pattern
                    header_end = text.offset(pattern.lineno, pattern.col_offset)
                else:
                    header_end = text.span(cast(list[ast.stmt], getattr(stmt, "body"))[0])[0]
                if whole(text.data[start:header_end]):
                    continue
            inner = isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) or (
                in_function and not isinstance(stmt, ast.ClassDef)
            )
            for name in ("body", "orelse", "finalbody"):
                _cut(getattr(stmt, name, None) or [], inner, text, wanted, whole, cuts)
            for handler in getattr(stmt, "handlers", None) or []:
                _cut(handler.body, inner, text, wanted, whole, cuts)
            for case in getattr(stmt, "cases", None) or []:
                _cut(case.body, inner, text, wanted, whole, cuts)
    if run:
        cuts.append((run[0], run[1]))


class Pruned:
    """A Python source with the statements no gate can be in cut out, and the way back to the original offsets.

    Each run of consecutive statements `wanted` rejects becomes one `0`; a
    kept compound statement keeps its header and has its bodies pruned the
    same way (unless `whole` says its header alone decides: then it is kept
    whole), so the text stays valid Python and everything kept is byte for
    byte the original. libcst then parses a few hundred bytes instead of a
    150 KB module (its cost grows with every line, blank ones included).
    """

    def __init__(
        self,
        text: PythonText,
        tree: ast.Module,
        wanted: Callable[[bytes, ast.stmt, bool], bool],
        whole: Callable[[bytes], object] | None = None,
    ) -> None:
        """`wanted(source, statement, in_function)` says which statements to keep; `whole(header)`, which whole."""
        self.text = text
        cuts: list[tuple[int, int]] = []

        _cut(tree.body, False, text, wanted, whole, cuts)
        data = text.data
        pieces: list[bytes] = []
        self._compact: list[int] = []  # where each piece starts in the pruned text
        self._original: list[int] = []  # and in the original
        pos = size = 0
        for start, end in sorted(cuts):
            for piece, origin in ((data[pos:start], pos), (b"0", start)):
                self._compact.append(size)
                self._original.append(origin)
                pieces.append(piece)
                size += len(piece)
            pos = end
        self._compact.append(size)
        self._original.append(pos)
        pieces.append(data[pos:])
        self.source = b"".join(pieces)
        self._line_starts: list[int] | None = None

    def offset(self, compact: int) -> int:
        """The original offset of an offset into the pruned text (the end of a cut for the end of its `0`)."""
        i = bisect.bisect_right(self._compact, compact) - 1
        return self._original[i] + compact - self._compact[i]

    def line(self, compact_line: int) -> int:
        """The original line of a line of the pruned text."""
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer(rb"\n", self.source)]
        return self.text.line(self.offset(self._line_starts[compact_line - 1]))

    def gate(self, gate: Gate) -> Gate:
        """A gate found in the pruned text, placed in the original."""
        start, end = self.offset(gate.start), self.offset(gate.end - 1) + 1 if gate.end > gate.start else self.offset(gate.start)
        return replace(gate, start=start, end=end, line=self.text.line(start))


class PythonSource:
    """A parsed Python file whose node spans are byte offsets into the original bytes; read-only once made."""

    def __setattr__(self, name: str, value: object) -> None:
        if self.__dict__.get("_sealed"):
            raise AttributeError(f"PythonSource is read-only (parse shares it): cannot set {name}")
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"PythonSource is read-only (parse shares it): cannot delete {name}")

    def __init__(self, source: bytes, keep: re.Pattern[bytes] | None = None) -> None:
        """With `keep`, libcst parses only the statements `keep` matches (`Pruned`); spans are the original's.

        A compound statement whose header (`if is_sm90_supported():`, a
        decorator) matches is kept whole, body and all; one that matches only
        in its body keeps its header and has its body pruned the same way.
        Without `keep`, or for source `ast` cannot read or whose lines end in a
        lone CR (which libcst does not count as a line), the whole module.
        """
        text = decode(source)
        # libcst drops a leading BOM from its tree, so its offsets start after it.
        self.bom = len(_BOM.encode()) if text.startswith(_BOM) else 0
        if text.startswith(_BOM * 2):  # Python rejects a second BOM; libcst would drop it too, and every span shift by 3
            raise SourceError("not valid Python: line 1: a second byte order mark (U+FEFF) after the first")
        tree = check_depth(source, text[1:] if self.bom else text)
        self.pruned: Pruned | None = None
        if keep is not None and tree is not None and not (b"\r" in source and LONE_CR.search(source)):
            self.pruned = Pruned(PythonText(source), tree, lambda piece, stmt, in_function: bool(keep.search(piece)), keep.search)
            text = self.pruned.source.decode("utf-8")
        try:
            self.module = cst.parse_module(text[1:] if self.bom else text)
            self._wrapper = metadata.MetadataWrapper(self.module, unsafe_skip_copy=True)
            self._spans = MappingProxyType(dict(self._wrapper.resolve(metadata.ByteSpanPositionProvider)))
        except cst.ParserSyntaxError as exc:
            raise SourceError(f"not valid Python: line {exc.raw_line}: {exc.message}") from None
        except RecursionError:
            raise nested_too_deeply() from None
        if tree is None and self.module.code != (text[1:] if self.bom else text):
            # libcst reads some source Python rejects (a line of only ` \` before a statement) and leaves bytes
            # out of its tree, so every span after them would land early: refused, with Python's reason
            raise SourceError(_rejected(source))
        self.source = source
        # One walk gives the parents and the source order; libcst's
        # ParentNodeProvider alone takes three times as long on a 5000-line file.
        parents: dict[cst.CSTNode, cst.CSTNode] = {}
        order: list[cst.CSTNode] = []
        try:
            self.module.visit(_walk()(parents, order))
        except RecursionError:
            raise nested_too_deeply() from None
        self._parents = MappingProxyType(parents)
        self._order = tuple(order)
        self._sealed = True

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Byte span of `node`, without the parentheses around it."""
        span = self._spans[node]
        start, end = self.bom + span.start, self.bom + span.start + span.length
        if self.pruned is not None:
            return self.pruned.offset(start), self.pruned.offset(end)
        return start, end

    def outer_span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Byte span of `node` including the parentheses the author wrote around it."""
        start, end = self.span(node)
        lpar, rpar = getattr(node, "lpar", ()), getattr(node, "rpar", ())
        if lpar and rpar:
            start = self.span(lpar[0])[0]
            end = self.span(rpar[-1])[1]
        return start, end

    def text(self, start: int, end: int) -> str:
        return self.source[start:end].decode("utf-8")

    def line(self, offset: int) -> int:
        return line_of(self.source, offset)

    def line_start(self, offset: int) -> int:
        return line_start(self.source, offset)

    def line_end(self, offset: int) -> int:
        return line_end(self.source, offset)

    def eol(self, offset: int) -> bytes:
        return eol(self.source, offset)

    def indent(self, offset: int) -> bytes | None:
        """The whitespace before `offset` on its line, or None when something else precedes it."""
        prefix = self.source[self.line_start(offset) : offset]
        return prefix if not prefix.strip() else None

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        parent = self.parent(node)
        while parent is not None:
            yield parent
            parent = self.parent(parent)

    def enclosing_function(self, node: cst.CSTNode) -> str:
        """Name of the innermost function or method around `node`; "" at module or class level."""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor.name.value
        return ""

    def nodes(self, kind: type | tuple[type, ...], within: cst.CSTNode | None = None) -> list:
        """Every node of the given type(s) in the module (or under `within`), in source order."""
        if within is None:
            return [node for node in self._order if isinstance(node, kind)]
        found: list[cst.CSTNode] = []
        try:
            within.visit(_walk()({}, found))
        except RecursionError:
            raise nested_too_deeply() from None
        return [node for node in found if isinstance(node, kind)]

    def scope(self, node: cst.CSTNode) -> Scope:
        """The scope `node` is evaluated in (the module's global scope for the module itself).

        libcst's scope analysis takes seconds on a 5000-line module; `bound`
        and `importers` answer the two questions the gate kinds ask from
        Python's own symbol tables, and come here only for shapes those
        cannot be matched to (lambdas, comprehensions).
        """
        if self.pruned is not None:  # bindings in the statements left out count too: ask the whole module
            full = parse(self.source)
            return full.scope(full._counterpart(node, self))
        scope = self._scopes[node]
        assert scope is not None  # libcst types a scope as optional, yet gives every node of a module one
        return scope

    def _counterpart(self, node: cst.CSTNode, other: PythonSource) -> cst.CSTNode:
        """The node of this parse that stands where `node` of `other` (a parse of the same bytes) does."""
        if node is other.module:
            return self.module
        return self._by_span[(type(node), other.span(node))]

    @cached_property
    def _by_span(self) -> Mapping[tuple[type, tuple[int, int]], cst.CSTNode]:
        found: dict[tuple[type, tuple[int, int]], cst.CSTNode] = {}
        for node in reversed(self._order):  # the outermost of nodes with one span wins (`(a)` and `a`)
            found[(type(node), self.span(node))] = node
        return MappingProxyType(found)

    @cached_property
    def _scopes(self) -> Mapping[cst.CSTNode, Scope | None]:
        try:
            return MappingProxyType(dict(self._wrapper.resolve(metadata.ScopeProvider)))
        except RecursionError:
            raise nested_too_deeply() from None

    def bound(self, node: cst.CSTNode, name: str) -> bool:
        """Whether `name` is bound where `node` is evaluated: in its scope, an enclosing one, or builtins."""
        found = self._binding_table(node, name)
        if found is None:
            return name in self.scope(node)
        return found is not False or hasattr(builtins, name)

    def local(self, node: cst.CSTNode, name: str) -> bool:
        """Whether `name`, where `node` is evaluated, is a function's own (assigned there, or a parameter)."""
        found = self._binding_table(node, name)
        return bool(found) and isinstance(found[1], cst.FunctionDef)

    def importers(self, node: cst.CSTNode, name: str) -> list[cst.ImportFrom]:
        """The `from ... import` statements that bind `name` where `node` is evaluated, in source order."""
        found = self._binding_table(node, name)
        if found is None:
            statements = [
                assignment.node
                for assignment in self.scope(node)[name]
                if isinstance(assignment, metadata.Assignment) and isinstance(assignment.node, cst.ImportFrom)
            ]
            if self.pruned is None:
                return statements
            full = parse(self.source)  # scope() answered from the whole module: its nodes, here ours
            return [cast(cst.ImportFrom, self._counterpart(statement, full)) for statement in statements]
        if found is False:
            return []
        owner = found[1]
        out = []
        for statement in self.nodes(cst.ImportFrom):
            if self._scope_owner(statement) is not owner or isinstance(statement.names, cst.ImportStar):
                continue
            for alias in statement.names:
                bound_as = alias.asname.name if alias.asname is not None else alias.name
                if isinstance(bound_as, cst.Name) and bound_as.value == name:
                    out.append(statement)
                    break
        return out

    def _scope_owner(self, node: cst.CSTNode) -> cst.CSTNode:
        """The function, class, lambda or comprehension whose scope holds `node`, else the module."""
        child = node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)) and child is ancestor.body:
                return ancestor
            if isinstance(ancestor, (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
                return ancestor
            child = ancestor
        return self.module

    def _binding_table(self, node: cst.CSTNode, name: str):
        """(symbol table, its owner node) where `name` is bound as seen from `node`; False when nowhere;
        None when a scope around `node` cannot be matched to a symbol table."""
        owners = []
        current = node if node is self.module else self._scope_owner(node)
        while current is not self.module:
            if not isinstance(current, (cst.FunctionDef, cst.ClassDef)):
                return None
            owners.append(current)
            current = self._scope_owner(current)
        if self._symbols is None:
            return None
        tables: list[tuple[symtable.SymbolTable, cst.CSTNode]] = [(self._symbols, self.module)]
        for scope_owner in reversed(owners):
            line = self.line(self.span(scope_owner.name)[0])
            kind = "class" if isinstance(scope_owner, cst.ClassDef) else "function"
            matches = [
                table
                for table in tables[-1][0].get_children()
                if table.get_type() == kind and table.get_name() == scope_owner.name.value and table.get_lineno() == line
            ]
            if len(matches) != 1:
                return None
            tables.append((matches[0], scope_owner))
        innermost = len(tables) - 1
        for depth in range(innermost, -1, -1):
            table, owner = tables[depth]
            if depth != innermost and table.get_type() == "class":
                continue  # a class body's names are not seen from the functions inside it
            try:
                symbol = table.lookup(name)
            except KeyError:
                continue
            if symbol.is_global() and depth:
                depth = 0
                table, owner = tables[0]
                try:
                    symbol = table.lookup(name)
                except KeyError:
                    return False
            if symbol.is_assigned() or symbol.is_imported() or symbol.is_parameter() or symbol.is_namespace():
                return table, owner
            if depth == 0:
                break
        if name in self._globals:
            return tables[0]  # `global name` and an assignment in some function bind it at module level
        return False

    @cached_property
    def _symbols(self) -> symtable.SymbolTable | None:
        try:
            return symtable.symtable(self.source[self.bom :].decode("utf-8"), "<source>", "exec")
        except (SyntaxError, ValueError):
            return None

    @cached_property
    def _globals(self) -> frozenset[str]:
        """Names some function declares `global` and assigns."""
        names: set[str] = set()
        stack = list(self._symbols.get_children()) if self._symbols is not None else []
        while stack:
            table = stack.pop()
            stack += table.get_children()
            names.update(s.get_name() for s in table.get_symbols() if s.is_declared_global() and s.is_assigned())
        return frozenset(names)

    def at_module_level(self, node: cst.CSTNode) -> bool:
        """True when no function, class or lambda encloses `node`."""
        return not any(
            isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda))
            for ancestor in self.ancestors(node)
        )


@lru_cache(maxsize=1)
def _walk() -> Callable[[dict[cst.CSTNode, cst.CSTNode], list[cst.CSTNode]], cst.CSTVisitor]:
    """The visitor class, made on first use (it derives from libcst's, imported then)."""

    class _Walk(cst.CSTVisitor):
        """Record each node's parent and the order nodes appear in."""

        def __init__(self, parents: dict[cst.CSTNode, cst.CSTNode], order: list[cst.CSTNode]) -> None:
            self._parents = parents
            self._order = order
            self._stack: list[cst.CSTNode] = []

        def on_visit(self, node: cst.CSTNode) -> bool:
            if self._stack:
                self._parents[node] = self._stack[-1]
            self._order.append(node)
            self._stack.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            self._stack.pop()

    return _Walk


def parse_gate_expression(text: str) -> cst.BaseExpression:
    """A gate's expression text, parsed; raises cst.ParserSyntaxError. A gate black's split laid over several
    lines inside the test's parentheses (`if (` / `not P` / `and not Q` / `and ready` / `):`, the parentheses
    not the gate's) reads only inside parentheses, so it is read inside them when it does not read alone."""
    try:
        return cst.parse_expression(text.strip())
    except cst.ParserSyntaxError:
        return cst.parse_expression("(\n" + text.strip() + "\n)")


def admits_of_expression(
    text: str, universe: tuple[Arch, ...], majors: Callable[[cst.BaseExpression], set[int] | None]
) -> ArchSet:
    """The archs a gate's expression text admits, given how to read its majors; unknown when unreadable."""
    try:
        found = majors(parse_gate_expression(text))
    except cst.ParserSyntaxError:
        found = None
    if found is None:
        return ArchSet(universe, frozenset(), frozenset(universe))
    return ArchSet(universe, frozenset(a for a in universe if a.major in found))
