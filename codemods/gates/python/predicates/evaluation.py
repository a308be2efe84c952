"""How one definition of an arch predicate is run on every compute capability: the half of the predicate
reader (`python.predicates.reading`) that evaluates what the other half finds.

`Evaluator._evaluate` runs a function's body, a partial of one, or a value on
each (major, minor) of DOMAIN. The capability calls give the GPU's value
(`_Gpu`, which carries how it follows from the capability: a `read`). Each
run records what it asks of the GPU, each comparison with its operator and
the value it is compared with, as an observation; a capability that answers
every observation of an earlier run as that run's did takes its path, so only
one run per class of capabilities is made (`_on_every_cap`). What does not
depend on the GPU is FREE, a requirement of the
environment, read as true inside an `and`; a statement or expression it does
not follow raises `_Unreadable` with its line, which makes the predicate
unknown. A name the file defines is asked of the reader (`meaning`,
`method_meaning`), one from another file of `known`. `Meaning` is the answer:
the capabilities a predicate holds on.
"""

from __future__ import annotations

import ast
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from codemods.core.arch import Arch, ArchSet

# Every compute capability a predicate is evaluated on.
DOMAIN: tuple[tuple[int, int], ...] = tuple((major, minor) for major in range(1, 16) for minor in range(10))

_CAPABILITY_CALLS = ("get_compute_capability", "get_device_capability")
_SM_CALLS = ("get_device_sm",)
# A call with such a name may test the GPU: unless its definition is read, it makes a predicate unknown.
_ARCH_WORDS = re.compile(r"sm_?\d|capabilit|arch|blackwell|hopper|ampere|gfx|_sm\b", re.IGNORECASE)
_TARGET_KEY = re.compile(r"^sm_?\d{2,3}[af]?$")
# Names that are predicates by their shape: only these are reported when unreadable.
PREDICATE_NAME = re.compile(r"^_?(?:is|has)_sm\d|^_?is_(?:blackwell|hopper)|^_?is_sm\d+x")


@dataclass(frozen=True)
class Meaning:
    """The capabilities a predicate holds on; `caps` is None when unknown (`reason` says why)."""

    caps: frozenset[tuple[int, int]] | None
    where: str = ""  # "flashinfer/utils.py:551"
    reason: str = ""

    @property
    def known(self) -> bool:
        return self.caps is not None

    def admitted(self, universe: tuple[Arch, ...]) -> frozenset[Arch]:
        return frozenset(a for a in universe if (a.major, a.minor) in (self.caps or ()))

    def archs(self, universe: tuple[Arch, ...]) -> ArchSet:
        if self.caps is None:
            return ArchSet(universe, frozenset(), frozenset(universe))
        return ArchSet(universe, self.admitted(universe))


class _Unreadable(Exception):
    pass


class _Free:
    """A value that does not depend on the GPU."""

    def __repr__(self) -> str:
        return "FREE"


FREE = _Free()


class Evaluator(ABC):
    """Runs a definition on every capability; what its names mean, the reader deriving from it says."""

    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]  # the module-level functions, by name
    values: dict[str, list[ast.Assign]]  # the assignments of each module-level name
    targets: dict[str, frozenset[tuple[int, int]]]  # a build flag's key (`"sm120"`) -> the GPUs its target runs on
    known: Mapping[str, Meaning]  # meanings read from other files
    owner: str | None  # the class whose method is being read: what `cls.` and `self.` call
    observed: dict[tuple, None]  # what the current run asked of the GPU, in order (a dict as an ordered set)
    by_class: bool  # False: run every capability of DOMAIN (the reference the classes are tested against)

    @abstractmethod
    def meaning(self, name: str) -> Meaning | None:
        """What `name`, defined in this file, means; None when it is no arch predicate."""

    @abstractmethod
    def method_meaning(self, owner: str, method: str) -> Meaning | None:
        """What `cls.<method>()` means in a method of class `owner`."""

    def _evaluate(
        self, node: ast.expr | ast.FunctionDef | ast.AsyncFunctionDef | _Conflict, name: str, where: str
    ) -> Meaning | None:
        if isinstance(node, _Conflict):
            raise _Unreadable(node.reason)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            definition = node
            results = self._on_every_cap(lambda cap: self._run(definition, cap, {}))
        else:
            node = _unwrap_cache(node)
            if isinstance(node, ast.Call) and _name(node.func) == "partial" and node.args:
                function = self.functions.get(_name(node.args[0]) or "")
                if function is None:
                    raise _Unreadable(f"partial of `{ast.unparse(node.args[0])}`, which is not defined in this file")
                env = {}
                for keyword in node.keywords:
                    try:
                        env[keyword.arg] = ast.literal_eval(keyword.value)
                    except ValueError:
                        raise _Unreadable(f"`{keyword.arg}=` is not a literal") from None
                for position, arg in enumerate(node.args[1:]):
                    params = function.args.posonlyargs + function.args.args
                    try:
                        env[params[position].arg] = ast.literal_eval(arg)
                    except (ValueError, IndexError):
                        raise _Unreadable("a positional argument of the partial is not a literal") from None
                results = self._on_every_cap(lambda cap: self._run(function, cap, env))
            elif isinstance(node, ast.Name) and self._defined(node.id):
                return self._lookup(node.id)
            else:
                results = self._on_every_cap(lambda cap: self._value(node, cap, {}))
        values = list(results.values())
        if all(value is FREE for value in values):
            return None  # no arch in it
        # A return that depends only on the environment (`return version_at_least(...)` after
        # `if major != 12: return False`) holds on that GPU when the environment does.
        values = [True if value is FREE else value for value in values]
        results = dict(zip(results, values))
        if any(not isinstance(value, bool) for value in values):
            if not PREDICATE_NAME.match(name):
                return None
            raise _Unreadable("it does not give True or False on every GPU")
        if len(set(values)) == 1 and not PREDICATE_NAME.match(name):
            return None  # the same on every GPU: no arch predicate
        return Meaning(frozenset(cap for cap, value in results.items() if value), where)

    def _on_every_cap(self, run: Callable[[tuple[int, int]], object]) -> dict[tuple[int, int], object]:
        """`run`'s answer on every capability of DOMAIN, running it once per class of capabilities it can tell apart.

        A run depends on the capability only through what it records in
        `observed` (`_observe`: each comparison, lookup, arithmetic and
        unpacking of a `_Gpu` value, and each `_holds`), the values compared
        as the evaluator met them, not the literals of the text. So a
        capability whose outcome of every observation of an earlier run is
        that run's takes the same path to the same answer, and is not run.
        DOMAIN is taken in order, so the first capability that raises
        `_Unreadable` is the one running every capability meets first, and
        the definitions a run asks `meaning` for are the same. A run that
        observes nothing covers every capability (most functions a file
        defines never read the GPU); by_class False runs every capability.
        """
        outer = self.observed
        answers: dict[tuple[int, int], object] = {}
        covered: dict[int, object] = {}  # the index in DOMAIN of a capability not run -> the answer of its class
        try:
            for index, cap in enumerate(DOMAIN):
                if index in covered:
                    answers[cap] = covered[index]
                    continue
                self.observed = {}
                answer = answers[cap] = run(cap)
                if self.by_class and not self.observed:
                    # its class is every later capability no earlier run's class holds: nothing is left to run
                    answers.update(dict.fromkeys(DOMAIN[index + 1 :], answer))
                    answers.update({DOMAIN[other]: value for other, value in covered.items() if other > index})
                    break
                if self.by_class:
                    outcomes = [_outcomes(observation) for observation in self.observed]
                    own = tuple(outcome[index] for outcome in outcomes)
                    for other, row in enumerate(zip(*outcomes)):  # each capability's outcomes
                        if other > index and row == own and other not in covered:
                            covered[other] = answer
        finally:
            self.observed = outer
        return answers

    def _observe(self, observation: tuple) -> None:
        """Note that this run's path or answer depends on `observation`'s outcome (`_outcome`)."""
        self.observed[observation] = None

    def _defined(self, name: str) -> bool:
        return name in self.functions or name in self.values or name in self.known

    def _lookup(self, name: str) -> Meaning | None:
        meaning = self.meaning(name) if name in self.functions or name in self.values else self.known.get(name)
        if meaning is not None and not meaning.known:
            raise _Unreadable(f"uses `{name}` ({meaning.where}), which is unknown: {meaning.reason}")
        return meaning

    # ------------------------------------------------------------ a function body on one capability

    def _run(self, function: ast.FunctionDef | ast.AsyncFunctionDef, cap: tuple[int, int], env: dict) -> object:
        env = dict(env)
        result = self._block(function.body, cap, env, function)
        if result is _FELL_THROUGH:
            raise _Unreadable(f"line {function.lineno}: `{function.name}` may end without a return")
        return result

    def _block(self, body: list[ast.stmt], cap, env: dict, function) -> object:
        for stmt in body:
            if isinstance(stmt, ast.Expr):
                continue  # a docstring or a call for its effect
            if isinstance(stmt, (ast.Pass, ast.Import, ast.ImportFrom)):
                continue  # `import torch` inside the function: binds a module, decides nothing
            if isinstance(stmt, ast.Return):
                return FREE if stmt.value is None else self._value(stmt.value, cap, env)
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                self._assign(stmt.targets[0], self._value(stmt.value, cap, env), env)
                continue
            if isinstance(stmt, ast.If):
                test = self._value(stmt.test, cap, env)
                if test is FREE:
                    # `if not is_cuda(): return False`: a requirement of the environment
                    if _returns_false(stmt.body) and not stmt.orelse:
                        continue
                    raise _Unreadable(f"line {stmt.lineno}: a branch that does not depend on the GPU")
                result = self._block(stmt.body if test else stmt.orelse, cap, env, function)
                if result is not _FELL_THROUGH:
                    return result
                continue
            raise _Unreadable(f"line {stmt.lineno}: a statement the reader does not follow")
        return _FELL_THROUGH

    def _assign(self, target: ast.AST, value: object, env: dict) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            gpu = value if isinstance(value, _Gpu) else None
            if gpu is not None:
                self._observe(("shape", gpu.read, len(target.elts)))
            value = _plain(value)
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                for element in target.elts:
                    if isinstance(element, ast.Name):
                        env[element.id] = FREE
                return
            for position, (element, item) in enumerate(zip(target.elts, value)):
                self._assign(element, item if gpu is None else _Gpu(item, ("item", gpu.read, _const(position))), env)

    # ------------------------------------------------------------ an expression on one capability

    def _value(self, node: ast.expr, cap: tuple[int, int], env: dict) -> object:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = tuple(self._value(e, cap, env) for e in node.elts)
            return FREE if any(i is FREE for i in items) else items
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if self._defined(node.id):
                meaning = self._lookup(node.id)
                if meaning is not None:
                    assert meaning.caps is not None  # _lookup raises on an unknown meaning
                    return self._holds(cap, meaning.caps)
            return FREE
        if isinstance(node, ast.Call):
            return self._call(node, cap, env)
        if isinstance(node, ast.Attribute) and PREDICATE_NAME.match(node.attr):
            meaning = self.known.get("." + node.attr)
            if meaning is None or meaning.caps is None:
                raise _Unreadable(f"line {node.lineno}: the attribute `.{node.attr}` is not read")
            return self._holds(cap, meaning.caps)
        if isinstance(node, ast.Subscript):
            value = self._value(node.value, cap, env)
            index = self._value(node.slice, cap, env)
            if value is FREE or index is FREE:
                return FREE
            read: tuple = ("item", _read_of(value), _read_of(index))
            if isinstance(value, _Gpu):
                self._observe(("ok", read))
            elif isinstance(index, _Gpu):
                self._observe(("value", read))  # a lookup by the GPU's value: what it finds is a plain value
            try:
                # whatever the file indexes: a TypeError, IndexError or KeyError says it cannot be
                item = cast(Any, _plain(value))[_plain(index)]
            except (TypeError, IndexError, KeyError):
                raise _Unreadable(f"line {node.lineno}: cannot index `{ast.unparse(node)}`") from None
            return _Gpu(item, read) if isinstance(value, _Gpu) else item
        if isinstance(node, ast.Compare):
            values = [self._value(node.left, cap, env)] + [self._value(c, cap, env) for c in node.comparators]
            gpu = any(isinstance(v, _Gpu) for v in values)
            if any(v is FREE for v in values):
                if not gpu:
                    return FREE  # `tuple(...) >= cuda_version`: the environment
                raise _Unreadable(f"line {node.lineno}: `{ast.unparse(node)}` compares the GPU with something else")
            if gpu:
                for op, a, b in zip(node.ops, values, values[1:]):
                    if isinstance(a, _Gpu) or isinstance(b, _Gpu):
                        self._observe(("compare", type(op), _read_of(a), _read_of(b)))
            values = [_plain(v) for v in values]
            try:
                return all(_COMPARE[type(op)](a, b) for op, a, b in zip(node.ops, values, values[1:]))
            except (TypeError, KeyError):
                raise _Unreadable(f"line {node.lineno}: cannot evaluate `{ast.unparse(node)}`") from None
        if isinstance(node, ast.BoolOp):
            values = [self._value(v, cap, env) for v in node.values]
            decided = [v for v in values if v is not FREE]
            if not decided:
                return FREE
            if isinstance(node.op, ast.And):
                return all(bool(v) for v in decided)  # what does not depend on the GPU is a requirement
            if len(decided) != len(values):
                raise _Unreadable(f"line {node.lineno}: `{ast.unparse(node)}` holds without a GPU condition")
            return any(bool(v) for v in decided)
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            left, right = self._value(node.left, cap, env), self._value(node.right, cap, env)
            if left is FREE or right is FREE:
                if isinstance(left, _Gpu) or isinstance(right, _Gpu):
                    raise _Unreadable(f"line {node.lineno}: `{ast.unparse(node)}` is not read")
                return FREE
            gpu = isinstance(left, _Gpu) or isinstance(right, _Gpu)
            read = ("arith", type(node.op), _read_of(left), _read_of(right))
            if gpu:
                self._observe(("ok", read))  # `100 // minor`: whether it can be computed depends on the GPU
            try:
                value = _ARITHMETIC[type(node.op)](_plain(left), _plain(right))
            except (TypeError, ZeroDivisionError):
                raise _Unreadable(f"line {node.lineno}: cannot evaluate `{ast.unparse(node)}`") from None
            return _Gpu(value, read) if gpu else value
        if isinstance(node, ast.IfExp):
            test = self._value(node.test, cap, env)
            if test is FREE:
                body, orelse = self._value(node.body, cap, env), self._value(node.orelse, cap, env)
                if isinstance(body, _Gpu) or isinstance(orelse, _Gpu):
                    raise _Unreadable(f"line {node.lineno}: `{ast.unparse(node)}` is not read")
                return FREE
            if isinstance(test, _Gpu):
                self._observe(("truth", test.read))
            return self._value(node.body if _plain(test) else node.orelse, cap, env)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            value = self._value(node.operand, cap, env)
            return FREE if value is FREE else not value
        if any(isinstance(n, ast.Call) and _name(n.func) in _CAPABILITY_CALLS + _SM_CALLS for n in ast.walk(node)):
            raise _Unreadable(f"line {node.lineno}: `{ast.unparse(node)}` is not read")
        return FREE

    def _holds(self, cap: tuple[int, int], caps: frozenset[tuple[int, int]]) -> bool:
        self._observe(("holds", caps))
        return cap in caps

    def _call(self, node: ast.Call, cap: tuple[int, int], env: dict) -> object:
        name = _name(node.func) or ""
        if name in _CAPABILITY_CALLS:
            return _Gpu(cap, _CAP)
        if name == "to_int" and isinstance(node.func, ast.Attribute) and not node.args:
            # vLLM's DeviceCapability.to_int(): `major * 10 + minor`, the same number get_device_sm gives
            value = self._value(node.func.value, cap, env)
            if isinstance(value, _Gpu):
                self._observe(("shape", value.read, 2))
            if isinstance(value, _Gpu) and isinstance(value.value, tuple) and len(value.value) == 2:
                return _Gpu(value.value[0] * 10 + value.value[1], _number(value.read))
            raise _Unreadable(f"line {node.lineno}: `{ast.unparse(node)}` is not read")
        if name == "isinstance" and isinstance(node.func, ast.Name) and len(node.args) == 2:
            value = self._value(node.args[0], cap, env)
            kind = _TYPES.get(_name(node.args[1]) or "")
            if value is not FREE and not isinstance(value, _Gpu) and kind is not None:
                return isinstance(value, kind)
        if name in _SM_CALLS:
            return _Gpu(cap[0] * 10 + cap[1], _SM)
        if name == "get" and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            key = node.args[0].value
            if _TARGET_KEY.match(key):
                if key not in self.targets:
                    raise _Unreadable(f"line {node.lineno}: no `{key!r}: has_sm(\"compute_...\")` entry in this file")
                return self._holds(cap, self.targets[key])
        if isinstance(node.func, ast.Name) and self._defined(name):
            meaning = self._lookup(name)
            if meaning is not None:
                assert meaning.caps is not None  # _lookup raises on an unknown meaning
                return self._holds(cap, meaning.caps)
            return FREE
        if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and node.func.value.id in ("cls", "self"):
            # a method: what the class being read defines, never a module's function of the same name
            if not (PREDICATE_NAME.match(name) or _ARCH_WORDS.search(name)):
                return FREE
            meaning = self.method_meaning(self.owner, name) if self.owner is not None else None
            if meaning is None or meaning.caps is None:
                why = meaning.reason if meaning is not None else "not inside a class of this file"
                raise _Unreadable(f"line {node.lineno}: calls `{ast.unparse(node.func)}()`: {why}")
            return self._holds(cap, meaning.caps)
        if isinstance(node.func, ast.Attribute) and name in self.known:
            meaning = self._lookup(name)
            if meaning is not None:
                assert meaning.caps is not None  # _lookup raises on an unknown meaning
                return self._holds(cap, meaning.caps)
        if _ARCH_WORDS.search(name):
            raise _Unreadable(f"line {node.lineno}: calls `{name}()`, whose definition is not read")
        return FREE


class _Gpu:
    """A value read from the GPU (its capability or a part of it): `value` on the capability being run, `read` how
    it follows from any capability."""

    __slots__ = ("value", "read")

    def __init__(self, value: object, read: tuple) -> None:
        self.value = value
        self.read = read


def _plain(value: object) -> object:
    return value.value if isinstance(value, _Gpu) else value


# A read: how a value follows from the capability (major, minor), as data, so that the same read taken by two
# runs is one observation: ("cap",), ("const", _Const), ("item", read, read), ("arith", ast operator, read, read).
_CAP: tuple = ("cap",)


_SCALARS = (int, str, bool, float, bytes, type(None))


class _Const:
    """A value of the text or the environment inside a read, hashable even when the value is not (a list
    bound by a partial): told apart by its type and value, a container by its type and repr."""

    __slots__ = ("value", "key")

    key: tuple

    def __init__(self, value: object) -> None:
        self.value = value
        # repr tells 1, 1.0 and True apart inside a tuple, where == does not (`is` would)
        self.key = (type(value), value if type(value) in _SCALARS else repr(value))

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Const) and self.key == other.key


def _const(value: object) -> tuple:
    return ("const", _Const(value))


def _read_of(value: object) -> tuple:
    return value.read if isinstance(value, _Gpu) else _const(value)


def _number(read: tuple) -> tuple:
    """`major * 10 + minor` of a read capability: the number get_device_sm and vLLM's to_int give."""
    return ("arith", ast.Add, ("arith", ast.Mult, ("item", read, _const(0)), _const(10)), ("item", read, _const(1)))


_SM = _number(_CAP)


def _follow(read: tuple, cap: tuple[int, int]) -> object:
    kind = read[0]
    if kind == "cap":
        return cap
    if kind == "const":
        return read[1].value
    if kind == "item":
        return cast(Any, _follow(read[1], cap))[_follow(read[2], cap)]
    return _ARITHMETIC[read[1]](_follow(read[2], cap), _follow(read[3], cap))


def _outcome(observation: tuple, cap: tuple[int, int]) -> object:
    """What a run on `cap` learns from `observation`: ("holds", caps) whether `cap` is one of caps (another
    predicate's meaning), ("compare", ast operator, read, read) its truth, ("shape",
    read, n) whether the value unpacks into n, ("truth", read) its truth, ("value", read) the value itself, ("ok",
    read) that it can be computed; the kind of exception where computing it raises."""
    try:
        if observation[0] == "holds":
            return cap in observation[1]
        if observation[0] == "compare":
            return _COMPARE[observation[1]](_follow(observation[2], cap), _follow(observation[3], cap))
        value = _follow(observation[1], cap)
        if observation[0] == "shape":
            return isinstance(value, tuple) and len(value) == observation[2]
        if observation[0] == "truth":
            return bool(value)
        if observation[0] == "value":
            return _Const(value)
        return True
    except Exception as exc:  # whatever it is, the run there raises it: its kind tells it apart
        return type(exc)


@lru_cache(maxsize=4096)
def _outcomes(observation: tuple) -> tuple:
    """`_outcome` of `observation` on every capability of DOMAIN, in its order (the same comparisons recur in
    every file: `major == 12`)."""
    return tuple(_outcome(observation, cap) for cap in DOMAIN)


class _Conflict:
    def __init__(self, reason: str) -> None:
        self.reason = reason


_FELL_THROUGH = object()

_ARITHMETIC = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
}  # fmt: skip

_COMPARE = {
    ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,  # `capability is None`: a GPU has one
}  # fmt: skip

# `isinstance(capability, tuple)` on a number given to a numbered predicate (vLLM's Platform methods)
_TYPES = {"int": int, "tuple": tuple, "list": list, "str": str, "float": float, "bool": bool}


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _unwrap_cache(node: ast.expr) -> ast.expr:
    """`lru_cache(maxsize=1)(X)` and `functools.cache(X)` stand for X."""
    while isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        if isinstance(node.func, ast.Call) or _name(node.func) in ("cache", "lru_cache"):
            node = node.args[0]
            continue
        break
    return node


def _returns_false(body: list[ast.stmt]) -> bool:
    return (
        len(body) == 1
        and isinstance(body[0], ast.Return)
        and (body[0].value is None or (isinstance(body[0].value, ast.Constant) and not body[0].value.value))
    )
