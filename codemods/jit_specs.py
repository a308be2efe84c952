"""FlashInfer JIT specs in Python source: which module, which sources, which archs it is built for.

A spec is a call `gen_jit_spec("<module>", [sources ...], ...)`. Its
*sources* are the paths under FlashInfer's csrc folder it names:
`jit_env.FLASHINFER_CSRC_DIR / "x.cu"`, multi-part
`FLASHINFER_CSRC_DIR / "nv_internal" / "x.cpp"`, or, when the sources
argument is not a list literal, every such path and every string literal
naming a source or template file (`"batch_mla_sm90_plan.cu"`) in the
function that makes the call. Its *include dirs* are the csrc or include
paths of `extra_include_paths`.

Its *gate* says which archs the JIT builds it for, in this order:

1. the `supported_major_versions=[...]` lists (python_arch_list gates) in the
   function that makes the call, and the `smXXa_nvcc_flags` names in the
   call's arguments (one exact target each, e.g. `sm90a_nvcc_flags`);
2. when the function has neither, each function of the same file that calls
   it and has either anywhere in its body gives one variant of the spec
   (`gen_cutlass_fused_moe_sm120_module` -> `gen_cutlass_fused_moe_module`);
3. otherwise the spec has no gate: the JIT builds it for every arch it is
   asked for. A list that is not all integer literals also counts as no gate.

The module name is the first argument when it is a string literal, else the
name of the gating function (or of the calling function). Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from codemods.arch import DEFAULT_ARCHS, Arch
from codemods.gates import python_arch_list
from codemods.gates._python import PythonSource, parse

SOURCE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".inl", ".jinja")
_FLAGS_RE = re.compile(r"^sm_?(?P<code>\d{2,3})(?P<variant>[af]?)_nvcc_flags$")
_ROOTS = {"FLASHINFER_CSRC_DIR": "csrc", "FLASHINFER_INCLUDE_DIR": "include"}


@dataclass(frozen=True)
class JitGate:
    """The archs a spec is built for: listed majors, exact targets from flag names, or both."""

    function: str
    line: int
    text: str
    majors: tuple[int, ...] = ()
    targets: tuple[Arch, ...] = ()  # exact nvcc targets (sm90a_nvcc_flags -> sm_90a)

    def admits(self, arch: Arch) -> bool:
        return arch.major in self.majors or any(t.plain == arch.plain for t in self.targets)


@dataclass(frozen=True)
class JitSpec:
    module: str
    function: str  # the function that calls gen_jit_spec
    line: int  # line of the gen_jit_spec call
    sources: tuple[tuple[str, str], ...]  # (root, path): root is "csrc" or "include"
    include_dirs: tuple[tuple[str, str], ...]
    gate: JitGate | None  # None: built for every arch the JIT is asked for


def find(source: bytes, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> list[JitSpec]:
    """Every gen_jit_spec call in `source`, one spec per gate variant. Raises SourceError on bad Python."""
    if b"gen_jit_spec" not in source:
        return []
    parsed = parse(source)
    functions: dict[str, cst.FunctionDef] = {}
    for node in parsed.nodes(cst.FunctionDef):
        functions.setdefault(node.name.value, node)
    specs = []
    for call in parsed.nodes(cst.Call):
        if _callee(call) != "gen_jit_spec":
            continue
        function = parsed.enclosing_function(call)
        body = functions.get(function)
        positional = [arg for arg in call.args if arg.keyword is None]
        keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
        name_node = positional[0].value if positional else keywords.get("name")
        sources_node = positional[1].value if len(positional) > 1 else keywords.get("sources")
        if isinstance(sources_node, (cst.List, cst.Tuple)) or body is None:
            sources = _paths(parsed, sources_node) if sources_node is not None else []
        else:
            sources = _paths(parsed, body, loose=True)
        include_node = keywords.get("extra_include_paths")
        include_dirs = _paths(parsed, include_node, dirs=True) if include_node is not None else []
        literal = _string(name_node)
        line = parsed.line(parsed.span(call)[0])
        own = _gate(parsed, source, universe, function, within=call)
        variants: list[tuple[JitGate | None, str]]
        if own is not None:
            variants = [(own, literal or function)]
        else:
            callers = [
                gate
                for caller, node in functions.items()
                if caller != function and _calls(parsed, node, function)
                if (gate := _gate(parsed, source, universe, caller, within=node)) is not None
            ]
            variants = [(gate, literal or gate.function) for gate in callers] or [(None, literal or function)]
        for gate, module in variants:
            specs.append(
                JitSpec(
                    module=module,
                    function=function,
                    line=line,
                    sources=tuple(dict.fromkeys(sources)),
                    include_dirs=tuple(dict.fromkeys(include_dirs)),
                    gate=gate,
                )
            )
    return specs


def _callee(call: cst.Call) -> str:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return ""


def _calls(parsed: PythonSource, node: cst.CSTNode, function: str) -> bool:
    return any(_callee(call) == function for call in parsed.nodes(cst.Call, within=node))


def _gate(
    parsed: PythonSource, source: bytes, universe: tuple[Arch, ...], function: str, within: cst.CSTNode
) -> JitGate | None:
    """The gate in `function`: its supported_major_versions lists and the flag names under `within`."""
    lists = python_arch_list.find(source, universe, function=function) if function else []
    majors: set[int] = set()
    texts, lines = [], []
    for gate in lists:
        listed = gate.detail.get("majors")
        if listed is None:
            return None  # a computed list: the gate cannot be read
        majors.update(listed)
        texts.append(gate.text)
        lines.append(gate.line)
    targets = []
    for name in parsed.nodes(cst.Name, within=within):
        match = _FLAGS_RE.match(name.value)
        if match:
            code = int(match["code"])
            targets.append(Arch(code // 10, code % 10, match["variant"]))
            texts.append(name.value)
            lines.append(parsed.line(parsed.span(name)[0]))
    if not texts:
        return None
    return JitGate(
        function=function,
        line=min(lines),
        text=", ".join(dict.fromkeys(texts)),
        majors=tuple(sorted(majors)),
        targets=tuple(dict.fromkeys(targets)),
    )


def _string(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _path(parsed: PythonSource, node: cst.BaseExpression) -> tuple[str, str] | None:
    """`ROOT / "a" / "b.cu"` (ROOT one of the FlashInfer dirs) as (root, "a/b.cu"); None otherwise."""
    pieces: list[str] = []
    while isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        piece = _string(node.right)
        if piece is None:
            return None
        pieces.append(piece)
        node = node.left
    if not pieces:
        return None
    head = node.attr.value if isinstance(node, cst.Attribute) else node.value if isinstance(node, cst.Name) else ""
    if head not in _ROOTS:
        return None
    return _ROOTS[head], "/".join(reversed(pieces)).strip("/")


def _paths(parsed: PythonSource, node: cst.CSTNode, *, dirs: bool = False, loose: bool = False) -> list[tuple[str, str]]:
    """The FlashInfer paths under `node`; with `loose`, also bare string literals naming a source file."""
    found = []
    inside_path: set[cst.CSTNode] = set()
    for expression in parsed.nodes(cst.BinaryOperation, within=node):
        if id(expression) in inside_path:
            continue
        path = _path(parsed, expression)
        if path is None:
            continue
        for sub in parsed.nodes((cst.BinaryOperation, cst.SimpleString), within=expression):
            inside_path.add(id(sub))
        if dirs or path[1].endswith(SOURCE_SUFFIXES):
            found.append(path)
    if loose:
        for literal in parsed.nodes(cst.SimpleString, within=node):
            if id(literal) in inside_path:
                continue
            value = _string(literal)
            if value and value.endswith(SOURCE_SUFFIXES) and "{" not in value and not value.startswith("/"):
                parent = parsed.parent(literal)
                if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Divide):
                    continue  # a piece of a path under some other folder (the generated sources)
                found.append(("csrc", value))
    return found
