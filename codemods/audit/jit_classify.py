"""Python gates that exclude the arch, classified by the JIT modules they keep from it; and each gate's owning module."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from codemods.audit import classify
from codemods.audit.jit_hazards import _Callers
from codemods.audit.jit_modules import Module
from codemods.audit.python_advice import ADVISED
from codemods.audit.jit_users import Trees, Way, ways_in
from codemods.core.arch import Arch
from codemods.core.lazy import LazyModule
from codemods.cpp import instructions as instruction_table
from codemods.cpp.instructions import Hit
from codemods.gates.python import python_capability

if TYPE_CHECKING:
    from codemods.jit import kernel_paths
    from codemods.jit import specs as jit_specs
else:  # imported on first use: a scan of C sources, or one answered from the cache, needs none of it
    kernel_paths = LazyModule("codemods.jit.kernel_paths")
CAPABILITY_KIND = python_capability.KIND


# (kernel_paths.SELECTING_KINDS: a recipe widening it is checked), but aot.py's `if has_smXX:` blocks build
# their own arch's modules; classifying those tests by module waits until the audit sample judges them.
_CLASSIFIED_BY_MODULES = ("python_arch_or", "python_arch_list", CAPABILITY_KIND)


# Kinds whose records already say what the arch gets (a predicate's definition, a lookup that raises).
OWN_PATH = ("python_predicate", "python_arch_map")
# A test of build flags only (`has_sm120`, `has_sm120 or has_sm121`, `not has_sm90 and not has_sm100`).
_FLAG = r"[\s(]*(?:not\s+)?_?has_sm\d{2,3}[af]?[\s)]*"
_FLAGS_RE = re.compile(rf"{_FLAG}(?:(?:and|or){_FLAG})*")


def classify_jit_gates(
    gates: list[dict], modules: list[Module], paths: kernel_paths.Tree, arch: Arch, python_files: tuple[str, ...] = (),
    trees: Trees | None = None, ahead: Callable[[], dict[str, list[Way] | None]] | None = None,
) -> None:
    """Classify each Python gate that excludes `arch` by the JIT modules it keeps from it.

    A spec's arch list keeps its module from `arch`; an API gate (a decorator,
    an or-chain, a capability test) the modules its code path builds
    (kernel_paths). Widening is a port, not an edit, when those modules'
    sources use instructions `arch` lacks anywhere (under guards for other
    archs too: widening would build them without that code). An API gate whose
    modules cannot be followed is a blocker only when it admits an arch of
    `arch`'s family (sm_120 for sm_121); otherwise unknown.

    A spec's list is not what keeps `arch` from the module when every way
    into the module (jit_users, over `python_files`) is gated for other
    families (moe_utils: only CuTe DSL MoE APIs for sm_100/103 call it), and
    widening builds kernels that need multicast hardware when the module uses
    `multimem`: both need a human, not a widening. `ahead()`, when given, gives
    the ways into some of the specs' functions (`ways_ahead`), read already.
    """
    python_gates = {(g["file"], g["line"]): g for g in gates if g["kind"].startswith("python_")}
    lines = gate_lines(gates)
    spec_gates = _spec_gates(modules)
    if trees is None:  # the package's Python files, parsed once for all the specs' ways in (the scan's, if given)
        trees = Trees(paths.read, paths.parsed)
    for record in gates:
        if not _module_classified(record):
            continue
        # a gate whose statement said what the arch gets (audit.python_advice: a branch inside a function) is
        # re-read only for the modules its path builds
        advised = bool(record.get(ADVISED))
        refine_only = advised and record["classification"] not in (classify.BLOCKER, classify.WIDENABLE)
        if record["classification"] not in (classify.BLOCKER, classify.WIDENABLE) and not advised:
            continue  # the arch does not get nothing there: a comparison that guards no code path (value_path)
        held = spec_gates.get((record["file"], record["line"]))
        if held is not None:
            specs = [(m.file, m.spec) for m in held]
            names = " and ".join(dict.fromkeys(m.name for m in held))
            what = f"{names} is not built for {arch.name}"
        else:
            try:
                source = paths.read(record["file"])
            except OSError:
                continue
            found = (
                kernel_paths.check(
                    paths, record["file"], source, record["kind"], record["line"], record.get("symbol") or "", (arch,)
                )
                if record["kind"] in _CLASSIFIED_BY_MODULES
                else kernel_paths.PathCheck()
            )
            specs = paths.specs_named(found.modules)
            what = record["reason"] if advised else f"`{record.get('symbol') or record['text']}` does not run on {arch.name}"
            if specs:
                what += f" (it builds {', '.join(found.modules[:2])})"
                record["owner"] = found.modules[0] + (f" (and {len(found.modules) - 1} more)" if len(found.modules) > 1 else "")
        if refine_only and not specs and held is None:
            continue
        if not specs and held is None:
            family = [a for a in record["admits"] if Arch.parse(a).major == arch.major]
            if _FLAGS_RE.fullmatch(record["text"]):
                path = classify.Path(
                    classify.UNDECIDED,
                    f"{what}: an AOT build flag picks the modules built ahead of time for its own target "
                    f"({', '.join(record['admits']) or 'no arch'}); what {arch.name} builds is not followed",
                )
            elif family:
                path = classify.Path(classify.NOTHING, f"{what}, while it admits {', '.join(family)}")
            else:
                path = classify.Path(
                    classify.UNDECIDED,
                    f"{what}; it is written for {', '.join(record['admits']) or 'no arch'} and the kernels it runs "
                    "are not followed",
                )
            lacking: list[str] = []
        else:
            path = classify.Path(classify.NOTHING, what)
            admitted = tuple(Arch.parse(a) for a in record["admits"])
            lacking = _module_lacking(paths, specs, arch, admitted)
            if held is not None and not lacking:
                path = _spec_path(held, paths, python_files, python_gates, lines, arch, trees, ahead) or path
            if not lacking and path.gets == classify.NOTHING:
                path = _written_for_another_family(specs, arch, what) or _computed_sources(specs, what) or path
        if refine_only and path.gets == classify.NOTHING and not lacking:
            continue  # the modules say no more than the statement did
        # gate_record asked the gate's kind (classify.editable): of blocker and widenable, widenable has an edit
        editable = record["classification"] == classify.WIDENABLE
        record["classification"], record["reason"] = classify.classify(True, path, lacking, editable)


def _module_lacking(
    paths: kernel_paths.Tree, specs: list[tuple[str, jit_specs.JitSpec]], arch: Arch, admitted: tuple[Arch, ...] = ()
) -> list[str]:
    """Instructions (or CuTe/CUTLASS names for them) `arch` lacks anywhere in the modules' own sources and headers,
    else a CUTLASS ArchTag of another major there; less what every arch of `admitted` (the gate's) lacks too,
    which those builds compile and never emit (kernel_paths.check_specs, which `codemod run` asks)."""
    families = instruction_table.lacking(arch)
    hits: list[Hit] = []
    seen: set[str] = set()
    for _, spec in specs:
        if not spec.sources:
            continue
        closure = paths.closure(spec)
        for rel in closure.files:
            if rel in closure.library or rel in seen:
                continue
            seen.add(rel)
            data = paths.source(rel)
            if data is None or not instruction_table.may_hold(data, families):
                continue
            shape = paths.structure(rel, data)
            if shape is None:
                continue
            names = {family.name for family in families}
            found = [h for h in shape.top if h.family in names]
            found += [h for branch in shape.branches for h in branch.hits if h.family in names]
            hits += found
    hits = [h for h in hits if not _carried(h, admitted)]
    instructions = [h for h in hits if not h.wrapper]
    described = instruction_table.describe(instructions or hits, arch)
    return described or _arch_tags(paths, arch, seen, admitted)


def _carried(hit: Hit, admitted: tuple[Arch, ...]) -> bool:
    return bool(admitted) and all(instruction_table.lacked(hit, a) for a in admitted)


def gate_lines(gates: list[dict]) -> dict[str, set[int]]:
    """The lines of each file's Python gates (any kind): where a way into a module is decided (jit_users.ways_in)."""
    lines: dict[str, set[int]] = {}
    for record in gates:
        if record["kind"].startswith("python_"):
            lines.setdefault(record["file"], set()).add(record["line"])
    return lines


def _spec_gates(modules: list[Module]) -> dict[tuple[str, int], list[Module]]:
    spec_gates: dict[tuple[str, int], list[Module]] = {}
    for module in modules:
        gate = module.spec.gate
        if gate is not None:
            spec_gates.setdefault((module.file, gate.line), []).append(module)
    return spec_gates


def _module_classified(record: dict) -> bool:
    return record["excludes_arch"] and record["kind"].startswith("python_") and record["kind"] not in OWN_PATH


def ways_ahead(gates: list[dict], modules: list[Module]) -> list[str]:
    """The specs' functions whose ways in `classify_jit_gates` may follow (every one it can, more than it may):
    those of the modules whose spec list is a Python gate that excludes the arch."""
    spec_gates = _spec_gates(modules)
    held = [spec_gates.get((record["file"], record["line"])) for record in gates if _module_classified(record)]
    return list(dict.fromkeys(module.spec.function for found in held if found for module in found))


def _spec_path(
    held: list[Module], paths: kernel_paths.Tree, python_files: tuple[str, ...], python_gates: dict,
    lines: dict[str, set[int]], arch: Arch, trees: Trees, ahead: Callable[[], dict[str, list[Way] | None]] | None = None,
) -> classify.Path | None:
    """A `port` path for a spec list that excludes `arch` when widening it alone is not what `arch` needs."""
    names = " and ".join(dict.fromkeys(m.name for m in held))
    functions = list(dict.fromkeys(m.spec.function for m in held))
    found: list[list[Way] | None] = []
    for function in functions:  # an ungated way (or none followed) decides it: the other functions cannot change that
        read = ahead() if ahead is not None else {}
        found.append(
            read[function] if function in read else ways_in(paths.read, python_files, lines, function, trees, until_ungated=True)
        )
        if found[-1] is None or not all(way.gated for way in found[-1] or ()):
            break
    ways = [way for part in found if part is not None for way in part]
    gated = [python_gates.get((way.file, way.line)) for way in ways if way.gated]
    if None not in found and ways and all(way.gated for way in ways) and None not in gated:
        records = [g for g in gated if g is not None]
        family = [a for g in records for a in g["admits"] if Arch.parse(a).major == arch.major]
        if all(g["excludes_arch"] for g in records) and not family:
            shown = ", ".join(
                dict.fromkeys(f"{g.get('symbol') or g['text']} ({g['file']}:{g['line']}, {g['text']})" for g in records)
            )
            return classify.Path(
                classify.PORT,
                f"{names} is not built for {arch.name}, but only code kept from {arch.name} uses it: {shown}; "
                f"widening this list alone gives {arch.name} nothing (it goes with porting those)",
            )
    needs = _module_hardware(paths, [(m.file, m.spec) for m in held])
    if needs:
        return classify.Path(
            classify.PORT,
            f"{names} is not built for {arch.name}; its kernels use {needs}, which needs NVLink multicast (NVLS) "
            f"hardware at run time (ARCH_FACTS §3D): whether {arch.name} systems have it is not in the code",
        )
    return None


# an arch a module or one of its sources is named for: `gemm_sm120`, `fused_moe_trtllm_sm100`, `..._sm120.cu`
_NAMED_ARCH_RE = re.compile(r"(?<![a-z0-9])sm_?(\d{2,3})[af]?(?![0-9])", re.IGNORECASE)


def _written_for_another_family(
    specs: list[tuple[str, jit_specs.JitSpec]], arch: Arch, what: str
) -> classify.Path | None:
    """A `port` path when every module the gate keeps from `arch` is named (itself, or its sources) for archs of
    other families only: the maintainers name a module for the arch its kernels are written for (gemm_sm120's
    block-scaled mma.sync, fused_moe_trtllm_sm100's sm_100a cubins); widening builds that code for `arch`."""
    named: dict[str, list[str]] = {}
    for _, spec in specs:
        texts = [spec.module, *(posixpath.basename(path) for _, path in spec.sources)]
        archs = {f"sm_{m}" for text in texts for m in _NAMED_ARCH_RE.findall(text)}
        if not archs or any(int(a[3:]) // 10 == arch.major for a in archs):
            return None
        named[spec.module] = sorted(archs, key=lambda a: int(a[3:]))
    if not named:
        return None
    shown = "; ".join(f"{module} for {', '.join(archs)}" for module, archs in named.items())
    return classify.Path(
        classify.PORT,
        f"{what}; its modules are named for another family than {arch.name} ({shown}): their kernels are "
        f"written for those archs, so widening builds them for {arch.name} unported",
    )


def _computed_sources(specs: list[tuple[str, jit_specs.JitSpec]], what: str) -> classify.Path | None:
    """An `unknown` path when a module's sources are computed (FlashInfer's fmha_v2 generates its kernels at
    JIT time): widenable says the code uses nothing the arch lacks, which codemod cannot say of code it did not
    read."""
    computed = [spec.module for _, spec in specs if not spec.sources]
    if not computed:
        return None
    return classify.Path(
        classify.UNDECIDED,
        f"{what}; the sources of {', '.join(dict.fromkeys(computed))} are computed: codemod cannot read what "
        "widening would build",
    )


# multimem compiles on every target from sm_90; it needs a multicast object and multicast hardware to run
_MULTIMEM_RE = re.compile(rb"\bmultimem\.[a-z_]+")


def _module_hardware(paths: kernel_paths.Tree, specs: list[tuple[str, jit_specs.JitSpec]]) -> str:
    """The first `multimem.*` instruction in the modules' own sources and headers (`file:line`), or ""."""
    for _, spec in specs:
        if not spec.sources:
            continue
        closure = paths.closure(spec)
        for rel in closure.files:
            data = paths.source(rel) if rel not in closure.library else None
            match = _MULTIMEM_RE.search(data) if data is not None and b"multimem." in data else None
            if match is not None and data is not None:
                line = data.count(b"\n", 0, match.start()) + 1
                return f"{match.group().decode()} ({rel}:{line})"
    return ""


def _arch_tags(paths: kernel_paths.Tree, arch: Arch, files: set[str], admitted: tuple[Arch, ...]) -> list[str]:
    """The CUTLASS ArchTags of another family in the modules' own files (instructions.arch_tag, as run's check
    reads them): their kernels are built from collectives whose instructions `arch` lacks, even when only the
    CUTLASS headers hold the tokens."""
    for rel in sorted(files):
        tag = paths.arch_tag(rel, arch)
        if tag is not None and not _carried(tag, admitted):
            return [f"{tag.token} ({rel}:{tag.line}): a CUTLASS kernel built from sm_{tag.token.rsplit('Sm', 1)[1]} "
                    f"collectives, whose instructions {arch.name} lacks"]
    return []


def uncalled_guards(gates: list[dict], modules: list[Module], read: Callable[[str], bytes]) -> None:
    """A CUDA guard listed as a blocker or widenable inside a device function (not a kernel) that no call in the
    files of any JIT module compiling it reaches (C++ name lookup, codemods.cpp.calls, the reader the empty-kernel
    hazard uses) is covered: no kernel of any arch runs that code, so the arch loses nothing there and widening
    changes nothing. A guard whose function a call reaches, or may reach (a call codemod cannot resolve), or in
    a file no module compiles, keeps its classification."""
    listed = [
        g for g in gates
        if g["kind"] == "cuda_guard" and g.get("classification") in (classify.BLOCKER, classify.WIDENABLE)
    ]  # fmt: skip
    if not listed:
        return
    compiling: dict[str, list[Module]] = {}
    for module in modules:
        for rel in module.files:
            compiling.setdefault(rel, []).append(module)
    callers = _Callers(read)
    starts: dict[str, list[int]] = {}
    for record in listed:
        holders = compiling.get(record["file"])
        if not holders:
            continue
        rel = record["file"]
        if rel not in starts:
            try:
                source = read(rel)
            except OSError:
                continue
            starts[rel] = [0] + [i + 1 for i, byte in enumerate(source) if byte == 0x0A]
        offsets = starts[rel]
        if record["line"] > len(offsets):
            continue
        offset = offsets[record["line"] - 1]
        function = callers.function(rel, offset)
        if function is None or function.kernel:
            continue
        if any(callers.called(rel, offset, module)[0] is not False for module in holders):
            continue
        names = list(dict.fromkeys(m.name for m in holders))
        shown = ", ".join(names[:3]) + (f" (and {len(names) - 3} more)" if len(names) > 3 else "")
        path = classify.Path(
            classify.UNCALLED,
            f"no call in the files of {shown} reaches `{function.qualified}`, the device function around this guard: "
            "no kernel runs this code on any arch",
        )
        record["classification"], record["reason"] = classify.classify(True, path, [], False)


def in_ported_modules(gates: list[dict], modules: list[Module]) -> None:
    """A C gate (cuda_guard, cpp_runtime_check) listed as a blocker or widenable in a file that only modules whose
    JIT lists keep them from the arch and need a human compile (fused_moe_trtllm_sm100 for sm_110: written for
    another family) needs a human too: widening it alone builds nothing for the arch, and its modules are a port.
    A file some other module compiles (or one whose list is widenable, trtllm_comm for sm_121) keeps its
    classification."""
    lists = {(g["file"], g["line"]): g for g in gates if g["kind"] == "python_arch_list"}
    compiling: dict[str, list[Module]] = {}
    for module in modules:
        for rel in module.files:
            compiling.setdefault(rel, []).append(module)
    for record in gates:
        if record["kind"] not in ("cuda_guard", "cpp_runtime_check"):
            continue
        if record.get("classification") not in (classify.BLOCKER, classify.WIDENABLE):
            continue
        holders = compiling.get(record["file"])
        if not holders:
            continue
        held = [
            lists.get((m.file, m.spec.gate.line)) if m.spec.gate is not None else None for m in holders
        ]  # fmt: skip
        if any(g is None or not g["excludes_arch"] or g["classification"] != classify.NEEDS_HUMAN for g in held):
            continue
        first = next(g for g in held if g is not None)
        names = ", ".join(dict.fromkeys(m.name for m in holders))
        path = classify.Path(
            classify.PORT,
            f"only {names} compile this file, and the list keeping it from the arch needs a human "
            f"({first['file']}:{first['line']}: {first['reason']}): widening this gate alone builds nothing",
        )
        record["classification"], record["reason"] = classify.classify(True, path, [], False)


def owners(gates: list[dict], modules: list[Module]) -> None:
    """`owner` of each gate that excludes the arch: the JIT module(s) compiling its file, or made by its spec."""
    compiling: dict[str, list[str]] = {}
    for module in modules:
        for rel in module.files:
            compiling.setdefault(rel, []).append(module.name)
        spec_gate = module.spec.gate
        if spec_gate is not None:
            compiling.setdefault(f"{module.file}:{spec_gate.line}", []).append(module.name)
    for gate in gates:
        if not gate["excludes_arch"]:
            continue
        names = list(dict.fromkeys(compiling.get(f"{gate['file']}:{gate['line']}") or compiling.get(gate["file"], [])))
        if names:
            gate["owner"] = names[0] + (f" (and {len(names) - 1} more)" if len(names) > 1 else "")


def outside_the_package(
    gates: list[dict], exists: Callable[[str], bool], python: str,
    importer: Callable[[str, str], tuple[str, int] | None] = lambda rel, copy: None,
) -> None:
    """A definition gate (OWN_PATH), or a capability comparison (CuTe DSL's own `arch == Arch.sm_120a`), in a Python
    file the package never imports (a folder between it and the package folder `python` has no `__init__.py`: the
    CUTLASS sources a wheel ships for JIT builds) is covered: the code that runs imports its own copy, if any. A
    folder without `__init__.py` is importable all the same (a namespace package, PEP 420): `importer(file, folder)`
    names a file outside the folder that imports it, and then the gate keeps its classification."""
    for record in gates:
        if record["kind"] not in (*OWN_PATH, "python_capability") or not record["excludes_arch"]:
            continue
        if python != "." and not record["file"].startswith(python + "/"):
            continue
        folder, missing = posixpath.dirname(record["file"]), []
        while folder and folder != python and posixpath.dirname(folder) != folder:
            if not exists(f"{folder}/__init__.py"):
                missing.append(folder)
            folder = posixpath.dirname(folder)
        if not missing:
            continue
        found = importer(record["file"], missing[-1])
        if found is None:  # else imported (or maybe: a file that does not parse), as code that runs
            record["classification"] = classify.COVERED
            record["reason"] = f"{missing[0]} has no __init__.py and no file imports this module: the package never imports this copy"
