"""Every gate kind, registered explicitly: its selectors and its hooks (see `codemods.gates.base`).

Adding a kind is one module, one test file and one entry here. Each entry
adapts the module's own functions to the hooks' common arguments, so what a
kind reads (the file's language, the predicates' meanings, a gate's detail)
is declared here, never discovered from a signature.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from codemods.core.arch import Arch
from codemods.core.lazy import LazyModule
from codemods.gates import Gate
from codemods.gates.base import GateKind, Selector

# Each kind's module is imported when one of its hooks first runs: `codemod list` checks recipes' selectors
# and needs none of the readers (importing them all was half its start-up time).
hazards = LazyModule("codemods.cpp.hazards")
cuda_guard = LazyModule("codemods.gates.cpp.cuda_guard")
cpp_runtime_check = LazyModule("codemods.gates.cpp.cpp_runtime_check")
cpp_replace = LazyModule("codemods.gates.cpp.cpp_replace")
python_arch_list = LazyModule("codemods.gates.python.python_arch_list")
python_arch_or = LazyModule("codemods.gates.python.python_arch_or")
python_arch_test = LazyModule("codemods.gates.python.python_arch_test")
python_capability = LazyModule("codemods.gates.python.python_capability")
python_predicate = LazyModule("codemods.gates.python.python_predicate")
python_arch_map = LazyModule("codemods.gates.python.python_arch_map")
python_min_capability = LazyModule("codemods.gates.python.python_min_capability")
python_arch_call = LazyModule("codemods.gates.python.python_arch_call")
cmake_arch_list = LazyModule("codemods.gates.cmake.cmake_arch_list")


def cuda_blockers(source: bytes, gate: Gate, targets: tuple[Arch, ...]) -> list[str]:
    """Instructions inside a CUDA guard's region that a target lacks (ARCH_FACTS section 3), each once."""
    found: list[str] = []
    for arch in targets:
        # Located declares plain (settable) fields and Gate is frozen; read-only protocol members in cpp/hazards would fit
        for blocker in hazards.blockers_for(source, gate, arch):  # type: ignore[arg-type]
            if blocker not in found:
                found.append(blocker)
    return found


def _optional(*names: str, hints: dict[str, str] | None = None) -> tuple[Selector, ...]:
    return tuple(Selector(name, hint=(hints or {}).get(name, "")) for name in names)


CUDA_GUARD = GateKind(
    name="cuda_guard",
    selectors=_optional("function"),  # the guards of one function (cpp.functions names them, as scan does)
    find=lambda source, universe, where, selector: cuda_guard.find(source, universe, where.language, **selector),
    admits=lambda text, universe, where, detail: cuda_guard.admits(text, universe),
    widen=lambda source, gate, targets, universe, where: cuda_guard.widen(source, gate, targets, universe),
    blockers=cuda_blockers,
    every_match=True,  # the guards of one shape in a file are one feature path (trtllm_allreduce.cuh: 13)
)

CPP_RUNTIME_CHECK = GateKind(
    name="cpp_runtime_check",
    selectors=_optional(
        "function", "variable", "macro", "names", hints={"names": 'names = {"getSMVersion()" = "sm", "props.major" = "major"}'}
    ),
    find=lambda source, universe, where, selector: cpp_runtime_check.find(source, universe, where.language, **selector),
    admits=lambda text, universe, where, detail: cpp_runtime_check.admits(text, universe, detail),
    widen=lambda source, gate, targets, universe, where: cpp_runtime_check.widen(source, gate, targets, universe),
    check_selector=lambda key, value: cpp_runtime_check.check_selector(key, value),
    has_edit=lambda gate, arch: arch is None or cpp_runtime_check.has_edit(gate, arch),
)

CPP_REPLACE = GateKind(
    name="cpp_replace",
    selectors=(
        Selector("function", required=True),
        Selector("replace", required=True, hint='replace = [{from = "...", to = "..."}]'),
        Selector("within"),
    ),
    rewrite=lambda source, where, selector: cpp_replace.rewrite(source, where.language, **selector),
    check_selector=lambda key, value: cpp_replace.check_selector(key, value),
)

PYTHON_ARCH_LIST = GateKind(
    name="python_arch_list",
    selectors=_optional(
        "function", "keyword", "call", "position", "assigns", hints={"position": "position = 1   # the second positional argument"}
    ),
    find=lambda source, universe, where, selector: python_arch_list.find(source, universe, **selector),
    admits=lambda text, universe, where, detail: python_arch_list.admits(text, universe),
    widen=lambda source, gate, targets, universe, where: python_arch_list.widen(source, gate, targets, universe),
    check_selector=lambda key, value: python_arch_list.check_selector(key, value),
    selects_kernels=True,
)

PYTHON_ARCH_OR = GateKind(
    name="python_arch_or",
    selectors=_optional("function", "assigns"),
    find=lambda source, universe, where, selector: python_arch_or.find(source, universe, where.meanings, **selector),
    admits=lambda text, universe, where, detail: python_arch_or.admits(
        text, universe, python_arch_or.scoped(where.meanings, detail.get("class"))
    ),
    widen=lambda source, gate, targets, universe, where: python_arch_or.widen(source, gate, targets, universe, where.meanings),
    missing_symbols=lambda source, gate, targets, universe, where: python_arch_or.missing_symbols(
        source, gate, targets, universe, where.meanings
    ),
    reads_predicates=True,
    selects_kernels=True,
)

PYTHON_ARCH_TEST = GateKind(
    name="python_arch_test",
    selectors=_optional(
        "function", "assigns", "calls", "negation", "tests",
        hints={"negation": 'negation = "parentheses"', "tests": 'tests = "has_sm100f"'},
    ),
    find=lambda source, universe, where, selector: python_arch_test.find(source, universe, where.meanings, **selector),
    admits=lambda text, universe, where, detail: python_arch_test.admits(
        text, universe, python_arch_or.scoped(where.meanings, detail.get("class"))
    ),
    widen=lambda source, gate, targets, universe, where: python_arch_test.widen(
        source, gate, targets, universe, where.meanings, where.styles.get("negation", "")
    ),
    notes=lambda source, gate, targets, universe, where: python_arch_test.notes(
        source, gate, targets, universe, where.meanings, where.styles.get("negation", "")
    ),
    style=lambda source: {"negation": style} if (style := python_arch_test.negation_shown(source)) else {},
    missing_symbols=lambda source, gate, targets, universe, where: python_arch_test.missing_symbols(
        source, gate, targets, universe, where.meanings
    ),
    check_selector=lambda key, value: python_arch_test.check_selector(key, value),
    reads_predicates=True,
    selects_kernels=True,
)

PYTHON_CAPABILITY = GateKind(
    name="python_capability",
    selectors=_optional("function", "assigns", "calls", "names", hints={"names": 'names = {"_device_sm" = "sm", "backend" = "sm"}'}),
    find=lambda source, universe, where, selector: python_capability.find(source, universe, **selector),
    admits=lambda text, universe, where, detail: python_capability.admits(text, universe, detail),
    widen=lambda source, gate, targets, universe, where: python_capability.widen(
        source, gate, targets, universe, where.number_membership
    ),
    check_selector=lambda key, value: python_capability.check_selector(key, value),
    selects_kernels=True,
    has_edit=lambda gate, arch: not gate.detail.get("members"),  # widen writes no CuTe DSL `Arch.sm_121a`
)

# Read by `scan`, never widened: a predicate's definition is every caller's gate.
PYTHON_PREDICATE = GateKind(
    name="python_predicate",
    find=lambda source, universe, where, selector: python_predicate.find(source, universe, where.meanings),
    admits=lambda text, universe, where, detail: python_predicate.admits(text, universe),
    widen=lambda source, gate, targets, universe, where: python_predicate.widen(source, gate, targets),
    reads_predicates=True,
    widens=False,
)

# Widened with a value copied from a key of the same major, or from the row `value_from` names in a capability
# table (python_arch_map.widen), or refused.
PYTHON_ARCH_MAP = GateKind(
    name="python_arch_map",
    selectors=_optional(
        "assigns", "key", "function", "value_from",
        hints={
            "assigns": 'assigns = "_TMEM_MAX_ALLOC_COLUMNS_MAP"', "key": 'key = "mm_fp4"   # the dict under this key of `assigns`',
            "value_from": "value_from = 100   # a capability table's new rows copy row 100",
        },
    ),
    find=lambda source, universe, where, selector: python_arch_map.find(source, universe, **selector),
    admits=lambda text, universe, where, detail: python_arch_map.admits(text, universe),
    widen=lambda source, gate, targets, universe, where: python_arch_map.widen(source, gate, targets),
    notes=lambda source, gate, targets, universe, where: python_arch_map.notes(gate, targets),
    check_selector=lambda key, value: python_arch_map.check_selector(key, value),
    # only an arch widen can add: a same-major key below it to copy a value from (find lists them as `adds`)
    has_edit=lambda gate, arch: arch is None or arch.name in gate.detail.get("adds", ()),
)

# A quantization method's lowest capability (`return 89` in get_min_capability): lowered to the targets'.
PYTHON_MIN_CAPABILITY = GateKind(
    name="python_min_capability",
    selectors=_optional("function"),
    find=lambda source, universe, where, selector: python_min_capability.find(source, universe, **selector),
    admits=lambda text, universe, where, detail: python_min_capability.admits(text, universe),
    widen=lambda source, gate, targets, universe, where: python_min_capability.widen(source, gate, targets, universe),
)

# A function given an arch number, or an `or` of its calls (`has_arch(100) or has_arch(103)`, vLLM's
# `current_platform.is_device_capability_family(100)`): gains the targets'.
PYTHON_ARCH_CALL = GateKind(
    name="python_arch_call",
    selectors=_optional(
        "call", "function", "assigns", hints={"call": 'call = "has_arch"   # has_arch(100) or has_arch(103)'}
    ),
    find=lambda source, universe, where, selector: python_arch_call.find(source, universe, None, where.meanings, **selector),
    admits=lambda text, universe, where, detail: python_arch_call.admits(text, universe, where.meanings),
    widen=lambda source, gate, targets, universe, where: python_arch_call.widen(source, gate, targets, universe, where.meanings),
    check_selector=lambda key, value: python_arch_call.check_selector(key, value),
    reads_predicates=True,  # vLLM's numbered platform predicates (`has_device_capability(100)`)
)

# A CMake list of the archs a kernel family is built for (`cuda_archs_loose_intersection(SCALED_MM_ARCHS "10.0a;12.0a" ...)`).
CMAKE_ARCH_LIST = GateKind(
    name="cmake_arch_list",
    selectors=_optional("variable", hints={"variable": 'variable = "SCALED_MM_ARCHS"   # the variable the list sets'}),
    find=lambda source, universe, where, selector: cmake_arch_list.find(source, universe, **selector),
    admits=lambda text, universe, where, detail: cmake_arch_list.admits(text, universe, detail),
    widen=lambda source, gate, targets, universe, where: cmake_arch_list.widen(source, gate, targets, universe),
    has_edit=lambda gate, arch: "unread" not in gate.detail,  # a list built from ${VAR} is left as it is
)

_KINDS = (
    CUDA_GUARD, CPP_RUNTIME_CHECK, CPP_REPLACE, PYTHON_ARCH_LIST, PYTHON_ARCH_OR, PYTHON_ARCH_TEST, PYTHON_CAPABILITY,
    PYTHON_PREDICATE, PYTHON_ARCH_MAP, PYTHON_MIN_CAPABILITY, PYTHON_ARCH_CALL, CMAKE_ARCH_LIST,
)  # fmt: skip

KINDS: dict[str, GateKind] = {kind.name: kind for kind in _KINDS}


def modules() -> dict[str, ModuleType]:
    """The module that implements each kind, by kind name (imported here)."""
    return {name: importlib.import_module(module_path(name)) for name in KINDS}


def module_path(kind: str) -> str:
    """A kind's module is named as the kind, in its language's folder: codemods/gates/python/, cmake/ or cpp/."""
    room = "python" if kind.startswith("python_") else "cmake" if kind.startswith("cmake_") else "cpp"
    return f"codemods.gates.{room}.{kind}"


def selector_keys(module: ModuleType) -> set[str]:
    """The selectors declared for the kind `module` implements."""
    return set(KINDS[module.KIND].selector_names)
