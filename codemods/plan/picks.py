"""One gate per selector: the recipe keys that narrow a change's matches (`body`, `nth`, `all`), and the error
that lists the matches when several are left.

A change's selectors (`function`, `assigns`, `admits`, ...) may match several
gates of one file. Widening them all silently once turned an SM100 dispatch arm
and a dtype choice into sm_120 paths along with the `raise` guard the recipe was
written for (issue 38), so a change edits one gate unless it says `all = true`.
A kind whose selectors name a shape across a file, not a place
(`GateKind.every_match`: cuda_guard, whose guards of one shape are one feature path), widens every match.

- `body = "raise" | "return" | "skip"`: the gate decides an `if` whose body ends that way (a `skip` is also a
  `skipif`-style decorator or call);
- `nth = N`: the Nth of the matches, in source order, counting from 1 (a last resort: it breaks when a gate is
  added above);
- `all = true`: every match.

Pure: bytes and gates in, gates and text out.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from typing import Any

from codemods.gates import Gate
from codemods.gates.python import polarity as _polarity
from codemods.gates.python.ast_text import ASSIGNMENTS, PythonText, called

# The keys a change (or a [[change.at]] candidate) may give besides its kind's selectors; never passed to `find`.
PICKS = ("body", "nth", "all")
BODIES = ("raise", "return", "skip")
_SKIP_CALL = re.compile(r"skip", re.IGNORECASE)


def check(name: str, value: object) -> str:
    """Why a pick's value is unusable ("" when it is fine)."""
    if name == "body":
        return "" if value in BODIES else f"body must be one of {', '.join(repr(b) for b in BODIES)}, not {value!r}"
    if name == "nth":
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        return "" if ok else f"nth must be a whole number from 1 (the first match), not {value!r}"
    if name == "all":
        return "" if isinstance(value, bool) else f"all must be true or false, not {value!r}"
    return f"unknown pick {name!r}"


HINTS = {"body": 'body = "raise"', "nth": "nth = 2   # the second match, in source order", "all": "all = true"}


def split(selector: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the kind's selectors, the picks) of a location's selector table."""
    return {k: v for k, v in selector.items() if k not in PICKS}, {k: v for k, v in selector.items() if k in PICKS}


def body_of(source: bytes, gate: Gate, text: PythonText | None = None, tree: ast.Module | None = None) -> str:
    """How the code the gate decides ends: "raise", "return" or "skip" (an `if` whose body ends that way, or a
    skip helper's condition), "" for anything else or a file that is not Python."""
    if tree is None:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return ""
    text = text or PythonText(source)
    best: tuple[int, str] | None = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.Call)):
            tested = node.test if isinstance(node, ast.If) else (node.args[0] if node.args else None)
            if tested is None:
                continue
            start, end = text.span(tested)
            if not (start <= gate.start and gate.end <= end):
                continue
            if isinstance(node, ast.If):
                what = _ending(node.body)
            else:
                name = _polarity._callee(node)
                what = "skip" if _SKIP_CALL.search(name) else ""
            if best is None or start >= best[0]:
                best = (start, what)
    return best[1] if best is not None else ""


def _ending(body: list[ast.stmt]) -> str:
    last = body[-1] if body else None
    if isinstance(last, ast.Raise):
        return "raise"
    if isinstance(last, ast.Return):
        return "return"
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and _SKIP_CALL.search(_polarity._callee(last.value)):
        return "skip"
    return ""


def assigned(source: bytes, gate: Gate, tree: ast.Module | None, text: PythonText) -> str:
    """The dotted target of the assignment (`=`, annotated, augmented) whose value holds the gate (`out_dtype = x
    if major == 10 else y`, `flag = is_sm120a_supported(dev)`, `operations += gen(has_arch(120))`)."""
    if isinstance(gate.detail.get("assigns"), str):
        return gate.detail["assigns"]
    if tree is None:
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ASSIGNMENTS) and node.value is not None:
            start, end = text.span(node.value)
            if start <= gate.start and gate.end <= end:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                return ast.unparse(targets[0])
    return ""


def passed_to(gate: Gate, tree: ast.Module | None, text: PythonText) -> str:
    """The function the gate is an argument of (`make_spec` for `make_spec(supported_major_versions=[10])`)."""
    if tree is None:
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            values = [*node.args, *(k.value for k in node.keywords)]
            if any(text.span(value) == (gate.start, gate.end) for value in values):
                return called(node)
    return ""


def pick(source: bytes, gates: list[Gate], picks: Mapping[str, Any]) -> list[Gate]:
    """The gates `body` and `nth` leave (all of them without either)."""
    if "body" in picks:
        tree, text = _parsed(source)
        gates = [g for g in gates if body_of(source, g, text, tree) == picks["body"]]
    if "nth" in picks:
        n = picks["nth"]
        gates = gates[n - 1 : n]
    return gates


def _parsed(source: bytes) -> tuple[ast.Module | None, PythonText]:
    try:
        return ast.parse(source), PythonText(source)
    except (SyntaxError, ValueError):
        return None, PythonText(source)


def ambiguity(
    file: str, source: bytes, found: list[Gate], contested: list[Gate], described: str, selectors: tuple[str, ...],
    narrowed: Callable[[dict[str, Any]], list[Gate]],
) -> str:
    """Why a change whose selectors leave several gates to widen (`contested`, of the matches `found`) is refused:
    each (file:line and text) with the fields that pick it alone, `nth` last. A field is offered only when
    `narrowed` (the gates left to widen with it added to the change) leaves that gate and no other."""
    tree, text = _parsed(source) if file.endswith(".py") else (None, PythonText(source))
    rows = []
    for gate in contested:
        offers: list[dict[str, Any]] = []
        body = body_of(source, gate, text, tree) if tree is not None else ""
        if body:
            offers.append({"body": body})
        target = assigned(source, gate, tree, text) if "assigns" in selectors else ""
        if target:
            offers.append({"assigns": target})
        callee = passed_to(gate, tree, text) if "call" in selectors else ""
        if callee:  # the call a list is passed to (python_arch_list)
            offers.append({"call": callee})
        if gate.admits.names():
            offers.append({"admits": sorted(gate.admits.names(), key=_arch_order)})
        tells = [_spelled(offer) for offer in offers if [(g.start, g.end) for g in narrowed(offer)] == [(gate.start, gate.end)]]
        tells.append(f"nth = {found.index(gate) + 1}")
        lines = gate.text.strip().splitlines() or [""]
        rows.append(f"{file}:{gate.line}: `{lines[0].strip()}`{' ...' if len(lines) > 1 else ''} (pick it with {' or '.join(tells)})")
    return (
        f"{described} matches {len(contested)} gates to widen in {file}; a change widens one unless it says "
        "`all = true`:\n    " + "\n    ".join(rows)
    )


def _spelled(offer: dict[str, Any]) -> str:
    ((key, value),) = offer.items()
    if isinstance(value, list):
        return f"{key} = [" + ", ".join(f'"{v}"' for v in value) + "]"
    return f'{key} = "{value}"'


def _arch_order(name: str) -> tuple[int, str]:
    digits = re.sub(r"\D", "", name)
    return (int(digits) if digits else 0, name)
