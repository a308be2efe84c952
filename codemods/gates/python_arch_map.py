"""Dicts keyed by arch strings whose lookup fails for a missing arch: a gate admitting the keys (read by `scan`).

    _TMEM_MAX_ALLOC_COLUMNS_MAP = {"sm_100": 512, "sm_103": 512, "sm_120": 512}

    def get_max_tmem_alloc_cols(compute_capability: str) -> int:
        if compute_capability not in _TMEM_MAX_ALLOC_COLUMNS_MAP:
            raise ValueError(f"Unsupported compute capability: {compute_capability}")
        return _TMEM_MAX_ALLOC_COLUMNS_MAP[compute_capability]

A dict literal bound to a name, every key an arch string (`"sm_100"`,
`"sm_120a"`, `"sm100"`), is a gate when the file looks it up so that an arch
it lacks gets an error: a membership test guarding a path that runs only
for its keys (`if cc not in MAP: raise`, `assert cc in MAP`; `_polarity`
reads which way the test goes) or an index with a computed key (`MAP[cc]`,
a KeyError). It admits the archs its keys name: a plain or `a` key its own
arch, a family key (`"sm_120f"`) every later minor of its major. A map read
with `.get(key, default)` or only iterated is no gate. No edit: a new key
needs a value (columns, a tile shape) that only the author knows (upstream
5a767523c added `"sm_121": 512` by hand).
"""

from __future__ import annotations

import ast
import re

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.gates import CannotWiden, Edit, Gate, _polarity
from codemods.gates._python import PythonText

KIND = "python_arch_map"

# A file that may hold an arch-keyed dict: nothing else is worth parsing for this kind.
PREFILTER = re.compile(rb"[\"']sm_?\d{2,3}[af]?[\"']\s*:")
_KEY_RE = re.compile(r"^sm_?(?P<number>\d{2,3})(?P<suffix>[af]?)$")


def find(source: bytes, universe: tuple[Arch, ...] = DEFAULT_ARCHS, tree: ast.Module | None = None) -> list[Gate]:
    """Every arch-keyed dict the file looks up so that a missing key fails, in source order."""
    if tree is None:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return []
    maps: dict[str, tuple[ast.Assign, ast.Dict, list[str]]] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Dict) and node.value.keys
        ):
            keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if len(keys) == len(node.value.keys) and all(_KEY_RE.match(k) for k in keys):
                maps[node.targets[0].id] = (node, node.value, keys)
    if not maps:
        return []
    up = _polarity.parents([tree])
    failing: dict[str, int] = {}
    for node in ast.walk(tree):
        name, line = _failing_lookup(node, maps, up)
        if name is not None and name not in failing:
            failing[name] = line
    text = PythonText(source)
    gates = []
    for name, line in failing.items():
        assign, literal, keys = maps[name]
        start, end = text.span(literal)
        gates.append(Gate(
            kind=KIND, start=start, end=end, line=assign.lineno, text=source[start:end].decode("utf-8"),
            admits=ArchSet(universe, frozenset(a for a in universe if any(_admits(k, a) for k in keys))),
            context=name, detail={"map": name, "lookup": line},
        ))  # fmt: skip
    gates.sort(key=lambda gate: gate.start)
    return gates


def _failing_lookup(node: ast.AST, maps: dict, up: dict[int, ast.AST]) -> tuple[str | None, int]:
    """(the map's name, the line) when `node` looks a map up so that a missing arch fails."""
    if (
        isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name)
        and node.value.id in maps and not isinstance(node.slice, ast.Constant) and not _guarded(node, node.value.id, up)
    ):
        return node.value.id, node.lineno
    if (
        isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))
        and isinstance(node.comparators[0], ast.Name) and node.comparators[0].id in maps
    ):
        test, runs = _polarity.need(node, up)
        parent = up.get(id(test))
        if test is node and isinstance(parent, (ast.If, ast.Assert)):
            # the guarded path runs only where the key is in the map
            if runs == isinstance(node.ops[0], ast.In) and (isinstance(parent, ast.Assert) or not runs):
                return node.comparators[0].id, node.lineno
    return None, 0


def _guarded(node: ast.AST, name: str, up: dict[int, ast.AST]) -> bool:
    """Whether a lookup sits in a `try` or under a test of the map (`if cc in MAP:`): a missing key is handled."""
    child, parent = node, up.get(id(node))
    while parent is not None:
        if isinstance(parent, ast.Try) and child in parent.body:
            return True
        if isinstance(parent, (ast.If, ast.IfExp, ast.While)) and child is not parent.test:
            if any(isinstance(n, ast.Compare) and any(isinstance(c, ast.Name) and c.id == name for c in n.comparators)
                   for n in ast.walk(parent.test)):
                return True
        child, parent = parent, up.get(id(parent))
    return False


def _admits(key: str, arch: Arch) -> bool:
    match = _KEY_RE.match(key)
    assert match is not None
    major, minor = divmod(int(match["number"]), 10)
    if match["suffix"] == "f":
        return arch.major == major and arch.minor >= minor
    return (arch.major, arch.minor) == (major, minor)


def admits(text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> ArchSet:
    """The archs a dict literal's keys name; unknown when the text is not such a dict."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        node = None
    entries = node.keys if isinstance(node, ast.Dict) else []
    keys = [k.value for k in entries if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    if not keys or len(keys) != len(entries) or not all(_KEY_RE.match(k) for k in keys):
        return ArchSet(universe, frozenset(), frozenset(universe))
    return ArchSet(universe, frozenset(a for a in universe if any(_admits(k, a) for k in keys)))


def widen(source: bytes, gate: Gate, targets: tuple[Arch, ...]) -> list[Edit]:
    """Never: a new key needs a value only the author knows."""
    if all(gate.admits.admits(arch) for arch in targets):
        return []
    raise CannotWiden(f"line {gate.line}: `{gate.context}` needs a value for the new arch's key; add it by hand")
