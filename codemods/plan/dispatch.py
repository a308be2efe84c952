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

The same rule reads an `#if`/`#elif` group of C, C++ and CUDA (`later_directive`): widening a guard for an arch
that a later branch of its group takes today, when that branch does work (not an `#error`, not a stub), changes
which implementation the arch compiles; and a C++ `if`/`else if` chain of host checks (`later_statement`), read
as the Python chain is: a later `else if` whose check holds on the arch, whose body does not leave.
`audit.classify.guard_path` decides scan's group from the same functions (`taken_branch`, `branch_work`).

Pure: bytes, an ast or an `#if` structure, and gates in, an arm out.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import tree_sitter

from codemods.core.arch import Arch
from codemods.cpp import native, syntax
from codemods.cpp.structure import Branch, Structure, structure
from codemods.gates.cpp.checks.polarity import exit_of
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


# ---------------------------------------------------------------- #if groups of C, C++ and CUDA

ERROR_RE = re.compile(rb"^[ \t]*#[ \t]*error\b", re.MULTILINE)
DIRECTIVE_RE = re.compile(rb"^[ \t]*#(?:[^\n]*\\\r?\n)*[^\n]*", re.MULTILINE)
# Statements that do no work: what a stub body is made of.
_STUB_RE = re.compile(
    rb"""return\s*(?:0|false|nullptr|\{\s*\})?\s*;
    |(?:__trap|__brkpt|__builtin_trap|__builtin_unreachable|abort|assert|static_assert|printf
       |CUTE_INVALID_CONTROL_PATH|CUTLASS_NOT_IMPLEMENTED|FLASHINFER_ERROR|TLLM_THROW)\s*\((?:[^;]|\\;)*?\)\s*;
    |asm\s*(?:volatile\s*)?\(\s*"(?:trap|brkpt|exit);"\s*\)\s*;
    |\(\s*void\s*\)\s*[A-Za-z_]\w*\s*;
    |[{};]""",
    re.VERBOSE,
)
@lru_cache(maxsize=4)
def masked(source: bytes) -> bytes:
    """Comments blanked (strings kept: `asm("trap;")` is read from them), offsets unchanged: the compiled lexer's
    (native.mask_comments). Every guard of a file that excludes the arch asks (guard_path): kept for the last files.
    """
    return native.mask_comments(source)


def own_text(shape: Structure, branch: Branch, masked: bytes) -> bytes:
    """The branch's body without the conditional groups nested in it."""
    spans = []
    for child in branch.children:
        members = shape.group(shape.branches[child])
        spans.append((members[0].start, members[-1].body_end))
    out, pos = [], branch.body_start
    for start, end in sorted(spans):
        out.append(masked[pos:start])
        pos = max(pos, end)
    out.append(masked[pos : branch.body_end])
    return b"".join(out)


def branch_work(shape: Structure, branch: Branch, masked: bytes) -> str:
    """What the branch gives the arch that takes it: "error" (an `#error`), "stub" (no code, or only `return;`, a
    trap, an assert, `(void)x;`), else "code"."""
    own = own_text(shape, branch, masked)
    if ERROR_RE.search(own):
        return "error"
    if not shape.has_code(branch):
        return "stub"
    if any(shape.has_code(m) for c in branch.children for m in shape.group(shape.branches[c])):
        return "code"
    return "code" if _STUB_RE.sub(b"", DIRECTIVE_RE.sub(b"", own)).strip() else "stub"


def described(branch: Branch) -> str:
    return "#else" if branch.directive == "#else" else f"`{branch.directive} {branch.condition}`"


def taken_branch(shape: Structure, branch: Branch, arch: Arch) -> tuple[Branch | None, Branch | None]:
    """(the branch of `branch`'s group that `arch` takes, None when none; the branch whose condition leaves that
    undecided, None when decided)."""
    for member in shape.group(branch):
        taken = shape.taken(member, arch)
        if taken is None:
            return None, member
        if taken:
            return member, None
    return None, None


def later_directive(source: bytes, gate: Gate, archs: Sequence[Arch]) -> Arm | None:
    """The later branch of the `#if` group whose condition is `gate` that one of `archs` the gate excludes takes
    today, when it does work; None when there is none, or `gate` is no directive's condition."""
    excluded = [a for a in archs if gate.admits.admits(a) is False]
    if not excluded or b"#" not in source:
        return None
    shape = structure(source)
    branch = shape.at(gate.start)
    if branch is None:
        return None
    for arch in excluded:
        chosen, undecided = taken_branch(shape, branch, arch)
        if undecided is None and chosen is not None and chosen.position > branch.position:
            if branch_work(shape, chosen, masked(source)) == "code":
                text = "#else" if chosen.directive == "#else" else f"{chosen.directive} {chosen.condition}"
                return Arm(arch, chosen.line, text)
    return None


# ---------------------------------------------------------------- C++ `if`/`else if` chains


def later_statement(source: bytes, gate: Gate, archs: Sequence[Arch], gates: Sequence[Gate], language: str) -> Arm | None:
    """The first later `else if` of the C++ `if` chain whose condition holds `gate` that takes one of `archs` the
    gate excludes, read by `gates` (the file's host checks); None when there is none, the gate stands in no `if`
    condition, or its `if` leaves (a check that throws or returns an error is admission, not dispatch)."""
    excluded = [a for a in archs if gate.admits.admits(a) is False]
    if not excluded or source.find(b"else", gate.end) < 0:
        return None
    if b"#" in source and structure(source).at(gate.start) is not None:
        return None  # a directive's condition: its group is read by later_directive
    tree = _tree(source, language)
    node = tree.root_node.descendant_for_byte_range(gate.start, gate.end)
    arm = None
    while node is not None and arm is None:
        condition = node.child_by_field_name("condition") if node.type == "if_statement" else None
        if condition is not None and condition.start_byte <= gate.start and gate.end <= condition.end_byte:
            arm = node
        node = node.parent
    if arm is None or exit_of(arm) is not None:
        return None
    for arch in excluded:
        later = arm
        while (following := _else_if(later)) is not None:
            else_at, later = following
            condition = later.child_by_field_name("condition")
            if condition is None:
                break
            inside = [g for g in gates if condition.start_byte <= g.start and g.end <= condition.end_byte]
            if any(g.admits.admits(arch) is True and not g.detail.get("negated") for g in inside):
                if exit_of(later) is not None:
                    break  # the arch takes an arm that refuses it: widening gives it code
                line = source.count(b"\n", 0, else_at) + 1
                end = source.find(b"\n", else_at)
                text = source[else_at : len(source) if end < 0 else end].decode("utf-8", "replace").strip()
                return Arm(arch, line, text)
    return None


@lru_cache(maxsize=2)
def _tree(source: bytes, language: str) -> tree_sitter.Tree:
    """The source's tree, parsed once for every gate of the file asked in a row (a plan, a scan's file)."""
    return syntax.parse_code(source, language)


def _else_if(statement: tree_sitter.Node) -> tuple[int, tree_sitter.Node] | None:
    """(where its `else` stands, the `if` it holds) of an `if` statement's `else if`, or None."""
    alternative = statement.child_by_field_name("alternative")
    if alternative is None:
        return None
    nested = [child for child in alternative.named_children if child.type != "comment"]
    if len(nested) == 1 and nested[0].type == "if_statement":
        return alternative.start_byte, nested[0]
    return None
