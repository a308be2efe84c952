"""The hazards of a FlashInfer tree for one arch: empty kernels, and instructions the arch lacks where it compiles them.

`codemod scan` of a FlashInfer tree (checkout, wheel or package layout)
also reads the JIT specs under `flashinfer/jit` (jit_specs) and follows each spec's
sources through their `#include "..."`/`<...>` closure inside the tree
(the including file's folder for quoted includes, then the include root,
the csrc folder and the spec's extra include dirs), and reports:

- `empty-kernel`: the spec's gate lists majors (or flag targets) and
  admits `arch`, while a guard in its closure compiles a body of code out
  on `arch`'s JIT target (instruction_table.jit_target), keeps it on an *older*
  target the spec is built for, and leaves `arch` no other branch of the
  group with code: a guard written before `arch` existed (`< 1200`,
  `== 1000`). The kernel runs without that code and returns wrong results
  with no error. A guard that keeps code only for newer targets (`>= 1000`
  seen from sm_90) marks a feature `arch` lacks and is not reported; nor is
  a guard nested in one `arch` already skips. Specs without such a gate are
  built for whatever the user asks and are not judged: such a guard was
  there before any widening.
- `unsupported-instruction`: an arch-selected branch (`#if __CUDA_ARCH__ >=
  1000`, or the `#else` after one) that `arch`'s JIT target takes, around
  tokens of an instruction `arch` lacks (`tcgen05.alloc`), so the module
  does not build. No hazard when every spec whose closure holds the file
  is gated away from `arch`; `potential` when the file is in no spec's
  closure or only in specs without a gate, when the branch also depends
  on other macros, or when only CuTe/CUTLASS wrapper names are found
  (they may compile to a trap instead). Also at a Python gate that admits
  `arch` and selects a JIT module (an or-chain or capability test through
  the `gen_*_module` it calls; a spec's arch list through the spec) whose
  closure, CUTLASS included, holds such tokens in code `arch`'s target
  compiles (kernel_paths); definite only for an instruction in one of the
  spec's sources or under an arch guard that admits the target.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from codemods.audit.jit_modules import Module
from codemods.audit.records import one_line
from codemods.core.arch import Arch
from codemods.core.lazy import LazyModule
from codemods.cpp import calls
from codemods.cpp import instructions as instruction_table
from codemods.cpp.structure import Structure
from codemods.gates.python import python_capability

if TYPE_CHECKING:
    from codemods.cpp import syntax
    from codemods.jit import kernel_paths
else:  # imported on first use: a scan of C sources, or one answered from the cache, needs none of them
    kernel_paths = LazyModule("codemods.jit.kernel_paths")
CAPABILITY_KIND = python_capability.KIND


def empty_kernels(
    modules: list[Module],
    structures: dict[str, Structure],
    arch: Arch,
    universe: tuple[Arch, ...],
    all_specific: bool,
    read: Callable[[str], bytes] | None = None,
) -> list[dict]:
    """`empty-kernel` hazards of `modules` on `arch` (see the module docstring).

    With `read` (a tree file's bytes), a guard inside a device function that is
    no kernel counts only where the module's code calls that function: it is
    definite when a call surely reaches it (C++ name lookup, codemods.cpp.calls),
    potential when codemod cannot tell which definition a call reaches, and no
    hazard when nothing the module compiles calls it.
    """
    found: dict[tuple[str, int], dict] = {}
    details: dict[tuple[str, int], tuple] = {}
    callers = _Callers(read) if read is not None else None
    for module in modules:
        gate = module.spec.gate
        if gate is None or not gate.admits(arch):
            continue
        target = module.target(arch, all_specific)
        # Only older targets count: a guard that keeps code from `arch` but gives it to a newer
        # target (`>= 1000` seen from sm_90) marks a feature `arch` lacks, not a guard left narrow.
        older = [a for a in universe if (a.major, a.minor) < (arch.major, arch.minor) and gate.admits(a)]
        siblings = {module.target(a, all_specific) for a in older}
        for rel in sorted(module.files & structures.keys()):
            shape = structures[rel]
            for branch in shape.branches:
                if branch.directive == "#else" or not branch.names_arch:
                    continue
                if shape.own(branch, target) is not False or not shape.has_code(branch):
                    continue
                if branch.parent is not None and not shape.reachable(shape.branches[branch.parent], target):
                    continue
                if shape.gives_code(branch, target):
                    continue
                kept = sorted(
                    (s for s in siblings if shape.own(branch, s) is True and shape.taken(branch, s) is not False),
                    key=lambda a: (a.major, a.minor, a.variant),
                )
                if not kept:
                    continue
                called, why = callers.called(rel, branch.start, module) if callers is not None else (True, "")
                if called is False:
                    continue  # a helper nothing the module compiles calls: no kernel loses this code
                key = (rel, branch.line)
                if key in found:
                    found[key]["read_modules"].append(module.name)
                    if called and found[key]["potential"]:
                        found[key]["potential"], details[key] = False, (branch, target, kept, module, why)
                    continue
                found[key] = {
                    "kind": "empty-kernel",
                    "file": rel,
                    "line": branch.line,
                    "module": module.name,
                    "potential": called is None,
                    "read_modules": [module.name],
                }
                details[key] = (branch, target, kept, module, why)
    out = []
    for key, record in found.items():
        branch, target, kept, module, why = details[key]
        names = list(dict.fromkeys(record.pop("read_modules")))
        gate = module.spec.gate
        runs = "may run" if record["potential"] else "runs"
        record["message"] = (
            f"{' and '.join(names)} {'is' if len(names) == 1 else 'are'} built for {arch.name} "
            f"({module.file}:{gate.line} admits it; compiled as {target.name}), but "
            f"`{branch.directive} {branch.condition}` compiles this code out there while "
            f"{', '.join(a.name for a in kept)} keep{'s' if len(kept) == 1 else ''} it: the kernel {runs} without it "
            "and returns garbage without an error; widen this guard together with the JIT gate"
            + (f" ({why})" if why else "")
        )
        out.append(record)
    return out


class _Callers:
    """Whether a module's code calls the device function around a guard (codemods.cpp.calls), remembered per name."""

    def __init__(self, read: Callable[[str], bytes]) -> None:
        self._read = read
        self._functions: dict[tuple[str, int], calls.Function | None] = {}
        self._definitions: dict[str, syntax.Definitions] = {}  # one parse per file, whatever number of guards it holds
        self._holding: dict[tuple[str, str], bool] = {}
        self._names: dict[tuple[str, str], calls.Names] = {}
        self._verdicts: dict[tuple[str, int, str], tuple[bool | None, str]] = {}

    def _source(self, rel: str) -> bytes | None:
        try:
            return self._read(rel)
        except OSError:
            return None

    def function(self, rel: str, offset: int) -> calls.Function | None:
        """The function definition around `offset` in `rel` (None: file level, or the file cannot be read)."""
        if (rel, offset) not in self._functions:
            source = self._source(rel)
            found = None
            if source is not None:
                if rel not in self._definitions:
                    self._definitions[rel] = calls.definitions(source)
                definition = self._definitions[rel].innermost(offset, body=True)
                found = None if definition is None else calls.function(definition, source, rel)
            self._functions[rel, offset] = found
        return self._functions[rel, offset]

    def called(self, rel: str, offset: int, module: Module) -> tuple[bool | None, str]:
        """(True: a call reaches it, or no helper holds the guard; None: cannot tell; False: nothing calls it, why)."""
        function = self.function(rel, offset)
        if function is None or function.kernel:
            return True, ""
        key = (rel, function.start, module.name)
        if key not in self._verdicts:
            self._verdicts[key] = self._judge(function, module)
        return self._verdicts[key]

    def _judge(self, function: calls.Function, module: Module) -> tuple[bool | None, str]:
        name = function.name
        if not calls.named_calls_only(function):
            return None, f"`{function.qualified}` is called without its name (an operator, constructor or destructor)"
        found: list[calls.Names] = []
        for rel in sorted(module.files):
            if (rel, name) not in self._holding:
                source = self._source(rel)
                self._holding[rel, name] = source is not None and name.encode() in source
                if self._holding[rel, name]:
                    assert source is not None
                    self._names[rel, name] = calls.read(source, name, rel)
            if self._holding[rel, name]:
                found.append(self._names[rel, name])
        known = calls.Known.of(found)
        reached: list[calls.Call] = []
        unsure: list[str] = []
        for names in found:
            for call in names.calls:
                if call.file == function.file and function.start <= call.offset < function.end:
                    continue  # a call inside the function itself
                verdict = calls.reaches(call, function, known)
                if verdict:
                    reached.append(call)
                elif verdict is None:
                    unsure.append(f"a call at {call.file}:{_line(self._source(call.file), call.offset)}")
            unsure += [f"a use at {names.file}:{_line(self._source(names.file), at)}" for at in names.unread[:1]]
        if reached:
            first = reached[0]
            return True, f"`{function.qualified}` is called at {first.file}:{_line(self._source(first.file), first.offset)}"
        if unsure:
            return None, f"whether {unsure[0]} reaches `{function.qualified}` codemod cannot tell"
        return False, ""


def _line(source: bytes | None, offset: int) -> int:
    return 0 if source is None else source.count(b"\n", 0, offset) + 1


def unsupported(
    modules: list[Module], structures: dict[str, Structure], arch: Arch, all_specific: bool
) -> list[dict]:
    names = {family.name for family in instruction_table.lacking(arch)}
    holding: dict[str, list[Module]] = {}
    for module in modules:
        for rel in module.files:
            holding.setdefault(rel, []).append(module)
    out = []
    for rel, shape in structures.items():
        holders = holding.get(rel, [])
        admitting = [m for m in holders if m.admits(arch) is True]
        ungated = [m for m in holders if m.admits(arch) is None]
        # (target, module name, whether only potential, where the file is built)
        contexts: list[tuple[Arch, str | None, bool, str]]
        if admitting:
            contexts = [
                (m.target(arch, all_specific), m.name, False, f"{m.name} is built for {arch.name}") for m in admitting
            ]
        elif ungated:
            contexts = [
                (
                    m.target(arch, all_specific),
                    m.name,
                    True,
                    f"{m.name} has no arch list, so it is built for {arch.name} when asked",
                )
                for m in ungated
            ]
        elif not holders:
            contexts = [(arch, None, True, "no JIT spec compiles this file, so whether anything builds it is unknown")]
        else:
            continue  # every module that compiles this file is gated away from arch
        merged: dict[int, dict] = {}
        for target, module_name, potential, where in contexts:
            for branch in shape.branches:
                own_hits = [hit for hit in branch.hits if hit.family in names]
                if not own_hits or not shape.reachable(branch, target):
                    continue
                selecting = shape.selecting(branch)
                if selecting is None:
                    continue
                entry = merged.setdefault(
                    selecting.index,
                    {"branch": selecting, "hits": {}, "modules": {}, "decided": False, "target": target},
                )
                entry["hits"].update(dict.fromkeys(own_hits))
                entry["modules"].setdefault(module_name, where)
                entry["decided"] |= not potential and shape.taken(selecting, target) is True
        for entry in merged.values():
            out.append(_unsupported_record(rel, shape, entry, arch))
    return out


def _unsupported_record(rel: str, shape: Structure, entry: dict, arch: Arch) -> dict:
    branch, hits = entry["branch"], sorted(entry["hits"], key=lambda h: h.line)
    found_tokens = instruction_table.tokens(hits)
    wheres = list(entry["modules"].values())
    instructions = [hit for hit in hits if not hit.wrapper]
    condition = "#else" if branch.directive == "#else" else f"{branch.directive} {branch.condition}"
    verb = "admits" if shape.taken(branch, entry["target"]) is True else "may admit"
    if instructions:
        what = f"{', '.join(found_tokens)}, which ptxas rejects there"
    else:
        what = (
            f"{', '.join(found_tokens)}: CuTe/CUTLASS names for instructions {arch.name} lacks, which "
            "fail to build or trap at run time (CUTE_INVALID_CONTROL_PATH) when called"
        )
    more = f" (and {len(wheres) - 1} more modules)" if len(wheres) > 1 else ""
    return {
        "kind": "unsupported-instruction",
        "file": rel,
        "line": branch.line,
        "module": next(iter(entry["modules"])),
        # Wrapper names alone may compile to a trap instead of failing: never more than potential.
        "potential": not (entry["decided"] and instructions),
        "tokens": found_tokens,
        "message": (
            f"`{condition}` {verb} {arch.name} (compiled as {entry['target'].name}) around {what}; "
            f"{wheres[0]}{more}. {instruction_table.describe((instructions or hits)[:1], arch)[0]}"
        ),
    }


def python_gate_paths(
    gates: list[dict], modules: list[Module], paths: kernel_paths.Tree, arch: Arch
) -> list[dict]:
    """`unsupported-instruction` at each Python gate that admits `arch` and selects a JIT module compiling
    instructions `arch` lacks (kernel_paths): an or-chain or capability test through the functions it
    calls, a spec's supported_major_versions list or flag names through the spec (there only the tokens
    outside arch guards: unsupported reports those inside at the guard, when the spec admits `arch`)."""
    out = []
    for gate in gates:
        if gate["kind"] not in ("python_arch_or", CAPABILITY_KIND) or arch.name not in gate["admits"]:
            continue
        try:
            source = paths.read(gate["file"])
        except OSError:
            continue
        found = _tokens_only(kernel_paths.check(paths, gate["file"], source, gate["kind"], gate["line"], "", (arch,)))
        record = _python_gate_record(gate["file"], gate["line"], gate["text"], found, arch)
        if record is not None:
            out.append(record)
    seen: set[tuple[str, int]] = set()
    for module in modules:
        spec_gate = module.spec.gate
        if spec_gate is None or not spec_gate.admits(arch) or (module.file, spec_gate.line) in seen:
            continue
        seen.add((module.file, spec_gate.line))
        found = _tokens_only(kernel_paths.check_specs(paths, [(module.file, module.spec)], (arch,)))
        # Tokens under an arch guard of the module's closure are unsupported's, at the guard.
        found.found = [finding for finding in found.found if not finding.guard]
        found.undecided = []
        record = _python_gate_record(module.file, spec_gate.line, spec_gate.text, found, arch)
        if record is not None:
            out.append(record)
    return out


def _tokens_only(found: kernel_paths.PathCheck) -> kernel_paths.PathCheck:
    """`found` without its CUTLASS ArchTags: in a module already built for the arch a tag of another major is
    mostly one arm of a per-arch dispatch; the tag counts against widening a gate to the arch (jit_classify, run)."""
    found.found = [finding for finding in found.found if finding.hit.family != instruction_table.ARCH_TAG]
    return found


# The Python kinds classified by the modules they keep from the arch. python_arch_test also selects modules


def _python_gate_record(file: str, line: int, text: str, found, arch: Arch) -> dict | None:
    hits = sorted(found.found or found.undecided, key=lambda f: (not f.certain, f.hit.wrapper))
    if not hits:
        return None
    certain = [f for f in found.found if f.certain]
    first = next(iter(certain), next((f for f in hits if not f.hit.wrapper), hits[0]))
    found_tokens = list(dict.fromkeys(f.hit.token for f in hits))
    instructions = [f for f in found.found if not f.hit.wrapper]
    shown = ", ".join(found_tokens[:6]) + (f" and {len(found_tokens) - 6} more" if len(found_tokens) > 6 else "")
    if certain:
        what = f"{shown}, which ptxas rejects there"
    elif instructions:
        what = (
            f"{shown}, which ptxas rejects there if emitted: the first is in a header outside any arch guard, "
            "compiled only when a kernel calls it"
        )
    elif found.found:
        what = (
            f"{shown}: CuTe/CUTLASS names for instructions {arch.name} lacks, which fail to build or trap "
            "at run time (CUTE_INVALID_CONTROL_PATH) when called"
        )
    else:
        what = f"{shown} under `{first.guard}`, which codemod cannot decide for {first.target.name}"
    modules = " and ".join(found.modules[:2]) + (f" (and {len(found.modules) - 2} more)" if len(found.modules) > 2 else "")
    message = (
        f"`{one_line(text)}` admits {arch.name}, so {modules} is built for it (compiled as {first.target.name}); "
        f"its sources use {what} (first at {first.where}). {instruction_table.describe([first.hit], arch)[0]}"
    )
    if found.unread:
        message += f". Not followed: {'; '.join(found.unread[:2])}"
    return {
        "kind": "unsupported-instruction",
        "file": file,
        "line": line,
        "module": first.module,
        # Only an instruction the target surely emits is definite; wrapper names may compile to a trap.
        "potential": not certain,
        "tokens": found_tokens,
        "message": message,
    }
