"""Scan's empty-kernel analysis for a few JIT modules of one tree: what `verify` and the build proof ask of the audit.

A JIT module built for an arch whose `#if` guard compiles a kernel body out
there, while an older arch the module supports keeps it, launches an empty
kernel (FlashInfer PR #3903). `find` runs scan's own analysis on the tree as
it is on disk, for the modules named or touched by a change, without listing
the whole tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from codemods.core.arch import Arch


@dataclass(frozen=True)
class EmptyKernel:
    """`codemod scan`'s empty-kernel hazard on one target: a JIT module built for it whose guard drops code."""

    arch: str
    module: str
    spec: str  # where the module's JIT gate admits the arch, `flashinfer/jit/comm.py:61`
    file: str  # the guard's file, repo-relative
    line: int
    guard: str  # the guard's directive and condition
    message: str  # scan's message


def find(
    root: Path,
    targets: tuple[Arch, ...],
    universe: tuple[Arch, ...],
    modules: tuple[str, ...] = (),
    changed: tuple[str, ...] = (),
) -> list[EmptyKernel]:
    """`codemod scan`'s empty-kernel hazards on `targets`, for some JIT modules of the FlashInfer tree at `root`.

    The modules judged are those named in `modules` and those whose spec
    file or include closure holds a file of `changed` (paths relative to
    `root`). This is scan's own analysis (jit_modules.read_modules,
    jit_hazards.empty_kernels over what analysis.analyse reads from the JIT spec
    files and the closure files), run on the tree as it is on disk, without
    listing the whole tree; [] where there is no FlashInfer JIT layout. Only
    definite hazards: a guard in a device function that codemod cannot tell
    the module calls is scan's `potential` and not returned.
    """
    from codemods.audit import analysis, jit_hazards, jit_modules, listing, records

    root = Path(root)
    layout = jit_modules.detect(root)
    if layout is None or not targets:
        return []
    universe = tuple(dict.fromkeys((*universe, *targets)))
    context = records.Context(
        root=str(root), arch=targets[0], universe=universe, jit=layout.jit, layout=True,
        include_all=False, hazards=True, cache=None, key="",
    )  # fmt: skip

    def analyse(rel: str, in_jit: bool):
        try:
            found = listing.read_regular(root / rel)  # as scan reads: a FIFO in the tree is never opened for reading
        except OSError:
            found = None
        if found is None:
            return records.FileScan(rel)
        return analysis.analyse(rel, found[0], context, in_jit, runtime=False)  # specs and #if structures only

    specs = []
    for file in sorted((root / layout.jit).rglob("*.py")):
        rel = file.relative_to(root).as_posix()
        specs += [(rel, spec) for spec in analyse(rel, True).specs]
    wanted, changed_files = set(modules), set(changed)
    chosen = [
        module
        for module in jit_modules.read_modules(specs, jit_modules.tree_closures(root, layout), targets[0])
        if module.name in wanted or module.file in changed_files or module.files & changed_files
    ]
    structures = {}
    for rel in sorted(set().union(*(module.files for module in chosen))):
        shape = analyse(rel, False).structure
        if shape is not None:
            structures[rel] = shape
    all_specific = jit_modules.builds_all_specific(root, layout)
    read = jit_modules.TreeFiles(root).read
    found = []
    for arch in targets:
        for hazard in jit_hazards.empty_kernels(chosen, structures, arch, universe, all_specific, read):
            if hazard["potential"]:
                continue  # a guard in a helper codemod cannot tell is called: scan lists it, nothing fails on it
            module = next(m for m in chosen if m.name == hazard["module"] and m.admits(arch))
            branch = structures[hazard["file"]].at_line(hazard["line"])
            guard = f"{branch.directive} {branch.condition}" if branch is not None else ""
            gate = module.spec.gate
            assert gate is not None  # jit_hazards.empty_kernels reports only modules whose gate admits arch
            spec = f"{module.file}:{gate.line}"
            found.append(EmptyKernel(arch.name, module.name, spec, hazard["file"], hazard["line"], guard, hazard["message"]))
    return found
