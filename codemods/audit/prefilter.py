"""The byte tests that decide which files of a tree are parsed: only what some gate kind's `find` could match."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from codemods.audit.listing import PYTHON_SUFFIXES
from codemods.core.lazy import LazyModule
from codemods.cpp.lexer import ARCH_TOKEN
from codemods.gates.cmake import cmake_arch_list
from codemods.gates.python import python_capability

if TYPE_CHECKING:
    from codemods.gates.cpp.checks import conditions as cpp_conditions
    from codemods.gates.python import python_arch_list
    from codemods.gates.python import python_arch_map
    from codemods.gates.python import python_arch_or
    from codemods.gates.python import python_arch_test
    from codemods.gates.python import python_arch_call
    from codemods.gates.python import python_min_capability
    from codemods.gates.python import python_predicate
else:  # imported on first use: a scan of C sources, or one answered from the cache, needs none of them
    python_arch_list = LazyModule("codemods.gates.python.python_arch_list")
    python_arch_or = LazyModule("codemods.gates.python.python_arch_or")
    python_arch_test = LazyModule("codemods.gates.python.python_arch_test")
    python_arch_map = LazyModule("codemods.gates.python.python_arch_map")
    python_predicate = LazyModule("codemods.gates.python.python_predicate")
    python_min_capability = LazyModule("codemods.gates.python.python_min_capability")
    python_arch_call = LazyModule("codemods.gates.python.python_arch_call")
    cpp_conditions = LazyModule("codemods.gates.cpp.checks.conditions")


# Cheap byte tests before a Python file is parsed: only what each kind's `find` could match.
PYTHON_PREFILTERS = (
    # the keyword (given a list, a name or a computed value), the capability-list calls python_arch_list.KNOWN_CALLS names, and (major, minor) pairs
    # assigned to a name that says capability (python_arch_list.KNOWN_LITERAL)
    (python_arch_list, re.compile(
        rb"supported_major_versions\s*=(?!=)|\b(?:supported_compute_capability|_match_sm_version)\s*\("
        rb"|(?i:capabilit)\w*\s*(?::[^=\n]*)?=\s*[\[({]\s*\(\s*\d"
    )),
    # a chain starts with a predicate (maybe called) and `or`: `is_sm100a_supported(device)\n or`
    (python_arch_or, re.compile(rb"is_sm\d{2,3}a?(?:_supported)?\b\s*(?:\((?:[^()]|\([^()]*\))*\))?\s*\)*\s*\bor\b")),
    # a predicate or flag right after `if`/`elif`/`while`/`assert`/`and`/`not`; python_arch_or.NAMED_PREDICATES too;
    # and a name spelled like a predicate assigned (`is_sm120 = major == 12 and minor == 0`): python_arch_test
    # reads a function's own such variable as a value, not a predicate, and must see where it is assigned; and a
    # predicate assigned (`flag = is_sm120a_supported(dev)`, `use: bool = (is_sm100() or ...)`, `ok &= ...`)
    (python_arch_test, re.compile(
        rb"(?:\b(?:if|elif|while|assert|and|not)\s|(?<![=!<>])=(?!=))"
        rb"\s*\(?\s*[\w.()]*?\b_?(?:(?:is|has)_sm\d{2,3}[af]?(?:_supported)?|is_blackwell(?:_supported)?)\b"
        rb"|^[ \t]*_?is_sm\d{2,3}\w*[ \t]*(?::[^=\n]*)?=(?!=)"
    )),
)


@lru_cache(maxsize=1)
def named_or_re() -> re.Pattern:
    """An `or` next to a named predicate (`is_blackwell_supported() or ...`): python_arch_or's other chains."""
    names = b"|".join(re.escape(n.encode()) for n in python_arch_or.NAMED_PREDICATES)
    return re.compile(rb"\b_?(?:%s)\b\s*(?:\([^()]*\))?\s*\)*\s*\bor\b|\bor\b\s*\(*\s*[\w.]*\b_?(?:%s)\b" % (names, names))


# What each prefilter's regex cannot match without (python_arch_test: `(is|has)_sm<digits>` or `is_blackwell`; `_sm`,
# which `_smem` holds, sent 1,397 of FlashInfer 0.7.4's Python files to its regex, 21 of them a hit: 5 s)
_PREFILTER_LITERALS = ((b"supported_major_versions", b"supported_compute_capability", b"_match_sm_version", b"apabilit", b"APABILIT"), (b"is_sm",), (b"is_sm", b"has_sm", b"is_blackwell"))
JIT_TOKEN = b"gen_jit_spec"
MIN_CAPABILITY_TOKEN = b"get_min_capability"  # python_min_capability.FUNCTIONS
ARCH_CALL_TOKEN = b"has_arch"  # python_arch_call.KNOWN_CALLS
# Every file may_hold_gates passes holds one of these (or, a C file, runtime_check_pattern): what the finder looks for.
# One literal each test below needs: the capability helpers, arch strings (quoted `sm_`/`compute_`, arch-map keys),
# predicate definitions (`def is_sm..`, `_blackwell`, `_hopper`); tests/audit/test_finder.py checks the superset.
FINDER_TOKENS = tuple(
    dict.fromkeys((
        ARCH_TOKEN, *python_capability.TOKENS, JIT_TOKEN, *(t for group in _PREFILTER_LITERALS for t in group), b"_sm",
        *python_capability.QUOTED_ARCH_TOKENS, *python_arch_map.TOKENS, b"_blackwell", b"_hopper", MIN_CAPABILITY_TOKEN,
        ARCH_CALL_TOKEN,
    ))
)


# What a FlashInfer JIT spec can be made of (jit_specs): statements with none of these are blanked.
JIT_RE = re.compile(
    rb"gen_jit_spec|supported_major_versions|nvcc_flags|FLASHINFER_\w*DIR"
    rb"|\.(?:cu|cuh|cpp|cc|cxx|c|h|hpp|inl|jinja)[\"']"
)


def is_c_file(rel: str) -> bool:
    """Whether a listed file is read as C, C++ or CUDA (every listed file but a Python or CMake one: `nv/target` too)."""
    return not rel.endswith(PYTHON_SUFFIXES) and not cmake_arch_list.is_cmake(rel)


def may_hold_gates(rel: str, data: bytes, in_jit: bool, runtime: bool) -> bool:
    """The byte prefilter: False when no gate kind could find anything in `data`.

    `runtime` says whether the finder (audit.finder) found `runtime_check_pattern` in
    this C file: that regex runs in ripgrep only, Python's `re` takes 40x longer on it.
    """
    if cmake_arch_list.is_cmake(rel):
        return cmake_arch_list.may_hold(data)
    if rel.endswith(PYTHON_SUFFIXES):
        return (
            ARCH_TOKEN in data
            or python_capability.has_pair_token(data)
            or (b"get_device_sm" in data and python_capability.may_hold(data))
            or python_capability.names_arch(data)
            or bool(python_kinds(data))
            or (in_jit and JIT_TOKEN in data)
            or defines_predicates(data)
            or may_hold_arch_map(data)
            or declares_min_capability(data)
            or calls_arch(data)
        )
    return runtime or ARCH_TOKEN in data


# What python_predicate.PREFILTER's names start with (`is_`/`has_` then `sm<digit>`, `blackwell`, `hopper`)
_PREDICATE_NAMES = tuple(f"{prefix}_{word}".encode() for prefix in ("is", "has") for word in ("sm", "blackwell", "hopper"))


def defines_predicates(data: bytes) -> bool:
    """Whether `data` may define an arch predicate (python_predicate)."""
    return b"def" in data and any(name in data for name in _PREDICATE_NAMES) and bool(python_predicate.PREFILTER.search(data))



def calls_arch(data: bytes) -> bool:
    """Whether `data` may call a function given an arch number, `has_arch(100)` or vLLM's
    `has_device_capability(100)` (python_arch_call)."""
    return (ARCH_CALL_TOKEN in data and bool(python_arch_call.PREFILTER.search(data))) or (
        b"_capability" in data and bool(python_arch_call.NUMBERED_PREFILTER.search(data))
    )


def declares_min_capability(data: bytes) -> bool:
    """Whether `data` may define a quantization method's minimum capability (python_min_capability)."""
    return MIN_CAPABILITY_TOKEN in data and bool(python_min_capability.PREFILTER.search(data))


def may_hold_arch_map(data: bytes) -> bool:
    """Whether `data` may hold a dict keyed by arch strings, or a capability table keyed by numbers that a file
    saying `capability` holds (python_arch_map)."""
    return (
        (b'"sm' in data or b"'sm" in data or b'":' in data or b"':" in data) and bool(python_arch_map.PREFILTER.search(data))
    ) or (b"apabilit" in data and bool(python_arch_map.TABLE_PREFILTER.search(data)))


def python_kinds(data: bytes) -> list:
    """The Python gate kinds whose prefilter `data` passes (a literal test first: re is slow on a miss)."""
    kinds = [
        kind
        for (kind, prefilter), literals in zip(PYTHON_PREFILTERS, _PREFILTER_LITERALS)
        if any(literal in data for literal in literals) and prefilter.search(data)
    ]
    if python_arch_or not in kinds and b"is_blackwell" in data and named_or_re().search(data):
        kinds.append(python_arch_or)
    return kinds


@lru_cache(maxsize=1)
def runtime_check_pattern() -> bytes:
    """A comparison of a commonly named capability variable with a number, or a comparison macro over one.

    A regex in the syntax Python's `re` and ripgrep share; the finder runs it (ASCII classes, across lines).
    """
    names = b"|".join(re.escape(n.encode()) for n in sorted(cpp_conditions.COMMON_NAMES, key=len, reverse=True))
    ops = rb"(?:==|!=|<=|>=|<|>)"
    return (
        rb"\b(?:%s)\s*%s\s*\d|\d\s*%s\s*[\w.>-]*\b(?:%s)|_CHECK_(?:EQ|NE|GE|GT|LE|LT)\s*\(\s*[\w.>-]*\b(?:%s)\b"
        % (names, ops, ops, names, names)
    )
