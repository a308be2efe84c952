"""What verify and the build proof ask of `codemod scan`: a tree's JIT layout, closures and empty-kernel hazards.

This is the one place outside scan that reaches into it; scan should
export `jit_layout`, `tree_closures` and `empty_kernels` itself, and these
bodies then become imports.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from codemods.audit import scan as _scan
from codemods.core.arch import Arch

tree_closures = _scan.tree_closures


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


def jit_layout(root: Path) -> _scan.Layout | None:
    """The FlashInfer JIT layout of the tree at `root` (its JIT and csrc folders), None when it has none."""
    return _scan._detect(root)


def empty_kernels(
    root: Path,
    targets: tuple[Arch, ...],
    universe: tuple[Arch, ...],
    modules: tuple[str, ...] = (),
    changed: tuple[str, ...] = (),
) -> list[EmptyKernel]:
    """`codemod scan`'s empty-kernel hazards on `targets`, for some JIT modules of the FlashInfer tree at `root`.

    The modules judged are those named in `modules` and those whose spec
    file or include closure holds a file of `changed` (paths relative to
    `root`). This is scan's own analysis (its modules, closures and
    empty-kernel check over what it reads from the JIT spec files and the
    closure files), run on the tree as it is on disk, without listing the
    whole tree; [] where there is no FlashInfer JIT layout.
    """
    root = Path(root)
    layout = jit_layout(root)
    if layout is None or not targets:
        return []
    universe = tuple(dict.fromkeys((*universe, *targets)))
    context = _scan._Context(
        root=str(root), arch=targets[0], universe=universe, jit=layout.jit, layout=True,
        include_all=False, hazards=True, cache=None, key="",
    )  # fmt: skip

    def analyse(rel: str, in_jit: bool):
        try:
            data = (root / rel).read_bytes()
        except OSError:
            return _scan._FileScan(rel)
        return _scan._analyse(rel, data, context, in_jit)

    specs = []
    for file in sorted((root / layout.jit).rglob("*.py")):
        rel = file.relative_to(root).as_posix()
        specs += [(rel, spec) for spec in analyse(rel, True).specs]
    wanted, changed_files = set(modules), set(changed)
    chosen = [
        module
        for module in _scan._modules(specs, tree_closures(root, layout), targets[0])
        if module.name in wanted or module.file in changed_files or module.files & changed_files
    ]
    structures = {}
    for rel in sorted(set().union(*(module.files for module in chosen))):
        shape = analyse(rel, False).structure
        if shape is not None:
            structures[rel] = shape
    all_specific = _scan._all_specific(root, layout)
    found = []
    for arch in targets:
        for hazard in _scan._empty_kernels(chosen, structures, arch, universe, all_specific):
            module = next(m for m in chosen if m.name == hazard["module"] and m.admits(arch))
            branch = structures[hazard["file"]].at_line(hazard["line"])
            guard = f"{branch.directive} {branch.condition}" if branch is not None else ""
            spec = f"{module.file}:{module.spec.gate.line}"
            found.append(EmptyKernel(arch.name, module.name, spec, hazard["file"], hazard["line"], guard, hazard["message"]))
    return found
