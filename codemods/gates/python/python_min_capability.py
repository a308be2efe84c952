"""The minimum capability a quantization method declares: `return 89` in its `get_min_capability`.

    class CompressedTensorsW8A8Int8(CompressedTensorsScheme):
        @classmethod
        def get_min_capability(cls) -> int:
            # lovelace and up
            return 89

SGLang (as vLLM) asks every quantization config and scheme for the lowest
capability its kernels run on, as major * 10 + minor (`89` for sm_89), and
refuses a GPU below it (`if capability < quant_config.get_min_capability():
raise ValueError(...)`, checked against the release source by a `real`
test). Each `return <int>` directly in a function named in FUNCTIONS is a
gate admitting every arch at or above that number; `return 0` admits all.
A computed return (`return Fp8Config.get_min_capability()`) is unknown.

`widen` lowers the number to the lowest target's, when no arch between the
new bound and the old one is left out of the targets (`return 89` becomes
`return 80` for the sm_80 family, as SGLang 0.5.7 wrote it; for sm_80 alone
it is refused, sm_86 and sm_87 lying between). A recipe picks the class or
function the method is in with `function`.
"""

from __future__ import annotations

import ast
import re

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.gates import CannotWiden, Edit, Gate
from codemods.gates.python.ast_text import PythonText, ast_of

KIND = "python_min_capability"

# The functions whose `return` is the lowest capability (major * 10 + minor) the code runs on.
FUNCTIONS = ("get_min_capability",)
PREFILTER = re.compile(rb"\bdef\s+(?:%s)\s*\(" % b"|".join(name.encode() for name in FUNCTIONS))


def _sm(arch: Arch) -> int:
    return arch.major * 10 + arch.minor


def _admits(bound: int | None, universe: tuple[Arch, ...]) -> ArchSet:
    if bound is None:
        return ArchSet(universe, frozenset(), frozenset(universe))
    return ArchSet(universe, frozenset(arch for arch in universe if _sm(arch) >= bound))


def _bound(value: ast.expr | None) -> int | None:
    """The number a `return` gives, or None when it is no int literal."""
    if isinstance(value, ast.Constant) and type(value.value) is int and value.value >= 0:
        return value.value
    return None


def find(
    source: bytes, universe: tuple[Arch, ...] = DEFAULT_ARCHS, tree: ast.Module | None = None, *, function: str | None = None
) -> list[Gate]:
    """Every `return` of a minimum-capability function, in source order; with `function`, only those in that
    class or function (the method's own name is always one of FUNCTIONS)."""
    if not PREFILTER.search(source):
        return []
    if tree is None:
        try:
            tree = ast_of(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return []
    text = PythonText(source)
    out: list[Gate] = []
    stack: list[tuple[ast.AST, str]] = [(tree, "")]
    while stack:
        node, around = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and child.name in FUNCTIONS:
                if function is None or function in (around, child.name):
                    out += [_gate(text, ret, around or child.name, universe) for ret in _returns(child)]
            elif isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                stack.append((child, child.name))
            elif isinstance(child, ast.stmt):
                stack.append((child, around))
    return sorted(out, key=lambda gate: gate.start)


def _returns(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
    """The function's own `return` statements (not those of functions or classes defined in it)."""
    found, stack = [], list(function.body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            found.append(stmt)
        elif not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack += [child for child in ast.iter_child_nodes(stmt) if isinstance(child, ast.stmt)]
    return found


def _gate(text: PythonText, ret: ast.Return, context: str, universe: tuple[Arch, ...]) -> Gate:
    assert ret.value is not None
    start, end = text.span(ret.value)
    bound = _bound(ret.value)
    detail = {} if bound is not None else {"unknown": "a computed minimum capability: what it returns is read elsewhere"}
    return Gate(
        kind=KIND, start=start, end=end, line=ret.lineno, text=text.data[start:end].decode("utf-8"),
        admits=_admits(bound, universe), context=context, detail=detail,
    )  # fmt: skip


def admits(text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> ArchSet:
    """The archs a returned minimum capability, given as text (`80`), admits."""
    try:
        value = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        value = None
    return _admits(_bound(value), universe)


def widen(
    source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...] = DEFAULT_ARCHS
) -> list[Edit]:
    """The number lowered to the lowest target's; `[]` if it admits them already. Refused when an arch between
    the new bound and the old one is not a target (it would be admitted too), or the number is computed."""
    if gate.detail.get("unknown"):
        raise CannotWiden(f"line {gate.line}: `return {gate.text}`: {gate.detail['unknown']}; edit it by hand")
    if all(gate.admits.admits(arch) for arch in targets):
        return []
    old = _bound(ast.parse(gate.text.strip(), mode="eval").body)  # `89`, or `0x59` as written
    if old is None:
        raise CannotWiden(f"line {gate.line}: `return {gate.text}` is no longer an int; find the gates again")
    new = min(_sm(arch) for arch in targets)
    between = sorted(
        {arch.name for arch in (*universe, *targets) if new <= _sm(arch) < old and arch not in targets}
    )
    if between:
        raise CannotWiden(
            f"line {gate.line}: lowering `return {old}` to {new} would also admit {', '.join(between)}; "
            "ask for those archs too (admit = \"family\") or edit it by hand"
        )
    return [Edit(gate.start, gate.end, str(new).encode())]
