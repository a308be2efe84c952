"""Capability locals: the names a function binds to the capability, read as what they hold (scan and run alike).

    _arch_major = torch.cuda.get_device_capability()[0]     # the major
    major, minor = torch.cuda.get_device_capability()       # the major and the minor
    cap = get_compute_capability(device); if cap[0] == 10:  # the pair
    sm = major * 10 + minor                                 # sm, from two names bound above
    arch = cap                                              # what `cap` holds

A name is read as the capability only where every assignment to it in its scope (its function, or the module)
binds the same part of the capability: one assigned anything else too (`major = x.bits` between the binding and
the `if`, a loop variable, an import) is `rebound`, and a comparison of it is unknown (left alone, never guessed).
No recipe `names` entry is needed for any of these.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator, Mapping

from codemods.gates.python.ast_text import PythonText
from codemods.gates.python.capability.blocks import nodes_in
from codemods.gates.python.capability.reading import Side, _part

REBOUND = "rebound"  # a name also assigned something that is no capability in its scope
_PASSES = 4  # names bound from names bound from names ...: real code goes two deep (`cap` -> `major` -> `sm`)


def assigned(target: ast.AST, value: ast.AST, lookup: Callable[[str], Side]) -> Iterator[tuple[ast.Name, Side]]:
    """Each name `target = value` stores, with what it then holds ("" for no part of the capability)."""
    side = _part(value, lookup)
    if isinstance(target, ast.Name):
        yield target, side
    elif isinstance(target, (ast.Tuple, ast.List)):
        halves = len(target.elts) == 2 and side is None  # `major, minor = <the pair>`
        pair = value.elts if isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts) else None
        for index, element in enumerate(target.elts):
            if isinstance(element, ast.Name):
                held = index if halves else _part(pair[index], lookup) if pair is not None else ""
                yield element, held
            else:
                yield from ((name, "") for name in ast.walk(element) if isinstance(name, ast.Name))
    else:
        yield from ((name, "") for name in ast.walk(target) if isinstance(name, ast.Name))


def _stores(nodes: Iterator[tuple[ast.AST, int]], lookup: Callable[[int], Callable[[str], Side]]) -> dict[tuple[int, str], set]:
    """(scope, name) -> what each assignment to it stores, for every name stored in `nodes`."""
    out: dict[tuple[int, str], set] = {}
    seen: set[int] = set()  # the Name nodes an assignment (or a comprehension, its own scope) accounted for
    for node, scope in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name, side in assigned(target, node.value, lookup(scope)):
                    seen.add(id(name))
                    out.setdefault((scope, name.id), set()).add(side)
        elif isinstance(node, ast.comprehension):
            seen.update(id(name) for name in ast.walk(node.target))
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and id(node) not in seen:
            out.setdefault((scope, node.id), set()).add("")  # `for major in ...`, `major += 1`, `del major`
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                out.setdefault((scope, (alias.asname or alias.name).split(".")[0]), set()).add("")
    return out


def capability_locals(
    text: PythonText, body: list[ast.stmt], holds: Callable[[bytes], bool], declared: Mapping[str, Side]
) -> dict[tuple[int, str], Side]:
    """(scope, name) -> what the name holds (0 the major, 1 the minor, None the pair, "sm"), or REBOUND, for every
    name `body` binds to the capability; scope 0 is the module, else the id of the function (nodes_in's scopes).
    `holds` says which statements may name a capability call; `declared` is what a recipe's `names` (and the
    module's wrappers of a helper) say."""
    bound: dict[tuple[int, str], Side] = {}

    def lookup(scope: int) -> Callable[[str], Side]:
        def held(name: str) -> Side:
            side = bound.get((scope, name), bound.get((0, name), declared.get(name, "")))
            return "" if side == REBOUND else side

        return held

    test = holds
    for _ in range(_PASSES):
        stores = _stores(nodes_in(text, body, test, 0), lookup)
        found: dict[tuple[int, str], Side] = {}
        for key, sides in stores.items():
            held = sides - {""}
            if held:
                found[key] = held.pop() if len(sides) == 1 else REBOUND
        if found == bound:
            break
        bound = found
        words = sorted({name for _, name in bound})
        pattern = re.compile(rb"\b(?:%s)\b" % b"|".join(re.escape(word.encode()) for word in words)) if words else None

        def test(piece: bytes, pattern: re.Pattern[bytes] | None = pattern) -> bool:
            return holds(piece) or bool(pattern is not None and pattern.search(piece))

    return bound
