"""What an arch really gets where a Python gate excludes it, read from the statement that holds the gate.

Without this, a Python gate that excludes the arch says "`f` does not run on
the arch", which is true only when the gate decides whether `f` runs. Read
from the statement around it (issue 34 part 1), the gate is:

- a *definition* (`def is_hopper(): return cap == (9, 0)`): a predicate's own
  test, which other gates use; it is not widened (classification
  `definition`). A name that covers the arch (`is_blackwell` for sm_120)
  while its test does not needs a human.
- a *requirement*: an `assert`, or an `if` whose body raises (or skips), whose message
  names an arch (`"requires SM>=80 and SM<=90"`): the arch is refused on
  purpose (needs-human, never widenable).
- *tuning*: an `if` (or `x if test else y`) that only sets block sizes,
  warps, stages and other heuristics (classification `tuning`: review the
  values the arch gets).
- *not reached*: an earlier arm of its `if`/`elif` chain, or of a chain
  around it, takes the arch (`>= 9` before `>= 8`), or an arm around it
  excludes the arch (covered).
- otherwise an `if` inside a function: the function runs; the arch skips the
  body. It takes the `else`, or keeps the value set before the `if`
  (needs-human: a fallback), or the function stops there (`raise`), or it
  only misses the body (widenable, said as such).

Pure: source text and gates in, paths out.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from codemods.audit import classify
from codemods.core.arch import Arch
from codemods.gates import Gate
from codemods.gates.python import polarity as _polarity
from codemods.gates.python.ast_text import PythonText

# The key on a record whose path came from here, while the scan's later readers run (audit.jit_classify); the scan
# removes it before the result is returned.
ADVISED = "_advised"
# The kinds whose default path is the generic "`f` does not run on the arch" (records._default_path).
_KINDS = ("python_capability", "python_arch_test", "python_arch_or")
# A message that names an arch: `SM>=80`, `sm_90`, `SM 9.0`, `compute capability 8.0`, `Hopper`.
_ARCH_WORDS = re.compile(
    r"(?i)\bsm\s*_?\s*(?:[<>=!]=?\s*)?\d|compute[ _]capabilit|capability\s*(?:[<>=!]=?\s*)?\(?\d"
    r"|\b(?:hopper|blackwell|ampere|volta|turing|ada)\b"
)
# ... as a range or a limit (`SM>=80 and SM<=90`, `sm75 and above`, `only supported on SM100`): a requirement. A
# message naming one arch of the scanned arch's own family (`needs SM120`, scanning sm_121) is not: the check may
# simply predate the arch.
_RANGE = re.compile(r"(?i)(?:sm|capability)\s*_?\s*(?:>=|<=|>|<)|\b(?:above|below|newer|older|later|at least|up to"
                    r"|between|only)\b")
# ... or as what the code needs (`requires SM90`, `needs an SM100/SM103 GPU`, `require NVLink Blackwell GPUs`):
# SGLang's refusals mostly name no range (bench/precision).
_NEEDS = re.compile(r"(?i)\b(?:requires?|required|needs?|needed|supports?|supported)\b")
_NUMBER = re.compile(r"(?i)\bsm\s*_?\s*(?:[<>=!]=?\s*)?(\d{2,3})")
# Names a tuning branch sets: block and tile sizes, warps, stages, splits, chunk sizes, thread counts.
_TUNING = re.compile(r"(?i)block|tile|warp|stage|split|chunk|thread|^num_|^b[mnk]$|^cta")


def advise(text: PythonText, tree: ast.Module, gates: list[Gate], arch: Arch) -> dict[int, classify.Path]:
    """The path of each gate (by index in `gates`) that excludes `arch` and whose statement says more than the
    generic one; the others keep their kind's path."""
    wanted = [i for i, gate in enumerate(gates) if _generic(gate) and gate.admits.admits(arch) is False]
    if not wanted:
        return {}
    reader = _Reader(text, tree, gates, arch)
    paths = {}
    for i in wanted:
        path = reader.path(gates[i])
        if path is not None:
            paths[i] = path
    return paths


def _generic(gate: Gate) -> bool:
    numbered = gate.kind == "python_arch_call" and gate.detail.get("numbered")  # vLLM's platform predicates
    if (gate.kind not in _KINDS and not numbered) or "returns_early" in gate.detail:
        return False
    return "value" not in gate.detail  # a choice between two values is read for tuning only


class _Reader:
    def __init__(self, text: PythonText, tree: ast.Module, gates: list[Gate], arch: Arch) -> None:
        self.text, self.gates, self.arch = text, gates, arch
        self.up: dict[int, ast.AST] = {}
        self.nodes: list[tuple[int, int, ast.AST]] = []
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.up[id(child)] = node
            if isinstance(node, (ast.stmt, ast.IfExp)):
                self.nodes.append((*text.span(node), node))

    # ------------------------------------------------------------ where the gate sits

    def holder(self, gate: Gate) -> ast.AST | None:
        around = [(start, -end, node) for start, end, node in self.nodes if start <= gate.start and gate.end <= end]
        return max(around, key=lambda item: (item[0], item[1]))[2] if around else None

    def within(self, gate: Gate, node: ast.AST | None) -> bool:
        if node is None:
            return False
        start, end = self.text.span(node)  # type: ignore[arg-type]
        return start <= gate.start and gate.end <= end

    def function(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        parent = self.up.get(id(node))
        while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parent = self.up.get(id(parent))
        return parent

    def source(self, node: ast.AST) -> str:
        start, end = self.text.span(node)  # type: ignore[arg-type]
        return " ".join(self.text.data[start:end].decode("utf-8", "replace").split())

    # ------------------------------------------------------------ what the arch gets

    def path(self, gate: Gate) -> classify.Path | None:
        node = self.holder(gate)
        name = self.arch.name
        if isinstance(node, ast.IfExp) and self.within(gate, node.test):
            statement = self.up.get(id(node))
            if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = _targets([statement])
                if targets and all(_TUNING.search(t) for t in targets):
                    return classify.Path(classify.TUNES, f"a tuning choice: it picks {', '.join(targets)} by "
                                                         f"capability; review the value {name} gets")
            if "choice" in gate.detail or "value" in gate.detail:
                return None  # the kind's own reader said which value the arch gets
            return classify.value_path(self.source(node.orelse), "", self.arch)
        if "value" in gate.detail or "choice" in gate.detail:
            return None
        if isinstance(node, ast.Assert) and self.within(gate, node.test):
            message = self.source(node.msg) if node.msg is not None else ""
            if _requirement(message, self.arch):
                return classify.Path(classify.REQUIRED, f"a stated requirement (the assert says {message}): {name} "
                                                        "is refused on purpose; widen only if the code now meets it")
            return classify.Path(classify.ERROR, f"the assert at line {node.lineno} fails on {name}")
        if isinstance(node, ast.Return) and self.within(gate, node.value):
            return self.definition(node)
        if isinstance(node, ast.If) and self.within(gate, node.test):
            return self.branch(node, gate)
        return None

    def definition(self, node: ast.Return) -> classify.Path | None:
        function = self.function(node)
        if function is None or not isinstance(node.value, (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Call)):
            return None
        admitted = [name for name in self.admitted(node.value).split(", ") if name != "none"]
        return classify.predicate_path(function.name, None, admitted, self.arch)

    def admitted(self, node: ast.AST) -> str:
        names: dict[str, None] = {}
        for gate in self.gates:
            if self.within(gate, node):
                names.update(dict.fromkeys(gate.admits.names()))
        return ", ".join(names) or "none"

    def older_only(self, gate: Gate) -> bool:
        """Whether the gate admits only archs of older majors than the arch, down to the oldest scanned (`< 8`,
        `< 9`): a check for older GPUs, which widening would put the arch on."""
        admitted = gate.admits.admitted
        universe = gate.admits.universe
        if any(a.major >= self.arch.major for a in admitted):
            return False
        oldest = min(universe, key=lambda a: (a.major, a.minor)) if universe else None
        return not admitted or (oldest is not None and oldest in admitted)

    def branch(self, node: ast.If, gate: Gate) -> classify.Path | None:
        name = self.arch.name
        reached = self.not_reached(node)
        targets = _targets(node.body)
        if _only_settings(node.body) and targets and any(_TUNING.search(t) for t in targets):
            where = f"; {reached[1]}" if reached is not None else ""
            return classify.Path(classify.TUNES, f"a tuning branch: it sets {', '.join(targets)}{where}; review the "
                                                 f"values {name} gets")
        if reached is not None:
            return classify.Path(reached[0], reached[1], reached[2])
        if _raises(node.body) or (_polarity.exits(node.body) and isinstance(node.body[-1], ast.Expr)):
            message = self.source(node.body[-1])  # a raise, or a skip (`self.skipTest("requires SM90")`)
            if _requirement(message, self.arch):
                return classify.Path(classify.REQUIRED, f"a stated requirement (`{message}`): {name} is refused on "
                                                        "purpose; widen only if the code now meets it")
        function = self.function(node)
        inside = f"`{function.name}`" if function is not None else "the module"
        if not _polarity.exits(node.body) and self.older_only(gate):
            admitted = ", ".join(gate.admits.names()) or "none of the archs scanned"
            return classify.Path(classify.IMPLEMENTATION, f"a branch for older GPUs (it admits {admitted}): {name} "
                                                          "runs the code written for newer ones")
        if _polarity.exits(node.body):
            return classify.Path(classify.ERROR, f"{inside} stops on {name} at line {node.body[-1].lineno} "
                                                 f"(`{self.source(node.body[-1])[:60]}`)")
        if node.orelse:
            return classify.Path(classify.FALLBACK, f"{name} takes the `else` at line {node.orelse[0].lineno} in "
                                                    f"{inside} instead; widening would change which path it runs",
                                 node.orelse[0].lineno)
        before = self.set_before(node, targets)
        if targets and before is not None:
            return classify.Path(classify.FALLBACK, f"{name} keeps {', '.join(f'`{t}`' for t in targets)} as set "
                                                    f"before the `if` (line {before}) in {inside}; widening would "
                                                    "change which value it runs with", before)
        return classify.Path(classify.NOTHING, f"the `if` body at line {node.lineno} does not run on {name}; "
                                               f"{inside} itself runs and goes on after it")

    def not_reached(self, node: ast.If) -> tuple[str, str, int] | None:
        """(gets, reason, line) when an earlier arm of the chain `node` is in takes the arch, or an arm around
        `node` is one the arch never reaches."""
        name = self.arch.name
        earlier = self.earlier_taking(node)
        if earlier is not None:
            return (classify.IMPLEMENTATION, f"{name} takes the earlier arm `{self.source(earlier.test)}` (line "
                                             f"{earlier.lineno}) of this if/elif chain", earlier.lineno)
        leaving = self.earlier_leaving(node)
        if leaving is not None:
            return (classify.IMPLEMENTATION, f"{name} never gets here: the earlier `if {self.source(leaving.test)}` "
                                             f"(line {leaving.lineno}) returns on it", leaving.lineno)
        child: ast.AST = node
        parent = self.up.get(id(child))
        while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if isinstance(parent, ast.If) and child in parent.body:
                earlier = self.earlier_taking(parent)
                if earlier is not None:
                    return (classify.OUTER, f"inside the arm `{self.source(parent.test)}` (line {parent.lineno}), "
                                            f"which {name} never reaches: the earlier arm `{self.source(earlier.test)}` "
                                            f"(line {earlier.lineno}) takes it", earlier.lineno)
                if self.holds(parent.test, parent.test) is False:
                    return (classify.OUTER, f"inside `if {self.source(parent.test)}` (line {parent.lineno}), which "
                                            f"{name} does not take", parent.lineno)
            child, parent = parent, self.up.get(id(parent))
        return None

    def earlier_taking(self, node: ast.If) -> ast.If | None:
        for arm in self.earlier_arms(node):
            if self.holds(arm.test, node.test):
                return arm
        return None

    def earlier_leaving(self, node: ast.If) -> ast.If | None:
        """An earlier `if` of `node`'s own block, with no `else`, that the arch takes and whose body ends in a
        `return`: `if major >= 10: return A` then `if major == 9: return B` is a chain written without `elif`.
        One that raises is a refusal, not another way: once it is widened the arch reaches `node`, which then
        needs widening too, so it hides nothing."""
        parent = self.up.get(id(node))
        block = next((getattr(parent, f) for f in ("body", "orelse", "finalbody")
                      if node in (getattr(parent, f, None) or [])), None)
        if not block:
            return None
        for statement in block[: block.index(node)]:
            if (isinstance(statement, ast.If) and not statement.orelse and statement.body
                    and isinstance(statement.body[-1], ast.Return)
                    and self.holds(statement.test, node.test)):
                return statement
        return None

    def earlier_arms(self, node: ast.If) -> Iterator[ast.If]:
        parent = self.up.get(id(node))
        while isinstance(parent, ast.If) and len(parent.orelse) == 1 and parent.orelse[0] is node:
            yield parent
            node, parent = parent, self.up.get(id(parent))

    def holds(self, test: ast.expr, later: ast.expr) -> bool | None:
        """Whether `test` holds on the arch: a gate in it decides; an `and` operand that is no gate holds when the
        later arm's test (`later`) has it too (`_is_cuda and cap >= 9` ... `elif _is_cuda and cap >= 8`)."""
        if isinstance(test, ast.BoolOp):
            values = [self.holds(value, later) for value in test.values]
            if isinstance(test.op, ast.And):
                return False if False in values else (True if all(values) else None)
            return True if True in values else (False if all(v is False for v in values) else None)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.holds(test.operand, later)
            return None if inner is None else not inner
        inside = [gate for gate in self.gates if self.within(gate, test)]
        if len(inside) == 1 and self.source(test).strip("() ") == " ".join(inside[0].text.split()).strip("() "):
            return inside[0].admits.admits(self.arch)
        if not inside:
            shared = {self.source(part) for part in _operands(later)}
            return True if self.source(test) in shared else None
        return None

    def set_before(self, node: ast.If, targets: list[str]) -> int | None:
        """The line of the last statement before `node` in its block that sets every name in `targets`."""
        parent = self.up.get(id(node))
        body = next((getattr(parent, f) for f in ("body", "orelse", "finalbody")
                     if node in (getattr(parent, f, None) or [])), None)
        if not body or not targets:
            return None
        found: dict[str, int] = {}
        for statement in body[: body.index(node)]:
            for target in _targets([statement]):
                found[target] = statement.lineno
        if all(t in found for t in targets):
            return max(found[t] for t in targets)
        return None


def _operands(test: ast.expr) -> list[ast.expr]:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return list(test.values)
    return [test]


def _targets(body: list[ast.stmt]) -> list[str]:
    """The names a block sets (nested `if` arms too), in order."""
    names: dict[str, None] = {}
    for statement in body:
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                names.update(dict.fromkeys(_names(target)))
        elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
            names.update(dict.fromkeys(_names(statement.target)))
        elif isinstance(statement, ast.If):
            names.update(dict.fromkeys(_targets(statement.body) + _targets(statement.orelse)))
    return list(names)


def _names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Attribute):
        return [target.attr]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _names(element)]
    return []


def _only_settings(body: list[ast.stmt]) -> bool:
    """Whether a block only sets names (nested `if` arms of the same): what a tuning branch is made of."""
    for statement in body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Pass)):
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue
        if isinstance(statement, ast.If) and _only_settings(statement.body) and _only_settings(statement.orelse):
            continue
        return False
    return bool(body)


def _requirement(message: str, arch: Arch) -> bool:
    """Whether a message states an arch requirement the arch is refused by: it names an arch range or limit, or
    what the code needs (`requires SM90`), and no arch of the arch's own major."""
    if not (_ARCH_WORDS.search(message) and (_RANGE.search(message) or _NEEDS.search(message))):
        return False
    return all(int(number) // 10 != arch.major for number in _NUMBER.findall(message))


def _raises(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Raise)
