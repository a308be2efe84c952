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

from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates.python.cst_source import parse
from codemods.jit.spec_ast import AstIndex as _AstIndex
from codemods.jit.spec_index import SOURCE_SUFFIXES, Index, JitGate, JitSpec
from codemods.jit.spec_index import Unsupported as _Unsupported

__all__ = ["SOURCE_SUFFIXES", "JitGate", "JitSpec", "find"]


def find(source: bytes, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> list[JitSpec]:
    """Every gen_jit_spec call in `source`, one spec per gate variant. Raises SourceError on bad Python."""
    if b"gen_jit_spec" not in source:
        return []
    try:
        return _specs(_AstIndex(source))
    except (_Unsupported, RecursionError):
        # Python's own parser is 5-10x faster than libcst; libcst decides what the ast reading cannot vouch for
        # (imported here: a run or scan whose specs ast reads needs no libcst, a third of a second to import)
        from codemods.jit.spec_cst import LibcstIndex

        return _specs(LibcstIndex(parse(source), source, universe))


def _specs(index: Index) -> list[JitSpec]:
    specs = []
    for call in index.calls():
        function = call.function
        if index.is_list(call.sources) or not function:
            sources = index.paths(within=call.sources, loose=True) if call.sources is not None else []
        else:
            sources = index.paths(function=function, loose=True)
        include_dirs = index.paths(within=call.include, dirs=True) if call.include is not None else []
        literal = index.string(call.name)
        own = index.gate(function, call=call.node)
        variants: list[tuple[JitGate | None, str]]
        if own is not None:
            variants = [(own, literal or function)]
        else:
            callers = [gate for caller in index.callers(function) if (gate := index.gate(caller)) is not None]
            variants = [(gate, literal or gate.function) for gate in callers] or [(None, literal or function)]
        for gate, name in variants:
            specs.append(
                JitSpec(
                    module=name,
                    function=function,
                    line=call.line,
                    sources=tuple(dict.fromkeys(sources)),
                    include_dirs=tuple(dict.fromkeys(include_dirs)),
                    gate=gate,
                )
            )
    return specs
