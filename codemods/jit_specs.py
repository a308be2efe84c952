"""FlashInfer JIT specs in Python source: which module, which sources, which archs it is built for.

A spec is a call `gen_jit_spec("<module>", [sources ...], ...)`. Its
*sources* are the paths under FlashInfer's csrc (or include) folder it
names: `jit_env.FLASHINFER_CSRC_DIR / "x.cu"`, multi-part
`FLASHINFER_CSRC_DIR / "nv_internal" / "x.cpp"`, and bare string literals
naming a source or template file (`"batch_mla_sm90_plan.cu"`, taken as
csrc-relative), found in the sources list or, when that argument is not a
list literal (`source_paths`), anywhere in the function that makes the
call. A string that is one piece of a path under another folder (the
generated sources) is not a source. Its *include dirs* are the csrc or
include paths of `extra_include_paths`. Paths are not checked here.

Its *gate* says which archs the JIT builds it for, in this order:

1. the `supported_major_versions=[...]` lists (python_arch_list gates) in the
   function that makes the call, and the `smXXa_nvcc_flags` names in the
   call's arguments or in a plain `flags = sm90a_nvcc_flags + [...]` statement
   of the function body whose variable the call passes (one exact target
   each; an `if` around the statement makes it no gate);
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
from codemods.gates import Gate, python_arch_list
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
    module = _Module(parse(source), source, universe)
    specs = []
    for call in module.parsed.nodes(cst.Call):
        if _callee(call) != "gen_jit_spec":
            continue
        function = module.function_of(call)
        positional = [arg for arg in call.args if arg.keyword is None]
        keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
        name_node = positional[0].value if positional else keywords.get("name")
        sources_node = positional[1].value if len(positional) > 1 else keywords.get("sources")
        if isinstance(sources_node, (cst.List, cst.Tuple)) or not function:
            sources = module.paths(within=sources_node, loose=True) if sources_node is not None else []
        else:
            sources = module.paths(function=function, loose=True)
        include_node = keywords.get("extra_include_paths")
        include_dirs = module.paths(within=include_node, dirs=True) if include_node is not None else []
        literal = _string(name_node)
        own = module.gate(function, call=call)
        variants: list[tuple[JitGate | None, str]]
        if own is not None:
            variants = [(own, literal or function)]
        else:
            callers = [gate for caller in module.callers(function) if (gate := module.gate(caller)) is not None]
            variants = [(gate, literal or gate.function) for gate in callers] or [(None, literal or function)]
        for gate, name in variants:
            specs.append(
                JitSpec(
                    module=name,
                    function=function,
                    line=module.parsed.line(module.parsed.span(call)[0]),
                    sources=tuple(dict.fromkeys(sources)),
                    include_dirs=tuple(dict.fromkeys(include_dirs)),
                    gate=gate,
                )
            )
    return specs


class _Module:
    """One parsed file, indexed once by enclosing function (libcst subtree walks are slow)."""

    def __init__(self, parsed: PythonSource, source: bytes, universe: tuple[Arch, ...]) -> None:
        self.parsed = parsed
        self._function: dict[int, str] = {}
        self._callees: dict[str, set[str]] = {}
        for call in parsed.nodes(cst.Call):
            self._callees.setdefault(self.function_of(call), set()).add(_callee(call))
        self._lists: dict[str, list[Gate]] = {}
        for gate in python_arch_list.find(source, universe):
            self._lists.setdefault(gate.context, []).append(gate)
        self._flags = [(name, match) for name in parsed.nodes(cst.Name) if (match := _FLAGS_RE.match(name.value))]
        self._paths: list[tuple[cst.CSTNode, tuple[str, str]]] = []
        self._strings: list[tuple[cst.CSTNode, str]] = []
        covered: set[int] = set()
        for node in parsed.nodes((cst.BinaryOperation, cst.SimpleString)):
            if id(node) in covered:
                continue
            if isinstance(node, cst.BinaryOperation):
                path = _path(node)
                if path is not None:
                    self._paths.append((node, path))
                    covered.update(id(piece) for piece in _pieces(node))
            else:
                value = _string(node)
                parent = parsed.parent(node)
                if (
                    value
                    and value.endswith(SOURCE_SUFFIXES)
                    and "{" not in value
                    and not value.startswith("/")
                    # a piece of a path under another folder (FlashInfer's generated sources)
                    and not (isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Divide))
                ):
                    self._strings.append((node, value))

    def function_of(self, node: cst.CSTNode) -> str:
        key = id(node)
        if key not in self._function:
            self._function[key] = self.parsed.enclosing_function(node)
        return self._function[key]

    def inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return node is container or any(ancestor is container for ancestor in self.parsed.ancestors(node))

    def callers(self, function: str) -> list[str]:
        return [
            caller for caller, callees in self._callees.items() if caller and caller != function and function in callees
        ]

    def paths(
        self, *, within: cst.CSTNode | None = None, function: str = "", dirs: bool = False, loose: bool = False
    ) -> list[tuple[str, str]]:
        """The FlashInfer paths under `within` (or in `function`); with `loose`, also bare source file names."""

        def wanted(node: cst.CSTNode) -> bool:
            if within is not None:
                return self.inside(node, within)
            return self.function_of(node) == function

        found = [path for node, path in self._paths if (dirs or path[1].endswith(SOURCE_SUFFIXES)) and wanted(node)]
        if loose:
            found += [("csrc", value) for node, value in self._strings if wanted(node)]
        return found

    def _names_in(self, node: cst.CSTNode) -> set[str]:
        return {name.value for name in self.parsed.nodes(cst.Name, within=node)}

    def _assigned_to(self, name: cst.Name, passed: set[str]) -> bool:
        """Whether `name` is in a plain `x = ...` statement of the function body itself whose `x` the call uses."""
        for ancestor in self.parsed.ancestors(name):
            if isinstance(ancestor, cst.Assign):
                line = self.parsed.parent(ancestor)
                block = self.parsed.parent(line) if line is not None else None
                if not isinstance(self.parsed.parent(block) if block is not None else None, cst.FunctionDef):
                    return False  # inside an if/for/with: the flags may not always apply
                return any(
                    isinstance(target.target, cst.Name) and target.target.value in passed for target in ancestor.targets
                )
        return False

    def gate(self, function: str, call: cst.Call | None = None) -> JitGate | None:
        """The gate of `function`: its supported_major_versions lists and flag names (those `call` uses, if given)."""
        if not function:
            return None
        majors: set[int] = set()
        texts, lines = [], []
        for gate in self._lists.get(function, []):
            listed = gate.detail.get("majors")
            if listed is None:
                return None  # a computed list: the gate cannot be read
            majors.update(listed)
            texts.append(gate.text)
            lines.append(gate.line)
        targets = []
        passed = self._names_in(call) if call is not None else set()
        for name, match in self._flags:
            if self.function_of(name) != function:
                continue
            if call is not None and not self.inside(name, call) and not self._assigned_to(name, passed):
                continue
            code = int(match["code"])
            targets.append(Arch(code // 10, code % 10, match["variant"]))
            texts.append(name.value)
            lines.append(self.parsed.line(self.parsed.span(name)[0]))
        if not texts:
            return None
        return JitGate(
            function=function,
            line=min(lines),
            text=", ".join(dict.fromkeys(texts)),
            majors=tuple(sorted(majors)),
            targets=tuple(dict.fromkeys(targets)),
        )


def _callee(call: cst.Call) -> str:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return ""


def _string(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _pieces(node: cst.BaseExpression) -> list[cst.CSTNode]:
    """The nodes of a `/` chain: the inner BinaryOperations and the string pieces."""
    pieces: list[cst.CSTNode] = []
    while isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        pieces += [node, node.right]
        node = node.left
    return pieces


def _path(node: cst.BaseExpression) -> tuple[str, str] | None:
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
