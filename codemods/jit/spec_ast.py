"""The index of a JIT spec file read with Python's `ast`: one walk, in libcst's (source) order.

Several times faster than libcst; input it cannot vouch to read as libcst
does raises `Unsupported`, and `codemods.jit.specs.find` asks libcst instead.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from codemods.gates import decode
from codemods.gates.python import python_arch_list
from codemods.gates.python.layout.text import LONE_CR, TRIVIA
from codemods.jit.spec_index import FLAGS_RE, ROOTS, SOURCE_SUFFIXES, Index, SpecCall, Unsupported, may_name_source, names_source

_BOM = "\ufeff"
_NON_ASCII = re.compile(rb"[\x80-\xff]+")
# One string literal token; an f-string is one token too (before Python 3.12).
_STRING = re.compile(
    rb"[A-Za-z]{0,2}(?:"
    rb"'''(?:[^'\\]|\\.|'(?!''))*'''"
    rb'|"""(?:[^"\\]|\\.|"(?!""))*"""'
    rb"|'(?:[^'\\\r\n]|\\(?:\r\n|.))*'"
    rb'|"(?:[^"\\\r\n]|\\(?:\r\n|.))*"'
    rb")",
    re.DOTALL,
)
_WORD = re.compile(rb"\w+")
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_NOT_CHILDREN = {"ctx", "op", "ops"}  # shared singletons (Load(), Add() ...), never a gate
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_NAME, _CONSTANT = ast.Name, ast.Constant
# Node kinds of newer Pythons: type parameters (3.12), t-strings (3.14).
_TYPE_PARAMETERS = tuple(getattr(ast, name) for name in ("TypeVar", "ParamSpec", "TypeVarTuple") if hasattr(ast, name))
_TEMPLATE_STRINGS = tuple(getattr(ast, name) for name in ("TemplateStr",) if hasattr(ast, name))


_Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class _Flag:
    """An `smXXa_nvcc_flags` name, where it is, and the `x = ...` statement around it, if any."""

    name: str
    match: re.Match[str]
    line: int
    index: int  # pre-order index of the node that holds the name
    function: str
    assign: tuple[list[str], _Function | None] | None  # the statement's plain name targets, its function if its body


class AstIndex(Index):
    """The index read with Python's `ast`, in one walk that visits nodes in libcst's (source) order.

    ast columns are UTF-8 byte offsets in their line, so with the line starts (after a BOM on line
    1) they give the same byte spans libcst does. Where the two trees differ, the source bytes
    decide: `"a" "b"` is one Constant in ast but one SimpleString per piece in libcst. Input whose
    reading this cannot vouch for (a non-ASCII name, a gate inside an f-string ...) raises
    `Unsupported`.
    """

    def __init__(self, source: bytes) -> None:
        text = decode(source)
        bom = len(_BOM.encode()) if text.startswith(_BOM) else 0
        if b"\r" in source and LONE_CR.search(source):
            raise Unsupported  # Python's tokenizer ends a line there, line numbers here do not
        try:
            tree = ast.parse(text[1:] if bom else text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise Unsupported from None
        self.source = source
        self._starts = [bom] + [match.end() for match in re.finditer(b"\n", source)]
        self._count = 0
        self._function = ""
        self._fstring = 0  # how deep inside f-strings (before 3.12 ast computes positions there after the fact)
        self._assign: tuple[list[str], _Function | None] | None = None
        self._in_spec = 0  # how deep inside gen_jit_spec calls
        self._ranges: dict[int, tuple[int, int]] = {}  # id(node) -> its pre-order index, the index past its subtree
        self._callees = {}
        self._calls: list[tuple[ast.Call, str]] = []
        self._lists: dict[str, list[tuple[list[int] | None, str, int]]] = {}
        self._flags: list[_Flag] = []
        self._paths: list[tuple[int, str, tuple[str, str]]] = []
        self._strings: list[tuple[int, str, str]] = []
        self._covered: set[int] = set()
        self._literals: list[ast.expr] = []  # string literals and f-strings, outside f-strings
        self._block_bodies: dict[int, bool] = {}
        self._visit(tree, None)
        for gate in python_arch_list.find(source, tree=tree):
            self._lists.setdefault(gate.context, []).append((gate.detail["majors"], gate.text, gate.line))
        if not source.isascii() and not self._ascii_names(bom):
            raise Unsupported  # ast normalizes a non-ASCII name (NFKC), libcst keeps it as written

    def _offset(self, line: int, column: int) -> int:
        return self._starts[line - 1] + column

    def _span(self, node: ast.expr | ast.alias) -> tuple[int, int]:
        end_line, end_column = node.end_lineno, node.end_col_offset
        assert end_line is not None and end_column is not None  # ast.parse gives every node its end
        return self._offset(node.lineno, node.col_offset), self._offset(end_line, end_column)

    def _line(self, offset: int) -> int:
        return bisect_right(self._starts, offset)

    def _visit(self, node: ast.AST, parent: ast.AST | None) -> None:
        index = self._count
        self._count = index + 1
        kind = type(node)
        # `kind is _NAME` (a local name, one type() call) is the hot path; mypy narrows only `type(node) is`
        if kind is _NAME:
            name = cast(ast.Name, node)
            if "_nvcc_flags" in name.id:
                self._name(name.id, name.lineno, index)
        elif kind is _CONSTANT:
            constant = cast(ast.Constant, node)
            value = constant.value
            if type(value) is str:
                if not self._fstring:
                    self._literals.append(constant)
                if ".c" in value or ".h" in value or ".inl" in value or ".jinja" in value:  # may_name_source
                    self._string_literal(constant, parent, index)
            elif type(value) is bytes and not self._fstring:
                self._literals.append(constant)
        else:
            read = _READERS.get(kind)
            if read is not None:
                read(self, node, parent, index)
            else:
                visit = self._visit
                fields = _CHILD_FIELDS.get(kind)
                if fields is None:
                    fields = _CHILD_FIELDS[kind] = tuple(f for f in kind._fields if f not in _NOT_CHILDREN)
                for field in fields:
                    value = getattr(node, field, None)
                    if type(value) is list:
                        for item in value:
                            if isinstance(item, ast.AST):
                                visit(item, node)
                    elif isinstance(value, ast.AST):
                        visit(value, node)
        if self._in_spec:
            self._ranges[id(node)] = (index, self._count)

    # How to walk the nodes whose fields ast keeps out of source order, or that hold what `find` reads.

    def _read_attribute(self, node: ast.Attribute, parent: ast.AST | None, index: int) -> None:
        self._visit(node.value, node)
        if "_nvcc_flags" in node.attr:
            line = node.end_lineno
            assert line is not None  # ast.parse gives every node its end
            self._name(node.attr, line, index)

    def _read_call(self, node: ast.Call, parent: ast.AST | None, index: int) -> None:
        func = node.func
        callee = func.id if type(func) is _NAME else func.attr if type(func) is ast.Attribute else ""
        self._callees.setdefault(self._function, set()).add(callee)
        spec = callee == "gen_jit_spec"
        if spec:
            if self._fstring:
                raise Unsupported
            self._calls.append((node, self._function))
            self._in_spec += 1  # the arguments' subtrees are what a spec's paths are looked up in
        self._visit(func, node)
        for argument in _arguments(node):
            self._visit(argument, node)
        if spec:
            self._in_spec -= 1
            self._ranges[id(node)] = (index, self._count)

    def _read_keyword(self, node: ast.keyword, parent: ast.AST | None, index: int) -> None:
        if node.arg is not None:
            self._name(node.arg, node.lineno, index)
        self._visit(node.value, node)

    def _read_binop(self, node: ast.BinOp, parent: ast.AST | None, index: int) -> None:
        if type(node.op) is ast.Div and id(node) not in self._covered:
            path = self._path(node)
            if path is not None:
                self._paths.append((index, self._function, path))
                left = node.left
                while type(left) is ast.BinOp and type(left.op) is ast.Div:
                    self._covered.add(id(left))
                    left = left.left
        self._visit(node.left, node)
        self._visit(node.right, node)

    def _read_fstring(self, node: ast.JoinedStr, parent: ast.AST | None, index: int) -> None:
        self._fstring_literal(node)
        self._fstring += 1
        for value in node.values:
            if type(value) is not _CONSTANT:  # a Constant here is the text between the fields
                self._visit(value, node)
        self._fstring -= 1

    def _read_assign(self, node: ast.Assign, parent: ast.AST | None, index: int) -> None:
        outer = self._assign
        targets = [target.id for target in node.targets if type(target) is _NAME]
        self._assign = (targets, parent if isinstance(parent, _FUNCTIONS) else None)
        for target in node.targets:
            self._visit(target, node)
        self._visit(node.value, node)
        self._assign = outer

    def _read_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, parent: ast.AST | None, index: int) -> None:
        outer = self._function
        self._function = node.name  # libcst: the decorators and the name belong to the function
        for decorator in node.decorator_list:
            self._visit(decorator, node)
        self._unplaced_name(node.name)
        for child in [*getattr(node, "type_params", ()), node.args, *([node.returns] if node.returns else ())]:
            self._visit(child, node)
        for statement in node.body:
            self._visit(statement, node)
        self._function = outer

    def _read_class(self, node: ast.ClassDef, parent: ast.AST | None, index: int) -> None:
        for decorator in node.decorator_list:
            self._visit(decorator, node)
        self._unplaced_name(node.name)
        for child in [*getattr(node, "type_params", ()), *node.bases, *node.keywords, *node.body]:
            self._visit(child, node)

    def _read_arg(self, node: ast.arg, parent: ast.AST | None, index: int) -> None:
        self._name(node.arg, node.lineno, index)
        if node.annotation is not None:
            self._visit(node.annotation, node)

    def _read_arguments(self, node: ast.arguments, parent: ast.AST | None, index: int) -> None:
        positional = node.posonlyargs + node.args
        first_default = len(positional) - len(node.defaults)
        for i, parameter in enumerate(positional):
            self._visit(parameter, node)
            if i >= first_default:
                self._visit(node.defaults[i - first_default], node)
        if node.vararg is not None:
            self._visit(node.vararg, node)
        for parameter, default in zip(node.kwonlyargs, node.kw_defaults):
            self._visit(parameter, node)
            if default is not None:
                self._visit(default, node)
        if node.kwarg is not None:
            self._visit(node.kwarg, node)

    def _read_dict(self, node: ast.Dict, parent: ast.AST | None, index: int) -> None:
        for key, value in zip(node.keys, node.values):
            if key is not None:
                self._visit(key, node)
            self._visit(value, node)

    def _read_ifexp(self, node: ast.IfExp, parent: ast.AST | None, index: int) -> None:
        self._visit(node.body, node)
        self._visit(node.test, node)
        self._visit(node.orelse, node)

    def _read_alias(self, node: ast.alias, parent: ast.AST | None, index: int) -> None:
        """`a.b as c` in an import: each name with its line (`from .core import sm90a_nvcc_flags` in a function)."""
        if "_nvcc_flags" not in node.name and "_nvcc_flags" not in (node.asname or ""):
            return
        start, end = self._span(node)
        text = self.source[start:end]
        if b"#" in text:
            raise Unsupported
        for word in _WORD.finditer(text):
            if word.group() != b"as":
                self._name(word.group().decode(), self._line(start + word.start()), index)

    def _read_import_from(self, node: ast.ImportFrom, parent: ast.AST | None, index: int) -> None:
        for part in (node.module or "").split("."):
            self._unplaced_name(part)
        for alias in node.names:
            self._visit(alias, node)

    def _read_global(self, node: ast.Global | ast.Nonlocal, parent: ast.AST | None, index: int) -> None:
        for name in node.names:
            self._unplaced_name(name)

    def _read_except(self, node: ast.ExceptHandler, parent: ast.AST | None, index: int) -> None:
        if node.type is not None:
            self._visit(node.type, node)
        self._unplaced_name(node.name)
        for statement in node.body:
            self._visit(statement, node)

    def _read_match_as(self, node: ast.MatchAs, parent: ast.AST | None, index: int) -> None:
        if node.pattern is not None:
            self._visit(node.pattern, node)
        self._unplaced_name(node.name)

    def _read_match_star(self, node: ast.MatchStar, parent: ast.AST | None, index: int) -> None:
        self._unplaced_name(node.name)

    def _read_match_mapping(self, node: ast.MatchMapping, parent: ast.AST | None, index: int) -> None:
        for key, pattern in zip(node.keys, node.patterns):
            self._visit(key, node)
            self._visit(pattern, node)
        self._unplaced_name(node.rest)

    def _read_match_class(self, node: ast.MatchClass, parent: ast.AST | None, index: int) -> None:
        self._visit(node.cls, node)
        for pattern in node.patterns:
            self._visit(pattern, node)
        for name, pattern in zip(node.kwd_attrs, node.kwd_patterns):
            self._unplaced_name(name)
            self._visit(pattern, node)

    # node: ast.TypeVar, ParamSpec or TypeVarTuple, kinds of 3.12 that typeshed for 3.11 does not have
    def _read_type_parameter(self, node: Any, parent: ast.AST | None, index: int) -> None:
        self._unplaced_name(node.name)  # 3.12: `def f[T: int]()`
        for field in ("bound", "default_value"):
            if getattr(node, field, None) is not None:
                self._visit(getattr(node, field), node)

    def _read_template(self, node: ast.AST, parent: ast.AST | None, index: int) -> None:
        raise Unsupported  # 3.14 t-strings: read like f-strings, with their own positions

    def _name(self, name: str, line: int, index: int) -> None:
        """A name in an expression, a parameter or a keyword argument: a libcst Name."""
        if "_nvcc_flags" in name and (match := FLAGS_RE.match(name)):
            if self._fstring:
                raise Unsupported
            self._flags.append(_Flag(name, match, line, index, self._function, self._assign))

    def _unplaced_name(self, name: str | None) -> None:
        """A libcst Name ast gives no position for (def, class, global, except ... as, match capture)."""
        if name and self._function and "_nvcc_flags" in name and FLAGS_RE.match(name):
            raise Unsupported

    def _tokens(self, node: ast.Constant | ast.JoinedStr) -> list[bytes]:
        """The string tokens a string node is written as: one, or each piece of `"a" "b"`."""
        at, end = self._span(node)
        tokens = []
        while True:
            match = _STRING.match(self.source, at)
            if match is None or match.end() > end:
                raise Unsupported
            tokens.append(match.group())
            if match.end() == end:
                break
            trivia = TRIVIA.match(self.source, match.end())
            assert trivia is not None  # TRIVIA matches the empty string
            at = trivia.end()
        if self._fstring:
            assert type(node) is ast.Constant  # an f-string inside an f-string returns before reading its tokens
            if "".join(ast.literal_eval(token.decode("utf-8")) for token in tokens) != node.value:
                raise Unsupported  # ast's position inside an f-string is off (Python < 3.12 computes it after the fact)
        return tokens

    def _string_literal(self, node: ast.Constant, parent: ast.AST | None, index: int) -> None:
        """A str Constant that may name a source: one libcst SimpleString, or one per piece of `"a" "b"`."""
        tokens = self._tokens(node)
        if len(tokens) == 1:
            text = node.value
            assert type(text) is str  # _visit reads only str Constants here
            # not a piece of a path under another folder (FlashInfer's generated sources)
            if names_source(text) and not (type(parent) is ast.BinOp and type(parent.op) is ast.Div):
                self._strings.append((index, self._function, text))
            return
        for token in tokens:  # each piece's parent in libcst is the ConcatenatedString, never a `/`
            value = ast.literal_eval(token.decode("utf-8"))
            if names_source(value):
                self._strings.append((index, self._function, value))

    def _fstring_literal(self, node: ast.JoinedStr) -> None:
        """An f-string; a plain piece concatenated to it (`"a.cu" f"{x}"`) would be a libcst SimpleString."""
        if self._fstring:
            if any(type(value) is ast.Constant and may_name_source(_text(value)) for value in node.values):
                raise Unsupported
            return
        self._literals.append(node)
        if not any(type(value) is ast.Constant and may_name_source(_text(value)) for value in node.values):
            return
        for token in self._tokens(node):
            prefix = token[: len(token) - len(token.lstrip(b"rRbBuUfF"))]
            if b"f" not in prefix.lower() and names_source(ast.literal_eval(token.decode("utf-8"))):
                raise Unsupported

    def _string(self, node: object | None) -> str | None:
        if type(node) is ast.Constant and type(node.value) is str and len(self._tokens(node)) == 1:
            return node.value
        return None

    def _path(self, node: ast.AST) -> tuple[str, str] | None:
        """`ROOT / "a" / "b.cu"` (ROOT one of the FlashInfer dirs) as (root, "a/b.cu"); None otherwise."""
        pieces: list[str] = []
        while type(node) is ast.BinOp and type(node.op) is ast.Div:
            piece = self._string(node.right)
            if piece is None:
                return None
            pieces.append(piece)
            node = node.left
        head = node.attr if type(node) is ast.Attribute else node.id if type(node) is ast.Name else ""
        if head not in ROOTS:
            return None
        return ROOTS[head], "/".join(reversed(pieces)).strip("/")

    def _ascii_names(self, bom: int) -> bool:
        """Whether every non-ASCII byte is in a string literal (not an f-string: its fields hold names) or a comment."""
        spans = sorted((*self._span(node), type(node) is ast.JoinedStr) for node in self._literals)
        starts = [start for start, _, _ in spans]

        def literal(offset: int) -> tuple[int, int, bool] | None:
            i = bisect_right(starts, offset) - 1
            return spans[i] if i >= 0 and offset < spans[i][1] else None

        source = self.source
        for run in _NON_ASCII.finditer(source, bom):
            offset = run.start()
            if (around := literal(offset)) is not None:
                if around[2]:
                    return False
                continue
            comment = source.find(b"#", source.rfind(b"\n", 0, offset) + 1, offset)
            while comment >= 0 and literal(comment) is not None:
                comment = source.find(b"#", comment + 1, offset)
            if comment < 0:
                return False
        return True

    def calls(self) -> Iterator[SpecCall]:
        for node, function in self._calls:
            positional = []
            keywords: dict[str, ast.AST] = {}
            for argument in _arguments(node):
                if isinstance(argument, ast.keyword):
                    if argument.arg is None:
                        positional.append(argument.value)  # `**kwargs` is a libcst Arg without keyword
                    else:
                        keywords[argument.arg] = argument.value
                else:
                    positional.append(argument.value if type(argument) is ast.Starred else argument)
            yield SpecCall(
                node=node,
                function=function,
                line=node.lineno,
                name=positional[0] if positional else keywords.get("name"),
                sources=positional[1] if len(positional) > 1 else keywords.get("sources"),
                include=keywords.get("extra_include_paths"),
            )

    def string(self, node: object | None) -> str | None:
        return self._string(node)

    def is_list(self, node: object | None) -> bool:
        return type(node) is ast.List or type(node) is ast.Tuple

    def _inside(self, index: int, container: object) -> bool:
        start, end = self._ranges[id(container)]
        return start <= index < end

    def paths(
        self, *, within: object | None = None, function: str = "", dirs: bool = False, loose: bool = False
    ) -> list[tuple[str, str]]:
        def wanted(index: int, owner: str) -> bool:
            return self._inside(index, within) if within is not None else owner == function

        found = [
            path
            for index, owner, path in self._paths
            if (dirs or path[1].endswith(SOURCE_SUFFIXES)) and wanted(index, owner)
        ]
        if loose:
            found += [("csrc", value) for index, owner, value in self._strings if wanted(index, owner)]
        return found

    def lists(self, function: str) -> Iterable[tuple[list[int] | None, str, int]]:
        return self._lists.get(function, [])

    def flags(self, function: str, call: object | None) -> Iterator[tuple[str, re.Match[str], int]]:
        passed: set[str] | None = None
        for flag in self._flags:
            if flag.function != function:
                continue
            if call is not None and not self._inside(flag.index, call):
                assert isinstance(call, ast.AST)  # the calls this index yields are its ast.Call nodes
                if passed is None:
                    passed = _names_in(call)
                if not self._assigned_to(flag, passed):
                    continue
            yield flag.name, flag.match, flag.line

    def _assigned_to(self, flag: _Flag, passed: set[str]) -> bool:
        """Whether the flag is in a plain `x = ...` statement of the function body itself whose `x` the call uses."""
        if flag.assign is None:
            return False
        targets, function = flag.assign
        if function is None or not self._block_body(function):
            return False  # inside an if/for/with: the flags may not always apply
        return any(target in passed for target in targets)

    def _block_body(self, function: _Function) -> bool:
        """Whether the function's body is an indented block, not statements after its colon (`def f(): x = 1`)."""
        key = id(function)
        if key not in self._block_bodies:
            first = function.body[0]
            start = self._offset(first.lineno, first.col_offset)
            line_start = self.source.rfind(b"\n", 0, start) + 1
            if self.source[line_start:start].strip():
                self._block_bodies[key] = False
            elif self.source[max(line_start - 3, 0) : line_start].rstrip(b"\r\n").endswith(b"\\"):
                raise Unsupported  # a continued line: the body may follow the colon
            else:
                self._block_bodies[key] = True
        return self._block_bodies[key]


_READERS: dict[type, Callable[[AstIndex, Any, ast.AST | None, int], None]] = {
    ast.Attribute: AstIndex._read_attribute,
    ast.Call: AstIndex._read_call,
    ast.keyword: AstIndex._read_keyword,
    ast.BinOp: AstIndex._read_binop,
    ast.JoinedStr: AstIndex._read_fstring,
    ast.Assign: AstIndex._read_assign,
    ast.FunctionDef: AstIndex._read_function,
    ast.AsyncFunctionDef: AstIndex._read_function,
    ast.ClassDef: AstIndex._read_class,
    ast.arg: AstIndex._read_arg,
    ast.arguments: AstIndex._read_arguments,
    ast.Dict: AstIndex._read_dict,
    ast.IfExp: AstIndex._read_ifexp,
    ast.alias: AstIndex._read_alias,
    ast.ImportFrom: AstIndex._read_import_from,
    ast.Global: AstIndex._read_global,
    ast.Nonlocal: AstIndex._read_global,
    ast.ExceptHandler: AstIndex._read_except,
    ast.MatchAs: AstIndex._read_match_as,
    ast.MatchStar: AstIndex._read_match_star,
    ast.MatchMapping: AstIndex._read_match_mapping,
    ast.MatchClass: AstIndex._read_match_class,
    **dict.fromkeys(_TYPE_PARAMETERS, AstIndex._read_type_parameter),
    **dict.fromkeys(_TEMPLATE_STRINGS, AstIndex._read_template),
}


def _text(piece: ast.Constant) -> str:
    """The text of an f-string's literal piece."""
    return cast(str, piece.value)  # an f-string's Constant pieces always hold str; typeshed types value for any Constant


def _arguments(call: ast.Call) -> Sequence[ast.expr | ast.keyword]:
    """A call's arguments in source order: ast keeps keywords apart, and `f(a=1, *b)` is valid."""
    if call.args and call.keywords:
        return sorted([*call.args, *call.keywords], key=lambda node: (node.lineno, node.col_offset))
    return call.args or call.keywords


def _names_in(node: ast.AST) -> set[str]:
    """Every name in an expression, as libcst's Name nodes spell them."""
    names = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            names.add(child.id)
        elif isinstance(child, ast.Attribute):
            names.add(child.attr)
        elif isinstance(child, ast.keyword):
            if child.arg is not None:
                names.add(child.arg)
        elif isinstance(child, ast.arg):
            names.add(child.arg)
    return names
