"""Who uses a JIT module: the ways into the function that makes its spec, and the arch gate on each way.

A spec's `supported_major_versions` list keeps its module from an arch, but
the list is what the arch is missing only if some code the arch runs asks
for the module. FlashInfer's `moe_utils` is listed for `[10]`; its only ways
in are `cute_dsl_fused_moe_nvfp4` and `CuteDslMoEWrapper`, both
`@supported_compute_capability([100, 103])` (their CuTe DSL kernels use
tcgen05), and `aot.py`'s `if has_sm100f:`. Widening the list alone gives
sm_121 a module nothing on sm_121 calls.

`ways_in` walks from the spec's function up through its callers (by name,
over the package's Python files) and stops on each way at the first arch
gate that decides it:

- an `if` whose test is a gate (`if has_sm100f:`),
- a decorator gate on the enclosing function,
- a decorator gate on `__init__` of the enclosing function's class (no
  instance exists on an arch its constructor refuses).

A way with no gate ends at module-level code, at a function a package
`__init__.py` exports, or at a reference that is not a call (a registry, a
callback): it is *ungated*. A function nothing calls and nothing exports is
no way in. Re-exports of the spec functions themselves (`flashinfer.jit`
lists every `gen_*_module`) are not uses.

`calls` finds the references to one module-level function over the
package's Python files, under the names its importers give it
(`from .compat import get_max_tmem_alloc_cols as _get_max_tmem_alloc_cols`),
so a caller's arguments can be read (audit.map_callers). Pure: files come
through `read`.
"""

from __future__ import annotations

import ast
import bisect
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from codemods.core.pytrees import ParsedFiles
from codemods.gates.python import tree_index

_SPEC_FUNCTION_RE = re.compile(r"^gen_\w+_module$")
_MAX_DEPTH = 8  # callers followed up from the spec's function
_MAX_NAMES = 64  # distinct names followed before giving up (a common method name fans out)


@dataclass(frozen=True)
class Way:
    """One way into a module: where it ends (a gate's file and line, or an ungated place) and through what."""

    file: str
    line: int
    function: str  # the function (or `<module>`) where the way ends
    gated: bool  # whether a gate at (file, line) decides this way


class Trees:
    """The Python files of a scan for every `ways_in` and `calls`: their bytes, which of them hold a word, and their
    syntax trees (through `parsed`, the scan's one ParsedFiles, within its memory budget).

    `find(literal)` says which of `files` hold the bytes `literal` (the scan's finder: one rg search per word
    over the package, where reading every file for each word kept 114 MB of FlashInfer 0.7.4 in memory;
    `find_each` does it for the words a reader knows it will ask about, in one search: `prefetch`);
    without it, or for another file or a word that is not ASCII, the file is read and looked in.
    """

    def __init__(
        self, read: Callable[[str], bytes], parsed: ParsedFiles | None = None, files: Iterable[str] = (),
        find: Callable[[bytes], set[str]] | None = None, find_each: Callable[[list[bytes]], dict[bytes, set[str]]] | None = None,
    ) -> None:
        self._read = read
        self.parsed = parsed if parsed is not None else ParsedFiles()
        self._find = find
        self._find_each = find_each
        self._files = frozenset(files) if find is not None else frozenset()
        self._holding: dict[bytes, frozenset[str]] = {}
        self._last: tuple[str, bytes] | None = None  # the file read last: its tree is asked for next

    def source(self, rel: str) -> bytes:
        entry = self.parsed.held(rel)
        if entry is not None:
            return entry[0]
        if self._last is None or self._last[0] != rel:
            try:
                data = self._read(rel)
            except OSError:
                data = b""
            self._last = (rel, data)
        return self._last[1]

    def tree(self, rel: str) -> ast.Module | None:
        return self.parsed.file(rel, lambda: self.source(rel))

    def holds(self, rel: str, literal: bytes) -> bool:
        """Whether the file's bytes may hold `literal`: from `find` a superset (a file rg could not read counts)."""
        if rel in self._files and literal.isascii():
            if literal not in self._holding:
                assert self._find is not None  # _files is empty without it
                self._holding[literal] = frozenset(self._find(literal))
            return rel in self._holding[literal]
        return literal in self.source(rel)

    def prefetch(self, literals: Iterable[bytes]) -> None:
        """Ask `find_each` at once which files hold each of `literals` that `holds` will be asked about (one search
        where each word was one); without it, nothing to do."""
        wanted = [literal for literal in dict.fromkeys(literals) if literal.isascii() and literal not in self._holding]
        if self._find_each is not None and self._files and wanted:
            for literal, files in self._find_each(wanted).items():
                self._holding[literal] = frozenset(files)

    def names(self, rel: str, name: str) -> bool:
        """Whether the file's bytes hold `name` as a whole word (an identifier a reference can be)."""
        return self.holds(rel, name.encode()) and _word(name).search(self.source(rel)) is not None


@lru_cache(maxsize=4096)
def _word(name: str) -> re.Pattern[bytes]:
    return re.compile(rb"(?<![\w])" + re.escape(name.encode()) + rb"(?![\w])")


def _referenced(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def ways_in(
    read: Callable[[str], bytes], files: Iterable[str], gates: dict[str, set[int]], function: str,
    trees: Trees | None = None, *, until_ungated: bool = False,
) -> list[Way] | None:
    """The ways into `function` (a spec's function) over the Python `files`; None when they cannot be followed.

    `gates` maps a file to the lines of its Python arch gates (any kind).
    `trees`: the files read and parsed by an earlier call over the same `read` (one per scan).
    `until_ungated`: stop at the first ungated way, which is then the last of the list (for a caller that
    only asks whether every way is gated).
    """
    files = [rel for rel in files if rel.endswith(".py")]
    known = trees if trees is not None else Trees(read)
    ways: list[Way] = []
    todo = [(function, 0)]
    seen = {function}
    while todo:
        name, depth = todo.pop()
        if depth > _MAX_DEPTH or len(seen) > _MAX_NAMES:
            return None
        for rel in files:
            if not known.names(rel, name):
                continue
            module = known.tree(rel)
            if module is None:
                continue
            for node, ancestors in _references(module, known.source(rel), name):
                parent = ancestors[-1] if ancestors else None
                way = _decided(rel, node, ancestors, gates.get(rel, set()))
                if way is not None:
                    ways.append(way)
                    continue
                enclosing = _enclosing_function(ancestors)
                called = isinstance(parent, ast.Call) and parent.func is node
                if enclosing is None or not called:
                    ways.append(Way(rel, getattr(node, "lineno", 0), enclosing.name if enclosing else "<module>", False))
                    if until_ungated:
                        return ways
                else:
                    caller = _caller_name(enclosing, ancestors)
                    if caller not in seen:
                        seen.add(caller)
                        todo.append((caller, depth + 1))
                        if depth + 1 > _MAX_DEPTH or len(seen) > _MAX_NAMES:
                            return None  # what popping it gives: the files left would change nothing
        if depth > 0 and not _SPEC_FUNCTION_RE.match(name):
            ways += [Way(rel, line, name, False) for rel, line in _exports(files, known, name)]
            if until_ungated and ways and not ways[-1].gated:
                return ways
    return ways


def _references(module: ast.Module, data: bytes, name: str) -> list[tuple[ast.AST, list[ast.AST]]]:
    """Every name or attribute `name` in the module, with the nodes around it (outermost first, the module too),
    in source-walk order. Only the nodes whose lines hold the word are entered (a reference sits on such a line);
    a definition's decorators lie above its first line, so its lines start at them."""
    lines: list[int] = []
    line, counted = 1, 0
    for match in _word(name).finditer(data):
        line += data.count(b"\n", counted, match.start())
        counted = match.start()
        if not lines or lines[-1] != line:
            lines.append(line)
    found: list[tuple[ast.AST, list[ast.AST]]] = []
    _visit_references(module, name, lines, [module], found)
    return found


def _visit_references(node: ast.AST, name: str, lines: list[int], stack: list[ast.AST], found: list) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Name):
            if child.id == name:
                found.append((child, list(stack)))
            continue
        if not _holds(child, lines):
            continue
        if isinstance(child, ast.Attribute) and child.attr == name:
            found.append((child, list(stack)))
        stack.append(child)
        _visit_references(child, name, lines, stack, found)
        stack.pop()


def _holds(node: ast.AST, lines: list[int]) -> bool:
    """Whether the node's lines (its decorators' too) hold one of `lines`."""
    first = getattr(node, "lineno", None)
    if first is None:
        return True  # arguments, comprehensions, with-items and the like carry no lines: look inside
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        first = min(first, *(d.lineno for d in decorators))
    last = getattr(node, "end_lineno", None) or first
    i = bisect.bisect_left(lines, first)
    return i < len(lines) and lines[i] <= last


def _enclosing_function(ancestors: list[ast.AST]) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for node in reversed(ancestors):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


def _caller_name(function: ast.FunctionDef | ast.AsyncFunctionDef, ancestors: list[ast.AST]) -> str:
    """The name callers use for `function`: its own, or its class's for `__init__` (`Wrapper(...)` calls it)."""
    position = next(i for i in range(len(ancestors) - 1, -1, -1) if ancestors[i] is function)
    owner = ancestors[position - 1] if position else None
    if function.name == "__init__" and isinstance(owner, ast.ClassDef):
        return owner.name
    return function.name


def _decorator_gate(function: ast.FunctionDef | ast.AsyncFunctionDef, lines: set[int]) -> int | None:
    if not function.decorator_list:
        return None
    first = min(d.lineno for d in function.decorator_list)
    return next((line for line in sorted(lines) if first <= line < function.lineno), None)


def _decided(rel: str, node: ast.AST, ancestors: list[ast.AST], lines: set[int]) -> Way | None:
    """The gate that decides whether the reference at `node` runs: an enclosing `if`, a decorator, a gated class."""
    for position in range(len(ancestors) - 1, -1, -1):
        holder = ancestors[position]
        if isinstance(holder, (ast.FunctionDef, ast.AsyncFunctionDef)):
            line = _decorator_gate(holder, lines)
            if line is not None:
                return Way(rel, line, holder.name, True)
            owner = ancestors[position - 1] if position else None
            if isinstance(owner, ast.ClassDef):
                for member in owner.body:
                    if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and member.name == "__init__":
                        line = _decorator_gate(member, lines)
                        if line is not None:
                            return Way(rel, line, f"{owner.name}.__init__", True)
            return None
        if isinstance(holder, ast.If):
            child = ancestors[position + 1] if position + 1 < len(ancestors) else node
            if any(child is statement for statement in holder.body):
                test = range(holder.test.lineno, (holder.test.end_lineno or holder.test.lineno) + 1)
                line = next((line for line in sorted(lines) if line in test), None)
                if line is not None:
                    function = _enclosing_function(ancestors[:position])
                    return Way(rel, line, function.name if function else "<module>", True)
    return None


def _exports(files: list[str], known: Trees, name: str) -> list[tuple[str, int]]:
    """Where a package `__init__.py` imports `name` (a public way in that nothing in the package calls)."""
    out = []
    for rel in files:
        if posixpath.basename(rel) != "__init__.py" or not known.holds(rel, name.encode()):
            continue
        module = known.tree(rel)
        for node in tree_index.index(module).of_type(ast.ImportFrom) if module is not None else ():
            if isinstance(node, ast.ImportFrom) and any(alias.name == name for alias in node.names):
                out.append((rel, node.lineno))
    return out


@dataclass(frozen=True)
class Reference:
    """A reference to a function: where, and the call it is the callee of (None: not a call, e.g. a callback)."""

    file: str
    line: int
    call: ast.Call | None


def calls(known: Trees, files: Iterable[str], defining: str, function: str) -> Iterator[Reference | None]:
    """The references to `function`, defined at module level in the file `defining`, over the Python `files`
    (read and parsed through `known`, the scan's one `Trees`), file by file as found: a reader that has seen
    enough stops there, and the files after it are never parsed (FlashInfer 0.7.4's `spec` is named in 1,982
    files). A None means a package `__init__.py` exports it (anyone may call it); nothing follows it.

    A reference counts when its name is bound to `function`: in `defining`
    itself, by `from <its module> import function [as name]`, or as
    `<its module>.function`; a name bound by another import, or defined in the
    file, is another function (`cute.arch.get_max_tmem_alloc_cols` is CuTe's).
    A name codemod cannot bind (`self.function`, a star import) counts.
    """
    ours = _module_parts(defining) + [function]
    for rel in files:
        if not rel.endswith(".py"):
            continue
        if not known.holds(rel, function.encode()):
            continue
        module = known.tree(rel)
        if module is None:
            continue
        source = known.source(rel)
        bound = _imports(module, rel)  # local name -> the dotted name it is bound to
        local = {alias for alias, target in bound.items() if _same(target, ours)}
        if local and posixpath.basename(rel) == "__init__.py":
            yield None
            return
        defined = rel != defining and any(
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == function
            for node in module.body
        )
        references = [found for name in sorted({function, *local}) for found in _references(module, source, name)]
        references.sort(key=lambda found: (getattr(found[0], "lineno", 0), getattr(found[0], "col_offset", 0)))
        for node, ancestors in references:
            if isinstance(node, ast.Name):
                if node.id in local:
                    pass
                elif node.id != function or defined or node.id in bound:
                    continue
            elif isinstance(node, ast.Attribute) and node.attr == function:
                chain = _chain(node.value)
                if chain is not None and chain[0] in bound and not _same([*bound[chain[0]], *chain[1:], function], ours):
                    continue
            else:
                continue
            parent = ancestors[-1] if ancestors else None
            call = parent if isinstance(parent, ast.Call) and parent.func is node else None
            yield Reference(rel, getattr(node, "lineno", 0), call)


def _module_parts(rel: str) -> list[str]:
    parts = rel[: -len(".py")].split("/") if rel.endswith(".py") else rel.split("/")
    return parts[:-1] if parts and parts[-1] == "__init__" else parts


def _same(target: list[str], ours: list[str]) -> bool:
    """Whether the dotted name `target` an import binds is `ours` (a suffix of it: the tree may sit under a
    source folder, `python/sglang/...`, that absolute imports do not name)."""
    return bool(target) and len(target) <= len(ours) and ours[len(ours) - len(target):] == target


def _chain(node: ast.expr) -> list[str] | None:
    """`a.b.c` as [a, b, c]; None when it does not start with a name (a call's result, a subscript)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    return [node.id, *parts] if isinstance(node, ast.Name) else None


def _imports(module: ast.Module, rel: str) -> dict[str, list[str]]:
    """The names a file's imports bind, each with the dotted name it stands for (relative imports resolved)."""
    package = _module_parts(rel) if posixpath.basename(rel) == "__init__.py" else _module_parts(rel)[:-1]
    out: dict[str, list[str]] = {}
    for node in tree_index.index(module).of_type(ast.Import, ast.ImportFrom):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out[alias.asname] = alias.name.split(".")
                else:
                    out[alias.name.split(".")[0]] = alias.name.split(".")[:1]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level - 1 <= len(package) else []
            else:
                base = []
            source = base + (node.module.split(".") if node.module else [])
            for alias in node.names:
                if alias.name != "*":
                    out[alias.asname or alias.name] = [*source, alias.name]
    return out


# ---------------------------------------------------------------- who imports a module of a folder without __init__.py


def importer(known: Trees, files: Iterable[str], rel: str, copy: str, roots: Iterable[str] = (".",)) -> tuple[str, int] | None:
    """A file outside the folder `copy` that imports the module `rel` (or names its dotted path in a string,
    `importlib.import_module("pkg.sub.mod")`), as (file, line); None when none of `files` does. A folder without
    `__init__.py` is still importable (a namespace package, PEP 420): tests import `from pkg.sub import mod`.
    The module's dotted name is its path from one of `roots` (the folders on sys.path: the tree's top, the one
    holding the package): `cutlass.cute.mma` names the installed CuTe DSL, not a copy under `flashinfer/data`.
    A file that does not parse may import it: (file, 0)."""
    parts = _module_parts(rel)
    names = {tuple(parts)} | {
        tuple(parts[len(top):]) for root in roots if root not in (".", "") and parts[: len(top := root.split("/"))] == top
    }  # fmt: skip
    # a file outside the folder names the module and the folder holding it (`from .gemm import mod`, `pkg.gemm.mod`)
    words = parts[-2:]
    folder, module = (re.escape(word).encode() for word in words)  # `gemm.mod`, `gemm import (a, mod)`: then parse
    near = re.compile(rb"\b%s\s*(?:\.\s*|\s+import\b[^;]{0,5000}?\b)%s\b" % (folder, module))
    for other in files:
        if other == rel or other.startswith(copy + "/") or not other.endswith(".py"):
            continue
        if not all(known.holds(other, word.encode()) for word in words) or not near.search(known.source(other)):
            continue
        tree = known.tree(other)
        if tree is None:
            return other, 0
        data = known.source(other)
        lines = {data.count(b"\n", 0, match.start()) + 1 for match in _word(parts[-1]).finditer(data)}
        for node in _nodes_on(tree, lines):
            if any(tuple(dotted) in names for dotted in _imported(node, other)):
                return other, getattr(node, "lineno", 0)
    return None


def _nodes_on(tree: ast.AST, lines: set[int]) -> Iterator[ast.AST]:
    """The nodes of `tree` whose lines hold one of `lines` (a whole-tree walk of each file costs seconds)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        first = getattr(node, "lineno", None)
        if first is not None and not any(first <= line <= (node.end_lineno or first) for line in lines):  # type: ignore[attr-defined]
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _imported(node: ast.AST, rel: str) -> Iterator[list[str]]:
    """The dotted names `node` imports (or names as a string that could be one), relative imports resolved."""
    if isinstance(node, ast.Import):
        yield from (alias.name.split(".") for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        package = _module_parts(rel)[: -1 if posixpath.basename(rel) != "__init__.py" else None]
        base = package[: len(package) - (node.level - 1)] if node.level and node.level - 1 <= len(package) else []
        source = base + (node.module.split(".") if node.module else [])
        yield source  # `from pkg.sub.mod import f` imports pkg.sub.mod
        yield from ([*source, alias.name] for alias in node.names if alias.name != "*")  # `from pkg.sub import mod`
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _DOTTED_RE.fullmatch(node.value):
        yield node.value.split(".")


_DOTTED_RE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
