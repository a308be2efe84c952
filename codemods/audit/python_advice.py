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
- *deliberate*: a comment over the statement (or a trailing one) names the
  arch with an exclusion word (`excludes SM121/GB10`, `Do not widen it to
  every SM12x device`): the arch is left out on purpose (needs-human).
- *other-arch*: the gate admits only archs of another kind than the arch
  (cpp.instructions.kin) and the arch gets nothing there: the guarded code is
  written for those archs (an SM100 backend default, an SM90 kernel's
  availability check), reviewed, not widened.
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
from codemods.cpp.instructions import kin
from codemods.gates import Gate
from codemods.gates.python import polarity as _polarity
from codemods.gates.python import tree_index
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
# A test of the platform, not the arch (SGLang's `_is_musa = is_musa()`, `_is_hip`, `current_platform.is_npu()`).
_PLATFORM = re.compile(r"(?:[\w.]+(?:\(\))?\.)?_?is_(cuda|musa|hip|rocm|npu|xpu|mps|cpu)(?:\(\))?")
# Names a tuning branch sets: block and tile sizes, warps, stages, splits, chunk sizes, thread counts.
_TUNING = re.compile(r"(?i)block|tile|warp|stage|split|chunk|thread|^num_|^b[mnk]$|^cta")


def advise(
    text: PythonText, tree: ast.Module, gates: list[Gate], arch: Arch, deliberate: tuple[tuple[str, str], ...] = ()
) -> dict[int, classify.Path]:
    """The path of each gate (by index in `gates`) that excludes `arch` and whose statement says more than the
    generic one; the others keep their kind's path. `deliberate`: the predicates whose definition leaves `arch`
    out on purpose (audit.scan.deliberate_predicates), with what their comment says."""
    wanted = [i for i, gate in enumerate(gates) if (_generic(gate) or _assigned(gate)) and gate.admits.admits(arch) is False]
    if not wanted:
        return {}
    reader = _Reader(text, tree, gates, arch, deliberate)
    paths = {}
    for i in wanted:
        gate = gates[i]
        path = reader.path(gate) if _generic(gate) else None
        if path is None and "choice" not in gate.detail:
            # a decorator's test, a class's `supported_capabilities`: the generic path, unless it is another kind's
            path = reader.other_kind(gate, classify.python_path(gate.kind, f"`{gate.context}`" if gate.context else "",
                                                                 arch))
        if path is not None:
            paths[i] = path
    return paths


def _assigned(gate: Gate) -> bool:
    """A list of capabilities assigned to a name (python_arch_list's `supported_capabilities = {(9, 0), (10, 0)}`),
    not a JIT spec's `supported_major_versions`, which the JIT readers decide by the modules' sources."""
    return gate.kind == "python_arch_list" and bool(gate.detail.get("assigns"))


def _generic(gate: Gate) -> bool:
    numbered = gate.kind == "python_arch_call" and gate.detail.get("numbered")  # vLLM's platform predicates
    if (gate.kind not in _KINDS and not numbered) or "returns_early" in gate.detail:
        return False
    return "value" not in gate.detail  # a choice between two values is read for tuning only


class _Reader:
    def __init__(
        self, text: PythonText, tree: ast.Module, gates: list[Gate], arch: Arch,
        deliberate: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.text, self.gates, self.arch = text, gates, arch
        # `is_sm120` called, not `x.is_sm120` nor `is_sm120_supported`; `.is_sm100` only as an attribute
        self.chosen = [(re.compile(rf"\.{re.escape(name[1:])}\b" if name.startswith(".")
                                       else rf"(?<![\w.]){re.escape(name)}\b"), name, said)
                           for name, said in deliberate]
        shared = tree_index.index(tree)
        self.up: dict[int, ast.AST] = shared.parents
        self.nodes: list[tuple[int, int, ast.AST]] = [(*text.span(node), node) for node in shared.of_type(ast.stmt, ast.IfExp)]

    # ------------------------------------------------------------ where the gate sits

    def holder(self, gate: Gate) -> ast.AST | None:
        around = [(start, -end, node) for start, end, node in self.nodes if start <= gate.start and gate.end <= end]
        return max(around, key=lambda item: (item[0], item[1]))[2] if around else None

    def within(self, gate: Gate, node: ast.AST | None) -> bool:
        """Whether the gate lies in `node`; parentheses written around the gate (`assert (P or Q), msg`) are not
        part of the expression ast gives, and do not take it out."""
        if node is None:
            return False
        start, end = self.text.span(node)  # type: ignore[arg-type]
        first, last = gate.start, gate.end
        data = self.text.data
        while first < last and data[first : first + 1] in b"( \t\r\n" and data[last - 1 : last] in b") \t\r\n":
            first, last = first + 1, last - 1
        return start <= first and last <= end

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
        path = self.read(gate)
        if path is not None and path.gets in (classify.NOTHING, classify.ERROR):
            return self.deliberate(gate) or self.other_kind(gate, path) or path
        return path

    def deliberate(self, gate: Gate) -> classify.Path | None:
        """A needs-human path when a comment over the statement holding the gate says the arch is left out on
        purpose."""
        node = self.holder(gate)
        said = deliberate_exclusion(self.text.data, getattr(node, "lineno", gate.line), gate.line, self.arch)
        if said is None:
            for pattern, predicate, words in self.chosen:
                if pattern.search(gate.text):
                    return classify.Path(classify.REQUIRED, f"`{predicate.lstrip('.')}` leaves {self.arch.name} out "
                                                            f"on purpose (its definition says \"{words}\"): widen "
                                                            f"only if {self.arch.name} now meets what it names")
            return None
        return classify.Path(classify.REQUIRED, f"left out on purpose (the comment says \"{said}\"): widen only if "
                                                f"{self.arch.name} now meets what it names")

    def other_kind(self, gate: Gate, path: classify.Path) -> classify.Path | None:
        """An other-arch path when every arch the gate admits is of another kind than the arch: the code it lets
        through is written for them, not an oversight to widen."""
        admitted = gate.admits.admitted
        if not admitted or any(kin(a, self.arch) for a in admitted):
            return None
        written = ", ".join(gate.admits.names())
        return classify.Path(classify.OTHER, f"written for {written}, another kind of arch than {self.arch.name}: "
                                             f"{path.reason}; the code it selects is theirs, so review it, do not "
                                             "widen it")

    def read(self, gate: Gate) -> classify.Path | None:
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
            around = self.enclosing(node)
            if around is not None:
                return classify.Path(*around)
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
        return self.enclosing(node)

    def enclosing(self, node: ast.stmt) -> tuple[str, str, int] | None:
        """(gets, reason, line) when an `if` arm around `node` is one the arch never reaches: an earlier arm of its
        chain takes the arch, its test excludes the arch, or `node` is in the `else` of a test the arch takes."""
        name = self.arch.name
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
            if isinstance(parent, ast.If) and child in parent.orelse and self.holds(parent.test, None):
                return (classify.OUTER, f"inside the `else` of `if {self.source(parent.test)}` (line "
                                        f"{parent.lineno}), whose test {name} takes", parent.lineno)
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

    def holds(self, test: ast.expr, later: ast.expr | None) -> bool | None:
        """Whether `test` holds on the arch: a gate in it decides; an `and` operand that is no gate holds when the
        later arm's test (`later`) has it too (`_is_cuda and cap >= 9` ... `elif _is_cuda and cap >= 8`); with no
        later arm, only gates decide."""
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
            platform = _PLATFORM.fullmatch(self.source(test))
            if platform is not None:  # the scanned arch is an NVIDIA GPU: `_is_musa` is False, `is_cuda()` True
                return platform.group(1) == "cuda"
            if later is None:
                return None
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


# A comment that leaves an arch out on purpose: an exclusion word (`excludes SM121/GB10`, `Do not widen it to every
# SM12x device`, `unlike is_sm120_supported()`); SGLang's own words in 0.5.23's common.py and qwen_sparse_attn_backend.py.
_EXCLUDING = re.compile(r"(?i)\b(?:exclud\w*|do not|don't|never|unlike|avoid\w*|unsupported|corrupt\w*|broken"
                        r"|not (?:on|for|supported|validated|tested|safe))\b")


def deliberate_exclusion(data: bytes, first_line: int, gate_line: int, arch: Arch) -> str | None:
    """The comment that says `arch` is left out on purpose, if any: the comment block right above the statement
    starting at `first_line` (its decorators skipped), or a comment from there to the end of `gate_line`. It names
    the arch (`SM121`, `sm_121`) or its major's family (`SM12x`) and has an exclusion word."""
    lines = data.splitlines()
    named = re.compile(rf"(?i)\bsm[_ ]?(?:{arch.major}{arch.minor}[af]?|{arch.major}x)\b")
    comments = []
    index = first_line - 2
    while index >= 0 and lines[index].lstrip().startswith(b"@"):
        index -= 1
    while index >= 0 and lines[index].lstrip().startswith(b"#"):
        comments.append(lines[index])
        index -= 1
    comments.reverse()
    comments += [line[line.index(b"#"):] for line in lines[first_line - 1 : gate_line] if b"#" in line]
    block = " ".join(line.decode("utf-8", "replace").strip().lstrip("#").strip() for line in comments)
    for sentence in re.split(r"(?<=[.;])\s+", block):
        if named.search(sentence) and _EXCLUDING.search(sentence):
            return sentence[:120]
    return None


def definition_path(data: bytes, tree: ast.Module, gate: Gate, path: classify.Path, arch: Arch) -> classify.Path:
    """An arch predicate's definition (python_predicate) whose comment says it leaves the arch out on purpose
    (`# Unlike is_sm120_supported(), this excludes SM121/GB10.` over `def is_sm120()`) is a definition, not a
    blocker: its callers chose it for what it admits. Any other path is returned unchanged."""
    if path.gets not in (classify.NOTHING, classify.FALLBACK):
        return path
    for node in ast.walk(tree):
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == gate.context
                and node.lineno <= gate.line <= (node.end_lineno or node.lineno)):
            said = deliberate_exclusion(data, node.lineno, node.lineno, arch)
            if said is not None:
                return classify.Path(classify.DEFINED, f"the definition of the arch predicate `{gate.context}`, "
                                                       f"which leaves {arch.name} out on purpose (the comment says "
                                                       f"\"{said}\"): its callers are the gates")
    return path


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
