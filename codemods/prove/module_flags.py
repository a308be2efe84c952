"""The nvcc flags FlashInfer's own JIT would use for a module on one side of the build proof.

codemods.jit.flags evaluates FlashInfer's Python code; where the JIT refuses
the arch (the module's gate excludes it) the module is "not built" there, as
it would be on a GPU. A checkout without `flashinfer/data` reads the links
its build_backend.py would make.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

from codemods.core import errors
from codemods.core.arch import Arch
from codemods.jit import flags as jit_flags
from codemods.prove import trusted_flags
from codemods.jit.machine import Machine
from codemods.jit.values import NotBuilt, Unreadable

@dataclass
class Side:
    """One side of the proof (base or work tree) on disk."""

    name: str  # "base" or "work"
    root: Path  # the project folder of this side on disk
    package: Path  # its flashinfer package folder
    links: dict[str, str]  # data/<name> -> checkout folder, when the package has no data folder


def data_links(build_backend: str) -> dict[str, str]:
    """FlashInfer's `flashinfer/data/<name>` -> checkout folder links, from build_backend.py's `ln(source, name)` calls."""
    links: dict[str, str] = {}
    try:
        tree = ast.parse(build_backend)
    except SyntaxError:
        return links
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ln" and len(node.args) == 2:
            source, name = node.args
            if isinstance(source, ast.Constant) and isinstance(name, ast.Constant) and isinstance(source.value, str):
                links[str(name.value)] = source.value
    return links


def module_flags(side: Side, spec_file: str, function: str, arch: Arch, machine: Machine) -> jit_flags.ModuleBuild | str:
    """FlashInfer's flags for the module on this side, or the JIT's reason for not building it.

    Raises FlagRefused when the tree's code gives nvcc a flag or source
    outside codemods.prove.trusted_flags' allow-list.
    """
    code: dict[str, str] = {}

    def read(path: str) -> str | None:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        if path.endswith(".py"):
            code[path] = text
        return text

    try:
        build = jit_flags.module_build(read, str(side.package), str(side.package / spec_file), function, (arch.major, arch.minor), machine)
    except NotBuilt as exc:
        return str(exc)
    except Unreadable as exc:
        raise errors.JitUnreadable(f"cannot read the nvcc flags of {function}: {exc}", where=f"{side.name} tree") from None
    if side.links and not (side.package / "data").is_dir():
        data = str(side.package / "data") + "/"

        def place(text: str) -> str:
            for name, source in side.links.items():
                if text.startswith(data + name):
                    return str(side.root / source) + text[len(data + name):]
            return text

        build = jit_flags.ModuleBuild(build.module, tuple(place(s) for s in build.sources), tuple(place(f) for f in build.flags))
    roots = (machine.cuda_home, machine.tvm_ffi_include, machine.python_include)
    refused = trusted_flags.refusal(
        build.flags, build.sources, str(side.root), roots, code, lambda path: os.path.relpath(path, side.root), f"{side.name} tree"
    )
    if refused is not None:
        raise refused
    return build


def missing_include_dirs(flags: tuple[str, ...], root: Path) -> list[str]:
    """Include folders of the flags that lie in the tree and are absent or empty (uninitialised submodules)."""
    found, take = [], False
    for flag in flags:
        folder = None
        if take:
            folder, take = flag, False
        elif flag in ("-isystem", "-I"):
            take = True
        elif flag.startswith("-I"):
            folder = flag[2:]
        if folder and folder.startswith(str(root) + "/"):
            path = Path(folder)
            if not path.is_dir() or not any(path.iterdir()):
                found.append(os.path.relpath(folder, root))
    return found
