"""The stdlib `ast` side of the Python gate kinds: one tree per source, how deep it nests, where its nodes are.

`ast_of` parses a source once while the last sources' trees fit pytrees' budget,
and every reader of it shares the tree; `check_depth` refuses source nested
deeper than libcst can walk (MAX_DEPTH) before libcst ever sees it;
`PythonText` turns ast positions (UTF-8 byte columns) into byte offsets;
`defines` asks Python's own symbol table what a module binds; `called` and
`dotted` name what a call calls and what a chain of attributes spells.
"""

from __future__ import annotations

import ast
import bisect
import re
import symtable
from collections.abc import Mapping

from codemods.core.pytrees import ParsedFiles
from codemods.gates import SourceError, TooDeep, decode

_BOM = "\ufeff"
# Deeper than this, libcst's tree walks run out of Python stack, and far deeper its native parser
# crashes the process (SIGSEGV). CPython refuses more than 200 nested brackets; the Python files
# of FlashInfer 0.5.3-0.6.17 and SGLang 0.5.13 nest at most 46 levels (measured as check_depth does).
MAX_DEPTH = 64
# The statements with bodies of their own (a pruned one keeps its header; a scope may start there).
COMPOUND: tuple[type[ast.stmt], ...] = (
    ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
    ast.AsyncFunctionDef, ast.ClassDef, ast.Match, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()),
)  # fmt: skip
# Brackets outside comments and string literals, for source Python's own parser rejects.
_BRACKETS = re.compile(
    r"#[^\r\n]*|'''.*?(?:'''|\Z)|\"\"\".*?(?:\"\"\"|\Z)|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\"|([(\[{])|[)\]}]",
    re.DOTALL,
)


def defines(source: bytes, name: str) -> bool | None:
    """Whether the module binds `name` at its top level: a def, a class, an assignment or an import (not `*`).

    Python's own symbol table answers it, without libcst; None (no answer) for a file this Python does not
    parse, one written for a later Python say.
    """
    try:
        text = decode(source)
        table = symtable.symtable(text[1:] if text.startswith(_BOM) else text, "<source>", "exec")
    except (SourceError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        symbol = table.lookup(name)
    except KeyError:
        return False
    return symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace()


def too_deep(exc: BaseException) -> bool:
    """Whether Python's parser gave up on the source for its nesting rather than its syntax."""
    if isinstance(exc, (RecursionError, MemoryError)):  # MemoryError: the parser's own stack limit
        return True
    return isinstance(exc, SyntaxError) and "too many nested" in str(exc.msg)


def nested_too_deeply(line: int | None = None) -> TooDeep:
    where = f": line {line}" if line else ""
    return TooDeep(f"nested too deeply{where} (codemod reads at most {MAX_DEPTH} levels)")


def _utf8_tree(source: bytes) -> ast.Module:
    text = decode(source)
    return ast.parse(text[1:] if text.startswith(_BOM) else text)


_TREES = ParsedFiles(1 << 20, _utf8_tree)  # keyed by the source itself: what one file's readers share


def ast_of(source: bytes) -> ast.Module:
    """The stdlib `ast` of `source` read as UTF-8 (a leading BOM dropped): parsed once per source while the
    last sources' trees fit pytrees' budget, and shared by every reader of it (libcst's depth check here, the
    predicate reader), so read-only. Raises as `ast.parse` does, and SourceError for bytes that are not UTF-8."""
    tree = _TREES.tree(source, source)
    assert tree is not None  # _utf8_tree raises rather than give None
    return tree


def check_depth(source: bytes, text: str) -> ast.Module | None:
    """Raise TooDeep when `source` (read as `text`, its BOM dropped) nests deeper than MAX_DEPTH, before libcst
    ever sees it; else its `ast` tree (`ast_of`).

    Python's own parser measures it (in linear time, and deep input is an error there, not a
    crash); source it rejects for other reasons is measured by its brackets alone (None: no tree).
    """
    try:
        tree = ast_of(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        if too_deep(exc):
            raise nested_too_deeply(getattr(exc, "lineno", None)) from None
        depth = 0
        for match in _BRACKETS.finditer(text):
            if match.group(1):
                depth += 1
                if depth > MAX_DEPTH:
                    raise nested_too_deeply(text.count("\n", 0, match.start()) + 1) from None
            elif match.group(0) in ")]}":
                depth = max(depth - 1, 0)
        return None
    stack: list[tuple[ast.AST, int]] = [(node, 1) for node in tree.body]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise nested_too_deeply(getattr(node, "lineno", None))
        if isinstance(node, ast.BoolOp):  # `a or b or c` is one node in ast, a nested pair per `or` in libcst
            stack.extend((child, depth + len(node.values)) for child in node.values)
        else:
            stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree


class PythonText:
    """Byte offsets of ast positions (ast columns are UTF-8 byte offsets)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.bom = len(_BOM.encode()) if data.startswith(_BOM.encode()) else 0
        self.starts = [0]
        for line in data.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, column: int) -> int:
        return self.starts[line - 1] + column + (self.bom if line == 1 else 0)

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)

    def span(self, node: ast.stmt | ast.expr) -> tuple[int, int]:
        # typeshed allows None for end positions, which ast.parse sets on every node it makes
        assert node.end_lineno is not None and node.end_col_offset is not None
        start = self.offset(node.lineno, node.col_offset)
        decorators = getattr(node, "decorator_list", None)
        if decorators:
            first = decorators[0]
            start = self.data.rfind(b"@", 0, self.offset(first.lineno, first.col_offset))
        return start, self.offset(node.end_lineno, node.end_col_offset)


def called(node: ast.Call) -> str:
    """The name a call calls: `f` for `f(...)`, `attr` for `x.y.attr(...)`; "" for anything else (`f()()`)."""
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def dotted(node: ast.AST) -> str:
    """`a.b.c` for a name or a chain of attributes over one; "" for anything else (a call, a subscript)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


ASSIGNMENTS = (ast.Assign, ast.AnnAssign, ast.AugAssign)


def assigned_target(node: ast.AST, up: Mapping[int, ast.AST]) -> str:
    """The target, as written, of the assignment (`=`, annotated, augmented) whose value holds `node` (`flag`
    for `flag = is_sm120a_supported(dev)`, `operations` for `operations += gen(has_arch(120))`); "" outside one.
    `up` maps a node's id to its parent (`polarity.parents`)."""
    child = node
    while (parent := up.get(id(child))) is not None and not isinstance(parent, (ast.stmt, ast.Lambda)):
        child = parent
    if isinstance(parent, ASSIGNMENTS) and parent.value is child:
        return ast.unparse(parent.targets[0] if isinstance(parent, ast.Assign) else parent.target)
    return ""
