"""The branch rule: widening an `if`/`elif` arm for an arch that a later arm of the same chain takes today
changes which implementation the arch runs, not whether it runs (issue 38 item 2).

    if major == 10:                      # widened for sm_120, this arm ...
        module = gen_fmha_sm100_module()
    elif major == 12:                    # ... would take sm_120 from the arm written for it (dead code after)
        module = gen_fmha_sm120_module()

`later_arm` names that arm. `codemod run` refuses such a gate as needs-human
(plan.widen), and `scan` puts it in needs-human with the same sentence
(audit.python_files): one rule, one implementation. A later arm counts when a
gate read in its test holds on the arch and its body does not leave (an arm that
raises or skips gives the arch nothing: widening is admission there). An
`else:`, and an arm whose test codemod does not read for the arch, are not
counted: they are not written for the arch. A negated test (`elif major !=
9:`) is read by the gate kinds as a check for its values, so it is not counted
either.

Pure: bytes, an ast and gates in, an arm out.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from codemods.core.arch import Arch
from codemods.gates import Gate
from codemods.gates.python import polarity as _polarity
from codemods.gates.python import tree_index
from codemods.gates.python.ast_text import PythonText


@dataclass(frozen=True)
class Arm:
    """The later arm that takes `arch` today: its first line as written (`elif major == 12:`) and its line."""

    arch: Arch
    line: int
    text: str

    def reason(self, file: str) -> str:
        return (
            f"`{self.text}` ({file}:{self.line}) handles {self.arch.name} today: widening this arm changes which "
            f"implementation {self.arch.name} runs (dispatch), not whether it runs"
        )


def later_arm(
    source: bytes, gate: Gate, archs: Sequence[Arch], gates: Sequence[Gate], tree: ast.Module | None = None,
    text: PythonText | None = None,
) -> Arm | None:
    """The first later arm of the `if`/`elif` chain whose test holds `gate` that takes one of `archs` the gate
    excludes, read by `gates` (the file's gates, any kind); None when there is none, or the gate decides no arm
    that runs code (a guard whose body raises is admission, not dispatch). `tree` and `text`: the source's,
    when the caller has them."""
    excluded = [a for a in archs if gate.admits.admits(a) is False]
    if not excluded:
        return None
    if tree is None:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return None
    if text is None:
        text = PythonText(source)
    arm = _arm_of(tree, text, gate)
    if arm is None or _polarity.exits(arm.body):
        return None
    for arch in excluded:
        later = arm
        while len(later.orelse) == 1 and isinstance(later.orelse[0], ast.If):
            later = later.orelse[0]
            start, end = text.span(later.test)
            inside = [g for g in gates if start <= g.start and g.end <= end and not _negated(g.text)]
            if any(g.admits.admits(arch) is True for g in inside):
                if _polarity.exits(later.body):
                    break  # the arch takes an arm that refuses it: widening gives it code
                first = text.data[text.offset(later.lineno, 0) :].split(b"\n", 1)[0]
                return Arm(arch, later.lineno, first.decode("utf-8", "replace").strip())
    return None


def _arm_of(tree: ast.Module, text: PythonText, gate: Gate) -> ast.If | None:
    """The innermost `if` (or `elif`) whose test holds the gate."""
    best: tuple[int, ast.If] | None = None
    for node in tree_index.index(tree).of_type(ast.If):
        start, end = text.span(node.test)
        if start <= gate.start and gate.end <= end and (best is None or start >= best[0]):
            best = (start, node)
    return best[1] if best is not None else None


def _negated(condition: str) -> bool:
    return "!=" in condition or condition.lstrip("( ").startswith("not ") or " not in " in condition
