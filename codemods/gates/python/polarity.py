"""What a condition means for the code it guards: whether the guarded path runs where it is true or false.

A gate reports what the guarded code path admits, not where its condition
holds (issue 18 item 1):

    @pytest.mark.skipif(cap[0] not in [10, 11, 12], reason=...)   # runs on 10, 11, 12
    if major != 9:                                              # the code after runs on 9
        raise RuntimeError(...)                                 # (pytest.skip, sys.exit, bare return, continue)
    assert major >= 9                                           # the code after runs on 9 and later
    if major >= 9:                                              # the body runs on 9 and later
        use_tma()

`need(node, parents)` walks up from a condition (through `not`, `and`,
`or`, parentheses) to what decides a path, and says on which value of the
whole test the path runs. A test that exits (`raise`, `pytest.skip(...)`,
`sys.exit(...)`, `return`, `return False`, `continue`, `break`, or sets a flag
or appends to a list a later `if` of the function exits on) guards the code after it: that runs where the test is false, as it does for
`skipif`/`skipIf`/`skip_if...(cond)`. A body that returns a value other
than a false constant is the guarded path itself (`if sm == 120: return
True`). `value(test, leaf)` folds the test on one arch with Kleene
logic: operands that do not depend on the GPU may go either way, so an arch
is excluded only when no value of them lets it through. `use(test, up)`
says when a test guards no code path at all (issue 18 item 2: "a branch an
arch does not take is a blocker only when the arch then gets nothing"):

    backend = "trtllm-gen" if cap[0] == 10 else "xqa"   # a choice: the other archs get "xqa"
    is_sm120 = major == 12 and minor == 0                # a value: what uses `is_sm120` decides
    run(use_tma=major >= 9)                              # a value passed: what `run` does with it decides

Pure: ast in, sets out.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping

from codemods.gates.python import tree_index

# Calls that end the code path where they run: pytest.skip, pytest.fail, sys.exit, os._exit, self.skipTest ...
_EXIT_CALLS = frozenset({"skip", "fail", "xfail", "exit", "_exit", "quit", "abort", "skipTest"})
# Helpers that skip a test when their first argument holds (or unless it holds).
_SKIP_UNLESS = re.compile(r"skip_?(?:unless|if_?not)", re.IGNORECASE)
_SKIP_IF = re.compile(r"skip_?if", re.IGNORECASE)


def _callee(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def exits(body: list[ast.stmt]) -> bool:
    """Whether a block ends the code path: its last statement raises, skips, exits, returns nothing (or a false
    constant), or leaves the loop."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (ast.Raise, ast.Continue, ast.Break)):
        return True
    if isinstance(last, ast.Return):
        value = last.value
        return value is None or (isinstance(value, ast.Constant) and not value.value)
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        return _callee(last.value) in _EXIT_CALLS
    return False


def raises_exit_flag(statement: ast.If, up: Mapping[int, ast.AST]) -> bool:
    """Whether the `if`'s body ends by setting a flag (or recording into a list) that a later `if` exits on: the
    exit is reached through the flag. SGLang 0.4.7's determine_num_fused_shared_experts sets `disable_reason =
    "..."` under each of its checks (an `if`/`elif` chain) and, after them, `if disable_reason is not None: ...
    return`; SGLang 0.5.15's nunchaku `_validate` does `unsupported.append(...)` under `if major == 9:` in a loop
    over the devices and, after the loop, `if unsupported: raise`. The flag is a name set to a true constant or an
    f-string, or a list (set) named by a name that the body appends (adds) to; the later test is `if flag:` or `if
    flag is not None:`, in the block of the `if` chain or, out of the loops and blocks around it, of the function."""
    last = statement.body[-1] if statement.body else None
    if isinstance(last, ast.Assign) and len(last.targets) == 1 and isinstance(last.targets[0], ast.Name):
        flag, raised = last.targets[0].id, last.value
        if not (isinstance(raised, ast.JoinedStr) or isinstance(raised, ast.Constant) and raised.value):
            return False
    elif (
        isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and isinstance(last.value.func, ast.Attribute)
        and last.value.func.attr in ("append", "add") and isinstance(last.value.func.value, ast.Name)
    ):  # fmt: skip
        flag = last.value.func.value.id  # `unsupported.append(...)`: the list is no longer empty
    else:
        return False
    top: ast.AST = statement
    while isinstance(parent := up.get(id(top)), ast.If) and len(parent.orelse) == 1 and parent.orelse[0] is top:
        top = parent  # an `elif`: the block holds the first `if` of the chain
    while parent is not None:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None) or []
            at = next((i for i, s in enumerate(block) if s is top), None)
            if at is not None and any(
                isinstance(later, ast.If) and _tests(later.test, flag) and exits(later.body) for later in block[at + 1 :]
            ):
                return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            return False
        top, parent = parent, up.get(id(parent))  # out of a loop (or a block) around it: the exit after it
    return False


def _tests(test: ast.expr, flag: str) -> bool:
    """`flag` or `flag is not None`."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot):
        right = test.comparators[0]
        test = test.left if isinstance(right, ast.Constant) and right.value is None else test
    return isinstance(test, ast.Name) and test.id == flag


def parents(nodes: Iterable[ast.AST]) -> dict[int, ast.AST]:
    """Each node's parent (by id), for every node under `nodes` (read-only: a whole module's are its shared
    index's, tree_index)."""
    nodes = list(nodes)
    if len(nodes) == 1 and isinstance(nodes[0], ast.Module):
        return tree_index.index(nodes[0]).parents
    out: dict[int, ast.AST] = {}
    for top in nodes:
        for node in ast.walk(top):
            for child in ast.iter_child_nodes(node):
                out[id(child)] = node
    return out


def need(node: ast.expr, up: Mapping[int, ast.AST]) -> tuple[ast.expr, bool]:
    """(the test that decides a path, the value of that test on which the guarded path runs).

    The test is the outermost boolean expression around `node` (`not`,
    `and`, `or`); an expression no statement tests is its own path (True).
    """
    test: ast.expr = node
    while True:
        parent = up.get(id(test))
        if isinstance(parent, ast.BoolOp) or (isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)):
            test = parent
            continue
        break
    if isinstance(parent, ast.If) and parent.test is test:
        return test, not (exits(parent.body) or raises_exit_flag(parent, up))
    if isinstance(parent, ast.Assert) and parent.test is test:
        return test, True
    if isinstance(parent, ast.Call) and (parent.args[:1] == [test] or any(
        k.arg == "condition" and k.value is test for k in parent.keywords
    )):
        name = _callee(parent)
        if _SKIP_UNLESS.search(name):
            return test, True
        if _SKIP_IF.search(name):
            return test, False
    return test, True


# What `use` says of a test that guards no code path: a choice between two values, or a value stored, passed,
# or returned by a function that is not a predicate.
CHOICE, VALUE = "choice", "value"


def use(test: ast.expr, up: Mapping[int, ast.AST]) -> tuple[str, str] | None:
    """None when `test` (from `need`) guards a code path; else (CHOICE, the value the archs where it is false
    get) for `x if test else y`, or (VALUE, what decides instead: the name it is stored in, the call it is passed
    to, the function that returns it). A skip helper's argument, an `if`, `while`, `assert`, a comprehension's
    `if` and a predicate's `return` (every `return` of the function gives a test) guard a path."""
    parent = up.get(id(test))
    if isinstance(parent, ast.IfExp) and parent.test is test:
        other = parent.orelse
        if isinstance(other, ast.Constant) and other.value is None:
            return VALUE, f"it picks `None` elsewhere (`{ast.unparse(parent)}`): what uses that `None` decides"
        return CHOICE, ast.unparse(other)
    if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and parent.value is test:
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        return VALUE, "what uses " + ", ".join(f"`{ast.unparse(t)}`" for t in targets) + " decides"
    if isinstance(parent, ast.keyword) and parent.value is test:
        parent = up.get(id(parent))
    if isinstance(parent, ast.Call) and parent.func is not test:
        name = _callee(parent)
        if _SKIP_UNLESS.search(name) or _SKIP_IF.search(name):
            return None
        return VALUE, f"what `{ast.unparse(parent.func)}` does with it decides"
    if isinstance(parent, ast.Return) and parent.value is test:
        function = parent
        while function is not None and not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            function = up.get(id(function))  # type: ignore[assignment]
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _predicate(function):
            return VALUE, f"what the callers of `{function.name}` do with it decides"
    return None


def _predicate(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether every `return` of the function (not of functions nested in it) gives a test or a bool."""
    returns, stack = [], list[ast.AST](function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            returns.append(node.value)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    tests = (ast.Compare, ast.BoolOp)
    return all(
        isinstance(v, tests) or (isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not))
        or (isinstance(v, ast.Constant) and isinstance(v.value, bool)) for v in returns
    )  # fmt: skip


def value(test: ast.expr, leaf: Callable[[ast.expr], bool | None]) -> bool | None:
    """The test's value on one arch: `leaf` gives each operand's (None: it does not depend on the GPU, or is
    not read); `not`, `and`, `or` fold with Kleene logic (None: either)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = value(test.operand, leaf)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [value(operand, leaf) for operand in test.values]
        decisive = isinstance(test.op, ast.Or)  # True decides an `or`, False an `and`
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    if isinstance(test, ast.Constant) and isinstance(test.value, bool):
        return test.value
    return leaf(test)


def early_value(statement: ast.stmt | ast.expr) -> str | None:
    """The value an `if` whose body does not exit returns early (`if not P(): return True` gives "True"), else None.

    For an arch predicate tested negated this is no refusal and no guarded path of its own: the code after is
    the path written for the predicate's archs (`not P` is a check for P, as python_arch_test reads it and
    `codemod run` widens it), and the archs kept from it get this value instead."""
    if not isinstance(statement, ast.If) or not statement.body or exits(statement.body):
        return None
    last = statement.body[-1]
    if isinstance(last, ast.Return) and last.value is not None:
        return ast.unparse(last.value)
    return None


def statement_path(statement: ast.stmt | ast.expr, up: Mapping[int, ast.AST] | None = None) -> bool:
    """The value of a statement's test on which the code it guards runs: an `if` whose body exits (or, given
    the parents `up`, sets a flag or appends to a list a later `if` exits on) guards the code after it (False); an `if` otherwise,
    `while`, `assert` and `x if test else y` their own path (True)."""
    if isinstance(statement, ast.If):
        return not (exits(statement.body) or up is not None and raises_exit_flag(statement, up))
    return True
