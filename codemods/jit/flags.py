"""The nvcc command FlashInfer's own JIT would run for a module, read from its Python source.

`module_build(...)` answers: for the JIT module made by `gen_X_module()` in
`flashinfer/jit/X.py`, on a GPU of one arch, which sources would FlashInfer
compile and with which nvcc flags? It does not import FlashInfer (which needs
torch, a GPU and its own compiled library). It reads the source text with the
stdlib `ast` and evaluates, step by step, the code FlashInfer runs: the
module's `gen_X_module()`, `gen_jit_spec(...)` (the `-std`, `-O3`,
`-DFLASHINFER_ENABLE_*` flags), `CompilationContext.get_nvcc_flags_list` (the
`-gencode` of the GPU's arch, or the error FlashInfer raises when the module
is not built for it) and `cpp_ext.generate_ninja_build_for_op` (the include
folders, `--expt-relaxed-constexpr` ...). The `cuda_cflags` of the ninja file
that function writes are the flags. What FlashInfer asks of the machine is
answered from `Machine`: the GPU is one device of the given arch, nvcc is the
one codemod runs, TVM-FFI's headers are those of the installed
`apache-tvm-ffi`, and every `FLASHINFER_*` environment variable is unset (the
defaults).

Only a small, side-effect-free part of Python is evaluated: literals,
f-strings, names, attributes, calls of the project's own functions and
classes, list/set/dict methods, comprehensions, if/for/try/return/raise.
Anything else (an unknown library call, a `while` loop) stops the reading
with `Unreadable`, naming the file and line, rather than guessing a flag.
Pure apart from `read`, the callback that gives the text of a project file.
The reader is codemods.jit.interpreter (modules, names, calls) over
jit.evaluator (statements, expressions) and jit.values, where `NotBuilt`
and `Unreadable` are defined.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from codemods.jit.interpreter import Interpreter
from codemods.jit.machine import Machine
from codemods.jit.values import Instance, Unreadable


@dataclass(frozen=True)
class ModuleBuild:
    """One JIT module on one arch: its sources and the nvcc flags FlashInfer compiles them with."""

    module: str
    sources: tuple[str, ...]  # absolute paths
    flags: tuple[str, ...]  # nvcc flags without -c/-o and dependency output

    def gencode(self) -> list[str]:
        return [f for f in self.flags if f.startswith("-gencode")]


def module_build(
    read: Callable[[str], str | None],
    package: str,
    spec_file: str,
    function: str,
    arch: tuple[int, int],
    machine: Machine,
) -> ModuleBuild:
    """Evaluate `function()` of `spec_file` and the ninja generation FlashInfer runs for the spec it returns.

    `package` is the absolute path of the `flashinfer` package folder,
    `spec_file` the absolute path of the .py file defining `function`;
    `read(path)` returns the text of an absolute path, or None when there is
    no such file. Raises NotBuilt when FlashInfer's own code refuses the arch,
    Unreadable when the code cannot be evaluated here.
    """
    interp = Interpreter(read, package, arch, machine)
    spec = interp.call_function(spec_file, function)
    if not isinstance(spec, Instance):
        raise Unreadable(f"{spec_file}: {function}() did not return a JitSpec")
    fields = spec.attrs
    ninja_file = posixpath.join(package, "jit", "cpp_ext.py")
    text = interp.call_function(
        ninja_file,
        "generate_ninja_build_for_op",
        kwargs={
            "name": fields.get("name"),
            "sources": fields.get("sources"),
            "extra_cflags": fields.get("extra_cflags"),
            "extra_cuda_cflags": fields.get("extra_cuda_cflags"),
            "extra_ldflags": fields.get("extra_ldflags"),
            "extra_include_dirs": fields.get("extra_include_dirs"),
            "needs_device_linking": fields.get("needs_device_linking", False),
        },
    )
    if not isinstance(text, str):
        raise Unreadable(f"{ninja_file}: generate_ninja_build_for_op did not return the ninja text")
    variables = ninja_variables(text)
    if "cuda_cflags" not in variables:
        raise Unreadable(f"{ninja_file}: the ninja file it writes has no cuda_cflags")
    flags = shlex.split(ninja_expand(variables["cuda_cflags"], variables))
    sources = tuple(str(s) for s in fields.get("sources") or ())
    return ModuleBuild(str(fields.get("name")), sources, tuple(flags))


# ------------------------------------------------------------------ ninja


def ninja_variables(text: str) -> dict[str, str]:
    """The top-level `name = value` bindings of a ninja file (continuations `$` + newline joined)."""
    text = re.sub(r"\$\n[ \t]*", "", text)
    found = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z_][\w.-]*)[ \t]*=[ \t]*(.*)$", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def ninja_expand(value: str, variables: dict[str, str], depth: int = 0) -> str:
    """Expand `$name`, `${name}`, `$$` and `$ ` the way ninja does (unknown names expand to nothing)."""
    if depth > 20:
        raise Unreadable("ninja variables refer to each other in a loop")

    def one(match: re.Match) -> str:
        token = match.group(0)
        if token == "$$":
            return "$"
        if token in ("$ ", "$:"):
            return token[1]
        name = match.group(1) or match.group(2)
        return ninja_expand(variables.get(name, ""), variables, depth + 1)

    return re.sub(r"\$\$|\$ |\$:|\$\{([\w.-]+)\}|\$([A-Za-z_][\w-]*)", one, value)
