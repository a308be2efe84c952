"""python_arch_map's capability tables: dicts keyed by capability numbers (vLLM's `FI_ALLREDUCE_FUSION_MAX_SIZE_MB =
{90: {...}, 100: {...}}`), what makes one, how a file looks one up, the `value_from` selector and the notes a widening
leaves (its rows are copied, not measured). python_arch_map reads and widens them with its string-keyed maps.

A missing row is no error there but a feature quietly off (`.get(capability.to_int(), {})`), so such a dict is a
gate when it is a module-level constant (an UPPER_CASE name; its readers are often in another file) or the file
looks it up with a key that says capability. Widen copies a row only from the one a recipe names with
`value_from = 100` (any literal value, on as many lines as written), never from a guess.
"""

from __future__ import annotations

import ast
import re

from codemods.core.arch import KNOWN_CODES, Arch
from codemods.gates import Gate

# A capability table's row (`    100: {`): tried only in a file that says `capability` (audit.prefilter)
TABLE_PREFILTER = re.compile(rb"\n[ \t]+(?:%s)[ \t]*:" % b"|".join(str(c).encode() for c in KNOWN_CODES))


def code_key(key: ast.expr | None) -> bool:
    """Whether `key` is an integer literal that is a capability code (`100` in `{90: ..., 100: ...}`)."""
    return isinstance(key, ast.Constant) and type(key.value) is int and key.value in KNOWN_CODES


def is_table(literal: ast.Dict) -> bool:
    """Whether the dict is a capability table: integer keys only, each a capability code, and numbers for values
    (or dicts, tuples, lists of them): tuning data, not names (`{120: "blackwell"}` is no table)."""
    return all(code_key(k) for k in literal.keys) and all(numbers(v) for v in literal.values)


def numbers(value: ast.expr) -> bool:
    """A number, or a dict, tuple or list of them (`{2: 64, 4: 32}`): what a table's rows hold."""
    if isinstance(value, ast.Constant):
        return type(value.value) in (int, float)
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        return numbers(value.operand)
    if isinstance(value, ast.Dict):
        return all(k is not None and numbers(k) for k in value.keys) and all(numbers(v) for v in value.values)
    if isinstance(value, (ast.Tuple, ast.List)):
        return all(numbers(v) for v in value.elts)
    return False


def check_selector(name: str, value) -> str:
    """`value_from` is a capability code (`100`, the row a table's new rows copy); the others are strings."""
    if name == "value_from":
        ok = type(value) is int and value in KNOWN_CODES
        return "" if ok else f"'value_from' must be a capability code, one of {', '.join(map(str, KNOWN_CODES))} (`value_from = 100`)"
    return "" if isinstance(value, str) and value else f"{name!r} must be a string"


def capability_lookups(tree: ast.Module, maps: dict) -> list[tuple[str, ast.Call]]:
    """`TABLE.get(capability.to_int(), {})`: a capability table looked up with a key that says capability."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name) and node.func.value.id in maps and node.args
            and is_table(maps[node.func.value.id][1])
            and re.search(r"capabilit|to_int\(\)", ast.unparse(node.args[0]), re.IGNORECASE)
        ):
            found.append((node.func.value.id, node))
    return found


def notes(gate: Gate, targets: tuple[Arch, ...]) -> list[str]:
    """What a capability table's widening copied: rows copied, not measured (said in the dry-run)."""
    value_from = gate.detail.get("value_from")
    if not gate.detail.get("table") or value_from is None:
        return []
    new = [arch.name for arch in dict.fromkeys(targets) if arch.name in gate.detail.get("adds", ())]
    if not new:
        return []
    rows = ", ".join(str(Arch.parse(name).code) for name in new)
    return [
        f"{gate.context}: row(s) {rows} copied from row {value_from}, not measured: tuning values of another arch; "
        "benchmark on the target GPU and adjust them (or back the change out with `codemod revert`)"
    ]
