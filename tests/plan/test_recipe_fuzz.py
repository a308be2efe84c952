"""The recipes' [[test]] cases, mutated: whatever the source, planning keeps the engine's invariants.

Each example takes one case of a bundled or replay recipe, mutates its `before`
(lines inserted, deleted or doubled, numbers and operators changed, brackets
unbalanced, CRLF, tabs, non-ASCII, truncation ...) and plans the change on it
as `codemod run` does (a project tree whose only file is the mutated one) or
as `codemod recipe test` does (no tree). Then:

1. nothing but a `CodemodError` escapes (a gate kind's refusal is an outcome);
2. a Python file that parsed still parses, and a C/CUDA file keeps its `#if`/`#endif` balance;
3. planning again over the output makes no edit;
4. edits touch only the lines of the gates they widen (and the imports a widened gate needs);
5. a widened gate admits the targets (as its kind's `admits` reads the rewritten text), and still admits every
   arch it admitted before.

Bounded and deterministic for CI (the same examples every run); CODEMOD_FUZZ_EXAMPLES=5000 hunts for real,
with new random examples each run.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemods.core.arch import DEFAULT_ARCHS
from codemods.core.errors import CodemodError
from codemods.gates import line_of
from codemods.gates.python.ast_text import PythonText
from codemods.gates.registry import KINDS
from codemods.plan.changes import PlannedChange
from codemods.plan.widen import plan_change
from codemods.recipes.load import load_recipe, projects
from codemods.recipes.model import OUTCOMES, Case, Change, ProjectTree, Recipe

ROOT = Path(__file__).resolve().parents[2]
RECIPE_FILES = sorted((ROOT / "targets" / "recipes").glob("*.toml")) + sorted((ROOT / "tests" / "replay" / "recipes").glob("*.toml"))
HUNTING = "CODEMOD_FUZZ_EXAMPLES" in os.environ
EXAMPLES = int(os.environ.get("CODEMOD_FUZZ_EXAMPLES", "500"))


def _cases() -> list[tuple[Recipe, Change, Case]]:
    out = []
    for path in RECIPE_FILES:
        recipe = load_recipe(path)
        changes = {c.id: c for c in recipe.changes}
        out += [(recipe, changes[case.change], case) for case in recipe.tests]
    return out


CASES = _cases()
PYTHON = (".py",)
NOT_GATES = ("cpp_replace",)  # an edit kind: a fixed rewrite, no gate whose lines bound it


def _is_python(file: str) -> bool:
    return PurePosixPath(file).suffix in PYTHON


# ------------------------------------------------------------------ mutations

LINES_PY = [
    "", "# a comment", "x = 1", "pass", "if major >= 9:", "    return True", "else:", ")", "(", "def f():",
    "is_sm90a_supported = lambda device: True", "from flashinfer.utils import is_sm100a_supported",
    "major, minor = torch.cuda.get_device_capability()", "    if major in [9, 10]:", '"""', "s = 'é✓'",
    "\tpass", "if (major, minor) >= (12, 0):", "    pass", "cc = 90", "return major == 12",
]
LINES_C = [
    "", "// a comment", "/* c */", "#if __CUDA_ARCH__ >= 900", "#endif", "#else", "#elif defined(X)", "int x = 1;",
    "{", "}", "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 1200", "#ifdef FOO", "#define ARCH 900", "  return;",
    "if (sm >= 90) {", '  const char* s = "é✓";', "#if (__CUDA_ARCH__ >= 1000) \\", "    && (__CUDA_ARCH__ < 1100)",
]
NUMBERS = ["0", "1", "7", "8", "9", "10", "11", "12", "13", "80", "89", "90", "100", "103", "110", "120", "121", "800", "900",
           "1000", "1030", "1200", "1210", "99999999999999999999", "0x10", "1_0", "012", "9.0", "10L", "1e3"]
OPERATORS = ["==", ">=", "<=", "<", ">", "!="]
TOKENS = {  # what a token may become: the spellings gates are written in
    " in ": [" not in ", " == "], " not in ": [" in "], "[": ["(", "{"], "]": [")", "}"], "(": ["[", "(("],
    "__CUDA_ARCH__": ["__CUDA_ARCH_SPECIFIC__", "__CUDA_ARCH_FAMILY_SPECIFIC__", "CUDA_ARCH", "__CUDA_ARCH__ + 0"],
    "#if ": ["#elif ", "#ifdef ", "#ifndef ", "#if !"], "defined(": ["!defined(", "defined ("], "sm_": ["sm", "SM_", "compute_"],
    "major": ["minor", "cc"], "True": ["False"], "return": ["yield", "return not"], "elif": ["if", "else"],
}
TOKEN_RE = re.compile("|".join(re.escape(t) for t in sorted(TOKENS, key=len, reverse=True)))
OPERATOR_RE = re.compile(r"==|!=|>=|<=|(?<![<>-])[<>](?![<>=])")


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _pick(draw, seq):
    return seq[draw(st.integers(0, len(seq) - 1))]


@st.composite
def mutate(draw, text: str, python: bool) -> str:
    """One mutation of `text`."""
    lines = _lines(text)
    # the mutations that keep a file readable come up three times as often: they reach the gate kinds' rewrites
    kind = draw(st.sampled_from([
        *["insert", "duplicate", "number", "operator", "boolean", "parenthesize", "negate", "comment", "crlf",
          "blank-lines", "non-ascii", "token"] * 3,
        "delete", "tabs", "backslash", "bracket", "truncate", "empty", "bom", "indent",
    ]))
    line = draw(st.integers(0, max(len(lines) - 1, 0)))
    if kind == "insert":
        lines.insert(line, _pick(draw, LINES_PY if python else LINES_C))
    elif kind == "delete" and lines:
        del lines[line]
    elif kind == "duplicate" and lines:
        lines.insert(line, lines[line])
    elif kind == "blank-lines":
        lines.insert(line, "")
        lines.insert(line, "   ")
    elif kind == "indent" and lines:
        lines[line] = draw(st.sampled_from(["    ", "  ", ""])) + lines[line].lstrip(" ")
    elif kind == "number":
        found = list(re.finditer(r"\d+", text))
        if found:
            m = _pick(draw, found)
            return text[: m.start()] + _pick(draw, NUMBERS) + text[m.end() :]
    elif kind == "operator":
        found = list(OPERATOR_RE.finditer(text))
        if found:
            m = _pick(draw, found)
            return text[: m.start()] + _pick(draw, OPERATORS) + text[m.end() :]
    elif kind == "boolean":
        swaps = {" and ": " or ", " or ": " and ", "&&": "||", "||": "&&", "not ": "", "!": ""}
        found = list(re.finditer(r" and | or |&&|\|\||not |!(?!=)", text))
        if found:
            m = _pick(draw, found)
            return text[: m.start()] + swaps[m.group()] + text[m.end() :]
    elif kind == "token":
        found = list(TOKEN_RE.finditer(text))
        if found:
            m = _pick(draw, found)
            return text[: m.start()] + _pick(draw, TOKENS[m.group()]) + text[m.end() :]
    elif kind in ("parenthesize", "negate"):  # an `if`'s or `#if`'s condition, on the drawn line or the next one that has one
        pattern = re.compile(r"(?<=\bif )(.+?)(?=:\s*$)" if python else r"(?<=#if )(.+?)(?=\s*$)|(?<=\bif \()(.+?)(?=\)\s*\{?\s*$)")
        for i in [*range(line, len(lines)), *range(line)]:
            m = pattern.search(lines[i])
            if m:
                new = f"({m.group()})" if kind == "parenthesize" else (f"not ({m.group()})" if python else f"!({m.group()})")
                lines[i] = lines[i][: m.start()] + new + lines[i][m.end() :]
                break
    elif kind == "comment" and lines:
        lines[line] += draw(st.sampled_from(["  # note", "  # sm_120 é", " // note", " /* x */", "  #", " // \\"]))
    elif kind == "crlf":
        return text.replace("\n", draw(st.sampled_from(["\r\n", "\r"])))
    elif kind == "tabs":
        return re.sub(r"(?m)^    ", "\t", text) if draw(st.booleans()) else text.replace("    ", "\t", 1)
    elif kind == "backslash" and lines:
        lines[line] += " \\"
    elif kind == "bracket":
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.sampled_from(["(", ")", "[", "]", "{", "}", '"', "'", "/*", '"""'])) + text[at:]
    elif kind == "non-ascii":
        found = list(re.finditer(r"\"[^\"\n]*\"|'[^'\n]*'", text))
        accent = draw(st.sampled_from(["é", "✓", "\u00a0", "𝔰𝔪", "\u200b", "中"]))
        if found:
            m = _pick(draw, found)
            return text[: m.start() + 1] + accent + text[m.start() + 1 :]
        lines.insert(line, ("s = '%s'" if python else 'const char* s = "%s";') % accent)
    elif kind == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    elif kind == "empty":
        return ""
    elif kind == "bom":
        return "\ufeff" + text
    return "\n".join(lines)


@st.composite
def mutated_case(draw):
    recipe, change, case = draw(st.sampled_from(CASES))
    python = _is_python(case.file)
    text = case.before
    for _ in range(draw(st.integers(1, 4))):
        text = draw(mutate(text, python))
    data = text.encode("utf-8")
    odd = draw(st.integers(0, 40))
    if odd == 0:  # not UTF-8: a one-line refusal, not a traceback
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\xff" + data[at:]
    elif odd == 1 and python:  # PEP 263: Python reads it as Latin-1, codemod only ever as UTF-8
        data = b"# -*- coding: latin-1 -*-\n" + text.replace("\n", " # \xe9\n", 1).encode("latin-1", "replace")
    return Example(recipe, change, case, data, draw(st.booleans()))


@dataclass(frozen=True)
class Example:
    recipe: Recipe
    change: Change
    case: Case
    source: bytes
    with_tree: bool

    def __repr__(self) -> str:
        return f"Example({self.recipe.id!r}, {self.case.name!r}, {self.source!r}, with_tree={self.with_tree})"


# ------------------------------------------------------------------ planning, as run and recipe test do


def _tree(change: Change) -> ProjectTree:
    project = projects()[change.project]
    return ProjectTree(project, project.layouts[0], Path("/nonexistent-fuzz-root"))


def _plan(recipe: Recipe, change: Change, case: Case, source: bytes, with_tree: bool) -> PlannedChange:
    """Plan `change` on `source`: with a tree whose only file is `source` (as `run`), or none (as `recipe test`)."""
    targets, universe = recipe.scope(DEFAULT_ARCHS)
    kind = KINDS[change.kind]
    pc = None
    for location in change.locations:
        tree = _tree(change) if with_tree else None
        file = case.file
        if tree is not None:
            resolved = tree.resolve(location.file)
            if PurePosixPath(resolved).suffix == PurePosixPath(case.file).suffix:
                file = resolved

        def read(rel: str, file=file) -> bytes:
            if rel == file:
                return source
            raise FileNotFoundError(rel)

        pc = PlannedChange(change, file, before=source, selector=location.selector)
        plan_change(pc, kind, universe, targets, tree, read if tree is not None else None)
        if not pc.missed:
            break
    assert pc is not None
    return pc


# ------------------------------------------------------------------ invariants


def _parses(source: bytes) -> bool:
    try:
        ast.parse(source.decode("utf-8-sig"))
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return False
    return True


DIRECTIVE_RE = re.compile(rb"(?m)^[ \t]*#[ \t]*(if|ifdef|ifndef|endif)\b")


def _directives(source: bytes) -> tuple[int, int]:
    found = [m.group(1) for m in DIRECTIVE_RE.finditer(source)]
    return len([d for d in found if d != b"endif"]), found.count(b"endif")


def _allowed_lines(pc: PlannedChange) -> set[int]:
    lines: set[int] = set()
    for gc in pc.gates:
        if gc.outcome == "changed":
            lines.update(range(line_of(pc.before, gc.gate.start), line_of(pc.before, gc.gate.end) + 1))
    return lines


def _edit_lines(source: bytes, start: int, end: int) -> set[int]:
    first = line_of(source, start)
    return set(range(first, line_of(source, max(start, end - 1)) + 1))


def check(recipe: Recipe, change: Change, case: Case, source: bytes, with_tree: bool) -> None:
    try:
        pc = _plan(recipe, change, case, source, with_tree)
    except CodemodError:
        return
    assert pc.outcome in OUTCOMES, pc.outcome
    assert "internal check" not in pc.reason, pc.reason
    if pc.outcome != "changed":
        assert pc.after == source
        return
    after = pc.after
    # 2. the file still reads as it did
    if _is_python(pc.file):
        if _parses(source):
            assert _parses(after), after.decode("utf-8", "replace")
    else:
        assert _directives(after) == _directives(source), after.decode("utf-8", "replace")
    # 3. idempotent
    again = _plan(recipe, change, case, after, with_tree)
    assert again.outcome == "unchanged", (again.outcome, again.reason, after.decode("utf-8", "replace"))
    # 4. edits touch only the gates' lines; elsewhere a Python gate may only add what its widened text newly
    # names (an import, a cached flag `_is_sm120_supported = ...`, a parameter `has_sm100: bool`), never replace,
    # except an import statement, which keeps what it imported (black-split when it grows past the line length)
    if change.kind not in NOT_GATES:
        allowed = _allowed_lines(pc)
        dropped = {n for gc in pc.gates if gc.outcome == "changed" for n in _names(gc.gate.text) - _names(gc.after_text)}
        new_names = {n for gc in pc.gates if gc.outcome == "changed" for n in _names(gc.after_text) - _names(gc.gate.text)}
        for edit in pc.edits:
            if _edit_lines(source, edit.start, edit.end) <= allowed:
                continue
            supports = _is_python(pc.file) and edit.start == edit.end and any(
                name in new for name in _names(edit.text.decode("utf-8", "replace")) for new in new_names
            )
            kept = _in_import(source, edit.start, edit.end) and _names(
                source[edit.start : edit.end].decode("utf-8", "replace")
            ) <= _names(edit.text.decode("utf-8", "replace"))
            # a name the widened gate no longer reads, bound beside others (`major, minor =`), becomes `_`
            unbound = _is_python(pc.file) and edit.text == b"_" and source[edit.start : edit.end].decode() in dropped
            assert supports or kept or unbound, (edit, sorted(allowed), after.decode("utf-8", "replace"))
    # 5. a widened gate admits the targets, and loses nothing it admitted
    targets, _ = recipe.scope(DEFAULT_ARCHS)
    for gc in pc.gates:
        if gc.outcome != "changed" or gc.admits_after is None:
            continue
        assert all(gc.admits_after.admits(a) for a in targets), (gc.gate.text, gc.after_text)
        lost = [a.name for a in gc.gate.admits.admitted if gc.admits_after.admits(a) is False]
        assert not lost, (gc.gate.text, gc.after_text, lost)


def _in_import(source: bytes, start: int, end: int) -> bool:
    """Whether source[start:end] lies inside one import statement (ast's lines, which count a lone CR)."""
    try:
        module = ast.parse(source.decode("utf-8-sig"))
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return False
    text = PythonText(source)
    spans = [text.span(n) for n in ast.walk(module) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return any(a <= start and end <= b for a, b in spans)


def _names(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", text))


@pytest.mark.exhaustive
@settings(
    max_examples=EXAMPLES,
    derandomize=not HUNTING,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated_case())
def test_mutated_recipe_cases_keep_the_invariants(example):
    check(example.recipe, example.change, example.case, example.source, example.with_tree)


@pytest.mark.parametrize("with_tree", [False, True], ids=["recipe-test", "run"])
def test_unmutated_recipe_cases_keep_the_invariants(with_tree):
    """The cases as written: the baseline the mutations start from."""
    for recipe, change, case in CASES:
        check(recipe, change, case, case.before.encode(), with_tree)
