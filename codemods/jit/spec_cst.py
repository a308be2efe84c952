"""The index of a JIT spec file read with libcst, for what the ast reading (spec_ast) leaves to it."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import libcst as cst

from codemods.core.arch import Arch
from codemods.gates.python import python_arch_list
from codemods.gates.python.cst_source import PythonSource
from codemods.jit.spec_index import FLAGS_RE, ROOTS, SOURCE_SUFFIXES, Index, SpecCall, names_source

class LibcstIndex(Index):
    """The index read with libcst, for what the ast reading leaves to it (libcst subtree walks are slow)."""

    def __init__(self, parsed: PythonSource, source: bytes, universe: tuple[Arch, ...]) -> None:
        self.parsed = parsed
        self._function: dict[int, str] = {}
        self._callees = {}
        for call in parsed.nodes(cst.Call):
            self._callees.setdefault(self.function_of(call), set()).add(_callee(call))
        self._lists: dict[str, list[tuple[list[int] | None, str, int]]] = {}
        for gate in python_arch_list.find(source, universe):
            self._lists.setdefault(gate.context, []).append((gate.detail.get("majors"), gate.text, gate.line))
        self._flags = [(name, match) for name in parsed.nodes(cst.Name) if (match := FLAGS_RE.match(name.value))]
        self._paths: list[tuple[cst.CSTNode, tuple[str, str]]] = []
        self._strings: list[tuple[cst.CSTNode, str]] = []
        covered: set[int] = set()
        for node in parsed.nodes((cst.BinaryOperation, cst.SimpleString)):
            if id(node) in covered:
                continue
            if isinstance(node, cst.BinaryOperation):
                path = _path(node)
                if path is not None:
                    self._paths.append((node, path))
                    covered.update(id(piece) for piece in _pieces(node))
            else:
                value = _string(node)
                parent = parsed.parent(node)
                if (
                    value
                    and names_source(value)
                    # a piece of a path under another folder (FlashInfer's generated sources)
                    and not (isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Divide))
                ):
                    self._strings.append((node, value))

    def function_of(self, node: cst.CSTNode) -> str:
        key = id(node)
        if key not in self._function:
            self._function[key] = self.parsed.enclosing_function(node)
        return self._function[key]

    def inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return node is container or any(ancestor is container for ancestor in self.parsed.ancestors(node))

    def calls(self) -> Iterator[SpecCall]:
        for call in self.parsed.nodes(cst.Call):
            if _callee(call) != "gen_jit_spec":
                continue
            positional = [arg for arg in call.args if arg.keyword is None]
            keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
            yield SpecCall(
                node=call,
                function=self.function_of(call),
                line=self.parsed.line(self.parsed.span(call)[0]),
                name=positional[0].value if positional else keywords.get("name"),
                sources=positional[1].value if len(positional) > 1 else keywords.get("sources"),
                include=keywords.get("extra_include_paths"),
            )

    def string(self, node: object | None) -> str | None:
        return _string(node)

    def is_list(self, node: object | None) -> bool:
        return isinstance(node, (cst.List, cst.Tuple))

    def paths(
        self, *, within: object | None = None, function: str = "", dirs: bool = False, loose: bool = False
    ) -> list[tuple[str, str]]:
        assert within is None or isinstance(within, cst.CSTNode)  # the calls this index yields are libcst nodes

        def wanted(node: cst.CSTNode) -> bool:
            if within is not None:
                return self.inside(node, within)
            return self.function_of(node) == function

        found = [path for node, path in self._paths if (dirs or path[1].endswith(SOURCE_SUFFIXES)) and wanted(node)]
        if loose:
            found += [("csrc", value) for node, value in self._strings if wanted(node)]
        return found

    def lists(self, function: str) -> Iterable[tuple[list[int] | None, str, int]]:
        return self._lists.get(function, [])

    def flags(self, function: str, call: object | None) -> Iterator[tuple[str, re.Match[str], int]]:
        assert call is None or isinstance(call, cst.CSTNode)  # the calls this index yields are libcst nodes
        passed = self._names_in(call) if call is not None else set()
        for name, match in self._flags:
            if self.function_of(name) != function:
                continue
            if call is not None and not self.inside(name, call) and not self._assigned_to(name, passed):
                continue
            yield name.value, match, self.parsed.line(self.parsed.span(name)[0])

    def _names_in(self, node: cst.CSTNode) -> set[str]:
        return {name.value for name in self.parsed.nodes(cst.Name, within=node)}

    def _assigned_to(self, name: cst.Name, passed: set[str]) -> bool:
        """Whether `name` is in a plain `x = ...` statement of the function body itself whose `x` the call uses."""
        for ancestor in self.parsed.ancestors(name):
            if isinstance(ancestor, cst.Assign):
                line = self.parsed.parent(ancestor)
                block = self.parsed.parent(line) if line is not None else None
                if not isinstance(self.parsed.parent(block) if block is not None else None, cst.FunctionDef):
                    return False  # inside an if/for/with: the flags may not always apply
                return any(
                    isinstance(target.target, cst.Name) and target.target.value in passed for target in ancestor.targets
                )
        return False


def _callee(call: cst.Call) -> str:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return ""


def _string(node: object | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _pieces(node: cst.BaseExpression) -> list[cst.CSTNode]:
    """The nodes of a `/` chain: the inner BinaryOperations and the string pieces."""
    pieces: list[cst.CSTNode] = []
    while isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        pieces += [node, node.right]
        node = node.left
    return pieces


def _path(node: cst.BaseExpression) -> tuple[str, str] | None:
    """`ROOT / "a" / "b.cu"` (ROOT one of the FlashInfer dirs) as (root, "a/b.cu"); None otherwise."""
    pieces: list[str] = []
    while isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        piece = _string(node.right)
        if piece is None:
            return None
        pieces.append(piece)
        node = node.left
    if not pieces:
        return None
    head = node.attr.value if isinstance(node, cst.Attribute) else node.value if isinstance(node, cst.Name) else ""
    if head not in ROOTS:
        return None
    return ROOTS[head], "/".join(reversed(pieces)).strip("/")
