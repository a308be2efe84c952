"""The JIT modules of a FlashInfer tree: its layout, its specs' include closures, and what each module compiles."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from codemods.audit.listing import inside_tree, read_regular, stamp_at
from codemods.core import targets
from codemods.core.arch import Arch
from codemods.core.lazy import LazyModule
from codemods.cpp import instructions
from codemods.cpp import closures
from codemods.cpp.lexer import includes

if TYPE_CHECKING:
    from codemods.jit import kernel_paths
    from codemods.jit import specs as jit_specs
else:  # imported on first use: a scan of C sources, or one answered from the cache, needs none of it
    kernel_paths = LazyModule("codemods.jit.kernel_paths")


@dataclass(frozen=True)
class Layout:
    """Where a FlashInfer tree keeps its JIT specs and the sources they compile."""

    name: str
    jit: str
    csrc: str
    include: str
    libraries: tuple[str, ...] = ()  # CUTLASS's include folders (empty on a clone without submodules)


@lru_cache(maxsize=1)
def layouts() -> tuple[Layout, ...]:
    """The layouts of targets/projects/*.toml that name a JIT folder (FlashInfer's checkout, wheel and package folder).

    Its libraries are the layout's include dirs, other than its own include
    and csrc folders, named for another project whose headers a closure
    follows (closures.FOLLOWED_INCLUDES: CUTLASS/CuTe).
    """
    found = []
    for project in targets.project_tables():
        for layout in project.get("layout", ()):
            if not {"jit", "csrc", "include"} <= layout.keys():
                continue
            own = (layout["csrc"], layout["include"])
            libraries = tuple(
                folder
                for folder in layout.get("include_dirs", ())
                if folder not in own
                and any(part in closures.FOLLOWED_INCLUDES and part != project["name"] for part in folder.split("/"))
            )
            found.append(Layout(layout["name"], layout["jit"], layout["csrc"], layout["include"], libraries))
    return tuple(found)


def detect(root: Path) -> Layout | None:
    for layout in layouts():
        if (root / layout.jit).is_dir() and (root / layout.csrc).is_dir():
            return layout
    return None


def builds_all_specific(root: Path, layout: Layout) -> bool:
    """Whether the FlashInfer at `root` builds every major >= 9 as an `a` target (kernel_paths.all_specific)."""
    return kernel_paths.all_specific(TreeFiles(root).read, posixpath.dirname(layout.jit) or ".")


class TreeFiles:
    """The files of a tree, as a JIT closure sees them (closures.Closures): which exist, their bytes, and what was looked at."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._base = root.resolve()
        self._exists: dict[str, bool] = {}
        # every path looked at, with [size, mtime, inode] (None: no file): the result depends on them
        self.touched: dict[str, list[int] | None] = {}

    def exists(self, rel: str) -> bool:
        """Whether `rel` is a file inside the tree (an absolute path, `..` or a symlink out of it is not)."""
        if rel not in self._exists:
            inside = not posixpath.isabs(rel) and rel != ".." and not rel.startswith("../")
            path = self.root / rel
            if inside and path.is_symlink():
                inside = inside_tree(path, self._base)
            self._exists[rel] = inside and path.is_file()
            self.touched[rel] = stamp_at(path) if inside else None
        return self._exists[rel]

    def read(self, rel: str) -> bytes:
        read = read_regular(self.root / rel) if self.exists(rel) else None
        if read is None:
            raise FileNotFoundError(rel)
        return read[0]


def tree_closures(root: Path, layout: Layout) -> closures.Closures:
    """The JIT include closures of the tree at root, read as scan reads it (verify and the build proof use it)."""
    return closures_over(TreeFiles(root), layout)


def closures_over(files: TreeFiles, layout: Layout) -> closures.Closures:
    return closures.Closures(layout.csrc, layout.include, files.exists, files.read, layout.libraries, parse=includes)


@dataclass
class Module:
    """One JIT spec variant, the files it compiles, and its record for the report."""

    spec: jit_specs.JitSpec
    file: str
    files: frozenset[str]
    record: dict

    @property
    def name(self) -> str:
        return self.spec.module

    def admits(self, arch: Arch) -> bool | None:
        """Whether the gate admits `arch`; None for a spec without a gate."""
        return None if self.spec.gate is None else self.spec.gate.admits(arch)

    def target(self, arch: Arch, all_specific: bool) -> Arch:
        """The nvcc target the module is compiled for on a GPU of `arch`."""
        gate = self.spec.gate
        if gate is not None and arch.major not in gate.majors:
            for target in gate.targets:
                if target.plain == arch.plain:
                    return target
        return instructions.jit_target(arch, all_specific=all_specific)


def read_modules(specs: list[tuple[str, jit_specs.JitSpec]], closures: closures.Closures, arch: Arch) -> list[Module]:
    modules = []
    for file, spec in specs:
        found = closures.closure(spec, libraries=False)
        files, missing = found.files, found.missing
        gate = spec.gate
        record = {
            "module": spec.module,
            "file": file,
            "line": spec.line,
            "function": spec.function,
            "gate": None if gate is None else {"function": gate.function, "line": gate.line, "text": gate.text},
            "admits_arch": None if gate is None else gate.admits(arch),
            "sources": len(spec.sources) - len(missing),
            "closure": len(files),
        }
        modules.append(Module(spec, file, frozenset(files), record))
    return modules
