"""Arch predicate definitions: the `return` that decides a predicate is a gate (read by `scan`).

    def is_sm120f_supported(device: torch.device) -> bool:
        major, minor = get_compute_capability(device)
        return major == 12 and minor == 0 and version_at_least(torch.version.cuda, "12.9")

Every caller of a predicate gets what its definition says, so the
definition is a gate of its own: this one admits sm_120 only (FlashInfer
0.6.10; upstream ec0178acd dropped `minor == 0`). What it admits is read by
`predicates.reading` from the definition, never from the name (the same reader
`codemod run` uses for or-chains). The name says which build target the
predicate stands for (`is_sm120f_supported`: the family target sm_120f,
which runs on sm_121; `is_sm120a_supported`: sm_120a, which does not):
`covers` tells whether that target runs on an arch, so that scan can tell a
predicate that refuses an arch its own target runs on (a blocker) from one
that is right to refuse it. A module-level function whose name has a
predicate's shape (`is_smNN...`, `has_smNN...`) and whose meaning is read
is a gate; one that cannot be read is left to the predicates' readers (they
report their callers as unknown). No edit: changing a predicate changes
every caller, which is a human's decision.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.gates import CannotWiden, Edit, Gate
from codemods.gates.python.predicates import reading
from codemods.gates.python.predicates.evaluation import PREDICATE_NAME
from codemods.gates.python.predicates.reading import Meaning
from codemods.gates.python.ast_text import PythonText, ast_of

KIND = "python_predicate"

# A file that may define a predicate: nothing else is worth reading for this kind.
PREFILTER = re.compile(rb"^[ \t]*(?:async[ \t]+)?def[ \t]+_?(?:is|has)_(?:sm\d|blackwell|hopper)", re.MULTILINE)
# The build target a predicate's name stands for: is_sm120f_supported -> sm_120, family
_TARGET_RE = re.compile(r"^_?(?:is|has)_sm(?P<number>\d{2,3})(?P<suffix>[af]?)(?:_supported)?$")


def find(source: bytes, universe: tuple[Arch, ...] = DEFAULT_ARCHS, known: Mapping[str, Meaning] | None = None,
         tree: ast.Module | None = None, file: str = "") -> list[Gate]:
    """The deciding `return` of each predicate defined at module level, with what the definition admits.

    `known`: meanings from other files (a predicate defined through
    another); `tree`: the module, when the caller has parsed it already;
    `file`: its path, as the caller read the same tree's meanings (read once).
    """
    if tree is None:
        try:
            tree = ast_of(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return []
    meanings = reading.read_tree(tree, file, known)
    text = PythonText(source)
    gates = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not PREDICATE_NAME.match(node.name):
            continue
        meaning = meanings.get(node.name)
        returned = [stmt for stmt in node.body if isinstance(stmt, ast.Return) and stmt.value is not None]
        if meaning is None or not meaning.known or not returned:
            continue
        value = returned[-1].value
        assert value is not None
        start, end = text.span(value)
        detail: dict = {"predicate": node.name}
        if built := target(node.name):
            detail["target"] = built
        gates.append(Gate(
            kind=KIND, start=start, end=end, line=value.lineno, text=source[start:end].decode("utf-8"),
            admits=meaning.archs(universe), context=node.name, detail=detail,
        ))  # fmt: skip
    return gates


def target(name: str) -> str:
    """The build target a predicate's name stands for (`is_sm120f_supported` -> `sm_120f`, `is_sm90a_supported` ->
    `sm_90a`, `has_sm100` -> `sm_100`); "" for a name that names none."""
    match = _TARGET_RE.match(name)
    return f"sm_{match['number']}{match['suffix']}" if match else ""


def covers(target: str, arch: Arch) -> bool | None:
    """Whether code built for `target` (a predicate's name: `sm_120f`, `sm_120a`) runs on `arch`: a family
    target (`f`) on every later minor of its major, an arch-specific one (`a`) on that arch only (ARCH_FACTS:
    compute_120f -> sm_121 accepted, compute_120a -> sm_121a refused). None for a plain number, whose name
    says no more than the arch (SGLang's `is_sm120_supported` checks the major)."""
    match = re.fullmatch(r"sm_(\d{2,3})([af]?)", target)
    if match is None or not match.group(2):
        return None
    built = Arch.parse(f"sm_{match.group(1)}")
    if match.group(2) == "a":
        return (arch.major, arch.minor) == (built.major, built.minor)
    return arch.major == built.major and arch.minor >= built.minor



def admits(text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> ArchSet:
    """Unknown: a `return` read alone lacks the names its function binds (`major, minor = ...`)."""
    return ArchSet(universe, frozenset(), frozenset(universe))


def widen(source: bytes, gate: Gate, targets: tuple[Arch, ...]) -> list[Edit]:
    """Never: every caller of the predicate would change with it."""
    if all(gate.admits.admits(arch) for arch in targets):
        return []
    raise CannotWiden(
        f"line {gate.line}: `{gate.context}` is a predicate every caller uses; change its definition by hand"
    )
