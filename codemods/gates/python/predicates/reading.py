"""What an arch predicate admits, read from its definition in the project's source.

FlashInfer and SGLang spell their predicates alike but mean different things:
FlashInfer's `is_sm120a_supported` checks `major == 12 and minor == 0`
(SM120 only), SGLang's `is_sm120_supported` checks the major only (every
SM12x). So codemod never reads a meaning from a name. `read(source)` finds
the definitions in one file and evaluates each on every compute capability
(major, minor):

- a function: `major, minor = get_compute_capability(device)` then
  `return major == 12 and minor == 0 and version_at_least(...)`;
- a partial of one (SGLang): `is_sm120_supported = lru_cache(maxsize=1)(
  partial(_check_cuda_device_version, device_capability_majors=[12], ...))`,
  the function's parameters bound to the literal keywords;
- a cached value: `_is_sm100_supported = _is_cuda and is_sm100_supported()`,
  `_is_sm103 = is_cuda() and get_device_sm() == 103`;
- a build flag (FlashInfer's aot.py): `has_sm120 = sm_capabilities.get("sm120",
  False)`, where a dict literal of the file maps `"sm120"` to
  `has_sm("compute_120", ...)`: it holds when building for exactly that arch.

Conditions that do not depend on the GPU (`version_at_least(...)`,
`is_cuda()`, an early `if not is_cuda(): return False`) are requirements of
the environment, not of the arch: they are read as true inside an `and`.
Anything else (an arch condition under `or` with such a condition, a call of
a function whose name speaks of an arch or capability and whose definition is
not read, a statement the reader does not follow) makes the predicate
*unknown*, with the line and the reason. Definitions from other files come in
as `known` (the planner reads the project's predicate files first).

This module finds the definitions and says what each name means; running one
on every capability is `python.predicates.evaluation`'s (`Evaluator`, which `_Reader`
derives from), and so is `Meaning`, `read`'s answer.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from types import MappingProxyType

from codemods.core.arch import Arch, ArchParseError
from codemods.gates import SourceError
from codemods.gates.python import ast_text, tree_index
from codemods.gates.python.predicates.evaluation import (
    _ARCH_WORDS, _CAPABILITY_CALLS, _SM_CALLS, _TARGET_KEY, FREE, PREDICATE_NAME, Evaluator, Meaning, _Conflict, _Unreadable,
)  # fmt: skip

_COMPUTE = re.compile(r"^(?:compute|sm)_\d{2,3}[af]?$")
# The numbers a numbered predicate (`has_device_capability(N)`) is read for: every capability code, 7.0 to 13.9.
NUMBERS = tuple(major * 10 + minor for major in range(7, 14) for minor in range(10))


def read(
    source: bytes, file: str = "", known: Mapping[str, Meaning] | None = None, classes: bool = True
) -> dict[str, Meaning]:
    """The meaning of every predicate this file defines, by name; {} when it does not parse. `classes` False runs
    each definition on every capability, not once per class of them (the reference the classes are tested against)."""
    return dict(_read(source, file, frozenset((known or {}).items()), classes))


@lru_cache(maxsize=16)
def _read(source: bytes, file: str, known: frozenset[tuple[str, Meaning]], classes: bool) -> Mapping[str, Meaning]:
    """`read`, once per file and known meanings: a recipe's changes read the same predicate files."""
    tree = _parsed(source)
    return MappingProxyType({} if tree is None else read_tree(tree, file, dict(known), classes))


@lru_cache(maxsize=16)
def _parsed(source: bytes) -> ast.Module | None:
    """The file's tree, parsed once for `read` and `base_classes` (not changed by either); None when it does not
    parse."""
    try:
        return ast_text.ast_of(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError, SourceError):  # MemoryError: the parser on deep nesting
        return None


def read_tree(
    tree: ast.Module, file: str = "", known: Mapping[str, Meaning] | None = None, classes: bool = True
) -> dict[str, Meaning]:
    """`read` of a module already parsed. The last reading is kept for the same tree, file, `known` (the same
    objects, held here so they stay the same) and `classes`: scan reads a file's predicates for its gates and for
    its definitions, from one tree."""
    global _last_read
    last = _last_read
    if last is not None and last[0] is tree and last[1] == file and last[2] is known and last[3] == classes:
        return dict(last[4])
    try:
        meanings = _Reader(tree, file, known or {}, classes).meanings()
    except (MemoryError, RecursionError):
        meanings = {}
    _last_read = (tree, file, known, classes, meanings)
    return dict(meanings)


_last_read: tuple[ast.Module, str, Mapping[str, Meaning] | None, bool, dict[str, Meaning]] | None = None


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class _Reader(Evaluator):
    def __init__(self, tree: ast.Module, file: str, known: Mapping[str, Meaning], classes: bool = True) -> None:
        self.file = file
        self.known = known
        self.functions = {
            node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        self.values: dict[str, list[ast.Assign]] = {}
        self.targets: dict[str, frozenset[tuple[int, int]]] = {}
        self.attributes: list[tuple[str, str, int]] = []
        self.words: dict[int, set[str]] = {}  # the names and attributes each module-level function mentions
        shared = tree_index.index(tree)  # the tree's one shared walk: its nodes in ast.walk's order, by type
        for node in shared.of_type(ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.values.setdefault(target.id, []).append(node)
        for node in shared.of_type(ast.Dict):
            for key, value in zip(node.keys, node.values):
                if (
                    isinstance(key, ast.Constant) and isinstance(key.value, str) and PREDICATE_NAME.match(key.value)
                    and isinstance(value, ast.Constant) and isinstance(value.value, str)
                    and PREDICATE_NAME.match(value.value)
                ):
                    self.attributes.append((key.value, value.value, key.lineno))
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and _TARGET_KEY.match(key.value):
                    arch = _compute_target(value)
                    if arch is not None:
                        self.targets[key.value] = arch
        self._note_words(tree, shared)
        self.cache: dict[str, Meaning | None] = {}
        self.busy: set[str] = set()
        self.dependent = self._may_depend_on_the_gpu()
        self.classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
        self.imports = imported_names(tree)
        self.owner: str | None = None  # the class whose method is being read: what `cls.` and `self.` call
        self.observed = {}
        self.by_class = classes

    def _note_words(self, tree: ast.Module, shared: tree_index.TreeIndex) -> None:
        """The names and attributes each module-level function mentions (its decorators and defaults too): by line,
        as no other module-level statement shares a line with a function's (one pass over the typed nodes, where
        following each node's parents walked the whole tree in Python)."""
        spans: list[tuple[int, int, set[str]]] = []  # (first line, last line, the function's words), in order
        for node in tree.body:
            if isinstance(node, _FUNCTIONS):
                words = self.words.setdefault(id(node), set())
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                spans.append((first, node.end_lineno or node.lineno, words))
        if not spans:
            return
        starts = [span[0] for span in spans]
        for node in shared.of_type(ast.Name, ast.Attribute):
            i = bisect.bisect_right(starts, node.lineno) - 1
            if i >= 0 and node.lineno <= spans[i][1]:
                spans[i][2].add(node.id if isinstance(node, ast.Name) else node.attr)

    def _may_depend_on_the_gpu(self) -> set[str]:
        """The definitions whose value might differ between GPUs: the only ones worth running on every capability.

        A definition that names no capability call, arch word, predicate or
        known meaning, and no definition that does, gives the same on every GPU,
        so it is no predicate (a superset is kept: it only costs time).
        """
        names: dict[str, set[str]] = {}
        for name in self.functions:
            names[name] = self.words[id(self.functions[name])]
        for name in self.values:
            if name not in self.functions:
                names[name] = {
                    n.id if isinstance(n, ast.Name) else n.attr
                    for node in self.values[name] for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))
                }
        calls = set(_CAPABILITY_CALLS + _SM_CALLS) | {"get"} | set(self.known) | {k.lstrip(".") for k in self.known}

        def direct(words: set[str]) -> bool:
            return bool(words & calls) or any(_ARCH_WORDS.search(w) or PREDICATE_NAME.match(w) for w in words)

        dependent = {name for name, words in names.items() if direct(words)}
        users: dict[str, set[str]] = {}
        for name, words in names.items():
            for word in words & names.keys():
                users.setdefault(word, set()).add(name)
        todo = list(dependent)
        while todo:
            for user in users.get(todo.pop(), ()):
                if user not in dependent:
                    dependent.add(user)
                    todo.append(user)
        return dependent

    def meanings(self) -> dict[str, Meaning]:
        out = {}
        for name in list(self.functions) + list(self.values):
            meaning = self.meaning(name)
            if meaning is not None:
                out[name] = meaning
        # A platform object's attributes named for predicates: {"is_sm90": "is_sm90_supported", ...}
        for key, value, line in self.attributes:
            meaning = out.get(value) or self.known.get(value)
            if meaning is not None:
                out["." + key] = Meaning(meaning.caps, f"{self.file}:{line}", meaning.reason)
        # A class's predicate methods, its own and those it inherits from classes of this file: `Class.is_sm120`
        # (what `cls.is_sm120()` means in that class's methods; python_arch_or.scoped).
        for name in self.classes:
            for method in dict.fromkeys(m for c in self._lineage(name) for m in self._methods(c)):
                if PREDICATE_NAME.match(method):
                    found = self.method_meaning(name, method)
                    if found is not None:
                        out[f"{name}.{method}"] = found
            # vLLM's numbered predicates: `current_platform.has_device_capability(100)` is `.has_device_capability(100)`
            for method, node in self._methods(name).items():
                out.update(self.numbered_meanings(name, node))
            # ... and those it inherits from a class another file defines, read there (`inherited`)
            for current in self._lineage(name):
                for module, base in self._imported_bases(current):
                    prefix = f"{module}:{base}."
                    for key, meaning in self.known.items():
                        if key.startswith(prefix):
                            out.setdefault(f"{name}.{key[len(prefix):]}", meaning)
        return out

    def _imported_bases(self, name: str) -> list[tuple[str, str]]:
        """(module as imported, class) of each base of class `name` that a `from ... import` binds here."""
        wanted = {b.id for b in self.classes[name].bases if isinstance(b, ast.Name) and b.id not in self.classes}
        return [(module, base) for module, base, bound in self.imports if bound in wanted]

    def _methods(self, name: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        return {
            n.name: n for n in self.classes[name].body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        }

    def _lineage(self, name: str) -> list[str]:
        """`name` and the classes of this file it derives from, nearest first (bases left to right)."""
        out: list[str] = []
        todo = [name]
        while todo:
            current = todo.pop(0)
            if current in out or current not in self.classes:
                continue
            out.append(current)
            todo += [b.id for b in self.classes[current].bases if isinstance(b, ast.Name)]
        return out

    def numbered_meanings(self, owner: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, Meaning]:
        """What a method given a capability number means for each number, keyed as its calls on any object are
        (`.has_device_capability(100)`): the method's body run on every GPU with its one required parameter bound
        to the number (vLLM's Platform: `return current_capability.to_int() >= capability`). {} for a method whose
        name says nothing of a capability, that takes no such parameter, or whose body the reader does not follow."""
        if not _ARCH_WORDS.search(node.name) or PREDICATE_NAME.match(node.name):
            return {}
        params = [*node.args.posonlyargs, *node.args.args]
        if params and params[0].arg in ("cls", "self"):
            params = params[1:]
        required = params[: len(params) - len(node.args.defaults)]
        if len(required) != 1 or any(d is None for d in node.args.kw_defaults):
            return {}
        parameter = required[0].arg
        defaults = {p.arg: FREE for p in params[1:]} | {p.arg: FREE for p in node.args.kwonlyargs}
        where = f"{self.file}:{node.lineno}"
        out: dict[str, Meaning] = {}
        outer = self.owner
        self.owner = owner
        try:
            for number in NUMBERS:
                env = {**defaults, parameter: number}
                try:
                    results = self._on_every_cap(lambda cap: self._run(node, cap, env))
                except _Unreadable:
                    return {}
                values = [True if value is FREE else value for value in results.values()]
                if any(not isinstance(value, bool) for value in values):
                    return {}
                caps = frozenset(cap for cap, value in zip(results, values) if value)
                out[f".{node.name}({number})"] = Meaning(caps, where)
        finally:
            self.owner = outer
        if len({m.caps for m in out.values()}) < 2:
            return {}  # the same whatever the number: no numbered predicate
        return out

    def method_meaning(self, owner: str, method: str) -> Meaning | None:
        """What `cls.<method>()` means in a method of class `owner`: the definition it finds first through the
        classes of this file; unknown when a base it may come from is not in this file, or a subclass here
        overrides it differently. None: no such method and every base is read (no definition at all)."""
        key = f"{owner}.{method}"
        if key in self.cache:
            return self.cache[key]
        self.cache[key] = Meaning(None, reason=f"`{key}` is defined through itself")
        result = self._method_meaning(owner, method)
        self.cache[key] = result
        return result

    def _method_meaning(self, owner: str, method: str) -> Meaning | None:
        for current in self._lineage(owner):
            node = self._methods(current).get(method)
            if node is not None:
                where = f"{self.file}:{node.lineno}"
                outer = self.owner
                self.owner = owner
                try:
                    meaning = self._evaluate(node, method, where)
                except _Unreadable as exc:
                    meaning = Meaning(None, where, str(exc))
                finally:
                    self.owner = outer
                if meaning is None:
                    return None
                for other in self.classes:
                    if other != owner and owner in self._lineage(other)[1:] and method in self._methods(other):
                        overridden = self.method_meaning(other, method)
                        if overridden is None or overridden.caps != meaning.caps:
                            return Meaning(None, where, f"`{other}` (a subclass) overrides `{method}`")
                return meaning
            outside = [ast.unparse(b) for b in self.classes[current].bases if ast.unparse(b) not in self.classes]
            outside = [b for b in outside if b not in ("object", "ABC", "abc.ABC")]
            if outside:
                return Meaning(
                    None, f"{self.file}:{self.classes[current].lineno}",
                    f"`{current}` inherits from `{outside[0]}`, which is not read: it may define `{method}`",
                )
        return Meaning(None, "", f"no class of `{owner}`'s lineage defines `{method}`")

    def meaning(self, name: str) -> Meaning | None:
        """None: `name` is defined here but is no arch predicate (or not defined here)."""
        if name in self.cache:
            return self.cache[name]
        if name not in self.dependent and not PREDICATE_NAME.match(name):
            return None
        if name in self.busy:
            raise _Unreadable(f"`{name}` is defined through itself")
        self.busy.add(name)
        try:
            node, where = self._definition(name)
            if node is None:
                result = None
            else:
                try:
                    result = self._evaluate(node, name, where)
                except _Unreadable as exc:
                    result = Meaning(None, where, str(exc)) if PREDICATE_NAME.match(name) else None
        finally:
            self.busy.discard(name)
        self.cache[name] = result
        return result

    def _definition(self, name: str) -> tuple[ast.expr | ast.FunctionDef | ast.AsyncFunctionDef | _Conflict | None, str]:
        if name in self.functions:
            node = self.functions[name]
            return node, f"{self.file}:{node.lineno}"
        assigns = self.values.get(name, [])
        if not assigns:
            return None, ""
        where = f"{self.file}:{assigns[0].lineno}"
        if len(assigns) > 1 and len({ast.dump(a.value) for a in assigns}) > 1:
            if PREDICATE_NAME.match(name):
                lines = ", ".join(str(a.lineno) for a in assigns)
                return _Conflict(f"`{name}` is assigned differently on lines {lines}"), where
            return None, ""
        return assigns[0].value, where


def _compute_target(node: ast.AST) -> frozenset[tuple[int, int]] | None:
    """`has_sm("compute_120", "12.8")` -> {(12, 0)}: the GPUs a build flag's target runs on; a family target
    (`compute_120f`) runs on every later minor of its major (`compute_120f` -> sm_121, ARCH_FACTS)."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    first = node.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str) and _COMPUTE.match(first.value)):
        return None
    try:
        arch = Arch.parse(first.value.rstrip("af"))
    except ArchParseError:  # `compute_00`: no GPU's target, so nothing this flag's meaning could be read from
        return None
    if first.value.endswith("f"):
        return frozenset((arch.major, minor) for minor in range(arch.minor, 10))
    return frozenset({(arch.major, arch.minor)})


def imported_names(tree: ast.Module) -> list[tuple[str, str, str]]:
    """(module as written, with its leading dots; name; the name it binds) of each module-level `from ... import`."""
    return [
        ("." * node.level + (node.module or ""), alias.name, alias.asname or alias.name)
        for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names
    ]


def base_classes(source: bytes) -> list[tuple[str, str]]:
    """(module as imported, class) of each base class this file's classes import from another module."""
    tree = _parsed(source)
    if tree is None:
        return []
    bases = {
        b.id for node in tree.body if isinstance(node, ast.ClassDef) for b in node.bases if isinstance(b, ast.Name)
    }
    return [(module, name) for module, name, bound in imported_names(tree) if bound in bases]


def inherited(module: str, base: str, meanings: Mapping[str, Meaning]) -> dict[str, Meaning]:
    """`read`'s meanings of class `base`'s predicate methods, keyed as a file importing it from `module` finds
    them (`module:Base.is_sm120`): what `cls.` means in its subclasses there."""
    prefix = base + "."
    return {f"{module}:{key}": m for key, m in meanings.items() if key.startswith(prefix)}


def is_method(key: str) -> bool:
    """Whether a key of `read`'s answer names a class's method (`Class.is_sm90`)."""
    return "." in key[1:]


def table(entries: Mapping[str, Sequence[str]], where: str) -> dict[str, Meaning]:
    """Meanings from a project's `[predicates]` table: name -> the archs it admits (`sm_120`, `sm_12x`)."""
    out = {}
    for name, archs in entries.items():
        caps: set[tuple[int, int]] = set()
        for text in archs:
            if text.endswith("x"):  # a whole major: sm_12x
                major = int(text.removeprefix("sm_")[:-1])
                caps.update((major, minor) for minor in range(10))
            else:
                arch = Arch.parse(text)
                caps.add((arch.major, arch.minor))
        out[name] = Meaning(frozenset(caps), where)
    return out


def describe(meaning: Meaning) -> list[str]:
    """The archs a meaning admits, majors folded: `sm_12x`, `sm_100`."""
    caps = meaning.caps or frozenset()
    out = []
    for major in sorted({m for m, _ in caps}):
        minors = sorted(n for m, n in caps if m == major)
        if len(minors) == 10:
            out.append(f"sm_{major}x")
        else:
            out += [f"sm_{major}{n}" for n in minors]
    return out
