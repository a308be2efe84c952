"""Where python_capability's comparisons can be, told from a file's bytes and its statements.

`may_hold` is the byte test `codemod scan` runs before it parses a file for
this kind; `capability.pieces.blocks` parses only the statements around each capability
call (or arch string compared), at their own lines and columns, instead of the
whole file; `nodes_in` walks only the statements whose bytes pass a test,
with the function each is in (the names bound from the call: `capability.locals`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator, Mapping

from codemods.gates.python.capability.values import names_arch
from codemods.gates.python.ast_text import COMPOUND, PythonText

# The calls that return the device's capability, and what each returns: "pair" the (major, minor) tuple,
# "sm" major * 10 + minor. torch's own; FlashInfer's `get_compute_capability(device)` (flashinfer/utils.py
# returns `torch.cuda.get_device_capability(device.index)`; tests/replay/test_replay_real.py checks that
# against the release source); SGLang's `get_device_sm()`.
HELPERS = {"get_device_capability": "pair", "get_compute_capability": "pair", "get_device_sm": "sm"}
CALLS = tuple(HELPERS)
TOKENS = tuple(name.encode() for name in CALLS)
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")

# The byte tests `codemod scan` runs before it parses a file for this kind: the calls returning the pair.
PAIR_TOKENS = tuple(name.encode() for name, returns in HELPERS.items() if returns == "pair")
CAPABILITY_TOKEN = PAIR_TOKENS[0]
_PAIR = b"(?:%s)" % b"|".join(PAIR_TOKENS)
# A comparison with the call, or a name bound from it: nothing else can be a python_capability gate.
_CALL_COMPARED = _PAIR + rb"\s*\((?:[^()]|\([^()]*\))*\)\s*(?:\[\s*[01]\s*\]\s*)?\)*\s*(?:[<>!=]=|[<>]|\bin\b|\bnot\b)"
CAPABILITY_RE = re.compile(_CALL_COMPARED + rb"|(?:[<>!=]=|[<>]|\bin)\s*[\w.]*" + _PAIR + rb"|=\s*[\w.]*" + _PAIR)
# SGLang's `get_device_sm()` (major * 10 + minor), compared or bound
SM_COMPARE_RE = re.compile(rb"\bget_device_sm\s*\(\s*\)\s*(?:[<>!=]=|[<>]|\bin\b|\bnot\b)|=\s*[\w.]*\bget_device_sm\s*\(")
_CAPABILITY_CALL_RE = re.compile(_CALL_COMPARED)
_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.")
_SPACE_BYTES = frozenset(b" \t\n\r\f\v")


def may_compare(data: bytes) -> bool:
    """True whenever `CAPABILITY_RE.search(data)` matches (rarely also when it does not).

    The regex's last two branches start with no literal, so re tries them at
    every byte; this looks at each `get_device_capability` and what precedes it.
    """
    for token in PAIR_TOKENS:
        pos = data.find(token)
        while pos >= 0:
            if _CAPABILITY_CALL_RE.match(data, pos):
                return True
            name = pos
            while name > 0 and data[name - 1] in _NAME_BYTES:
                name -= 1
            before = name
            while before > 0 and data[before - 1] in _SPACE_BYTES:
                before -= 1
            if data[before - 1 : before] in (b"<", b">", b"=") if before else False:
                return True
            if data[max(0, before - 2) : before] == b"in" or b"in" in data[name:pos]:
                return True
            pos = data.find(token, pos + 1)
    return False


def may_hold(data: bytes) -> bool:
    """Whether `data` may hold a comparison of this kind: nothing else is worth parsing."""
    return (
        (has_pair_token(data) and may_compare(data))
        or bool(b"get_device_sm" in data and SM_COMPARE_RE.search(data))
        or names_arch(data)
    )


def has_pair_token(data: bytes) -> bool:
    """Whether `data` names a call returning the (major, minor) pair (the prefilter's test)."""
    return any(token in data for token in PAIR_TOKENS)


def has_token(piece: bytes) -> bool:
    return any(token in piece for token in TOKENS)


def _holds(piece: bytes) -> bool:
    """Whether a statement's bytes may hold a comparison found without a declared name."""
    return has_token(piece) or names_arch(piece)


# ---------------------------------------------------------------- the call, the names bound from it, the statements to walk


def callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _capability_call(node: ast.AST, wrappers: Mapping[str, str] | None = None) -> str | None:
    """What a call of one of HELPERS (or of `wrappers`: name -> what it returns) returns ("pair" for
    `get_device_capability(...)`, "sm" for `get_device_sm(...)`), else None."""
    if not isinstance(node, ast.Call):
        return None
    name = callee(node)
    if name.endswith("get_device_capability"):
        return "pair"
    return HELPERS.get(name) or (wrappers or {}).get(name)


def wrappers(text: PythonText, body: list[ast.stmt]) -> dict[str, str]:
    """The module's own functions that only pass a helper's result on, and what each returns: FlashInfer
    0.7.1's `def _get_compute_capability(device): return get_compute_capability(device)` -> "pair" (its
    guards before that `return` may raise; every `return` must return one helper's call, the same kind)."""
    out: dict[str, str] = {}
    for stmt in body:
        if (
            isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
            and stmt.name not in HELPERS
            and has_token(text.data[slice(*text.span(stmt))])
        ):
            kinds: set[str | None] = set()
            for node in ast.walk(stmt):
                if node is not stmt and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Yield, ast.YieldFrom)):
                    kinds.add(None)  # a nested function or a generator: not a plain pass-through
                elif isinstance(node, ast.Return):
                    kinds.add(_capability_call(node.value) if node.value is not None else None)
            if len(kinds) == 1 and None not in kinds:
                out[stmt.name] = kinds.pop()  # type: ignore[assignment]  # not None: checked
    return out


def nodes_in(text: PythonText, body: list, test: Callable[[bytes], bool], scope: int) -> Iterator[tuple[ast.AST, int]]:
    """Every node of the statements whose source passes `test`, with the id of the function around it (0: none)."""
    for stmt in body:
        if hasattr(stmt, "lineno"):  # a match_case has no position: look inside it
            start, end = text.span(stmt)
            if not test(text.data[start:end]):
                continue
        if not (isinstance(stmt, COMPOUND) or isinstance(stmt, (ast.ExceptHandler, ast.match_case))):
            for node in ast.walk(stmt):
                yield node, scope
            continue
        inner = id(stmt) if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else scope
        for name, value in ast.iter_fields(stmt):
            if name in _BODIES:
                continue
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, ast.AST):
                    for node in ast.walk(item):
                        yield node, scope
        for name in _BODIES:
            yield from nodes_in(text, getattr(stmt, name, None) or [], test, inner)


# ---------------------------------------------------------------- scan: only the blocks that name the call
