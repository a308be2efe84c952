"""Guards a stood-in header may decide: a changed arch's verdict is `unknown`, never ok, while one reads such a macro.

When `verify` preprocesses with empty stand-ins for missing third-party
headers (codemods.prove.nvcc), a guard that decides whether changed lines
compile on an arch and reads a macro that neither the compiler (reserved
names, the arch macros, `-D` flags) nor any header the preprocessor read
defines could take another branch with the real headers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from codemods.core.arch import Arch, is_arch_macro
from codemods.cpp.structure import Branch
from codemods.cpp.evaluate import evaluate
from codemods.prove.branches import FilePair
from codemods.prove.outputs import ROOT_TOKEN, relative
from codemods.prove.results import Doubt

_DEFINE_RE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.M)
_IDENT_RE = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
_HAS_INCLUDE_RE = re.compile(r"__has_include(?:_next)?\s*\(\s*(?:<[^>]*>|\"[^\"]*\")\s*\)")


class Preprocessed(Protocol):
    """What `Doubts` reads of a preprocessor run (codemods.prove.nvcc.Preprocessor, which makes one): declared
    here, so that nvcc imports doubts and not the other way round."""

    root: Path
    sources: Mapping[str, tuple[bytes, bytes]]  # path -> (base, work) bytes of each changed file
    flags: Sequence[str]
    read: set[str]  # tokenized paths of the headers the preprocessor read


def _reserved(name: str) -> bool:
    """A name reserved to the compiler and its library (`__CUDACC__`, `_MSC_VER`): no third-party header defines it."""
    return name.startswith("__") or (name[:1] == "_" and name[1:2].isupper())


def _expression(branch: Branch) -> str:
    if branch.directive in ("#ifdef", "#elifdef"):
        return f"defined({branch.condition})"
    if branch.directive in ("#ifndef", "#elifndef"):
        return f"!defined({branch.condition})"
    return branch.condition


class Doubts:
    """The guards deciding a file's changed lines on an arch that read macros a stood-in header may define.

    A macro is explained when it is reserved, an arch macro, given with -D,
    or #defined in a file the preprocessor read other than a stand-in; a
    guard whose value on the arch the arch macros settle is no doubt either.
    When only guard conditions changed and none flips on the arch, no macro
    can make the two sides differ there.
    """

    def __init__(self, preprocessor: Preprocessed, structures: dict[str, FilePair]) -> None:
        self.preprocessor = preprocessor
        self.structures = structures
        self.given = {flag[2:].split("=")[0] for flag in preprocessor.flags if flag.startswith("-D")}
        self._defined: set[str] | None = None

    def of(self, path: str, arch: Arch) -> list[Doubt]:
        pair = self.structures[path]
        gained, lost, problem = pair.flips(arch)
        if not (problem or gained or lost):
            return []
        found: dict[tuple[int, str], Doubt] = {}
        base_lines, work_lines = pair.changed_lines()
        for side, lines in ((pair.work, work_lines), (pair.base, base_lines)):
            for index in side.deciding(lines) if side.branches is not None else []:
                branch = side.read_branches[index]
                names = self._unexplained(branch.condition) if branch.directive != "#else" else ()
                if not names or evaluate(_expression(branch), arch.macros()) is not None:
                    continue
                guard = f"{branch.directive} {branch.condition}"
                if not any(doubt.guard == guard for doubt in found.values()):
                    found[(branch.line, guard)] = Doubt(path, branch.line, guard, names)
        return [found[key] for key in sorted(found)]

    def _unexplained(self, condition: str) -> tuple[str, ...]:
        names = {
            name
            for name in _IDENT_RE.findall(_HAS_INCLUDE_RE.sub("1", condition))
            if name != "defined" and not _reserved(name) and not is_arch_macro(name) and name not in self.given
        }
        return tuple(sorted(names - self.defined())) if names else ()

    def defined(self) -> set[str]:
        """Every macro #defined in the files the preprocessor read, stand-ins aside, and in the changed files."""
        if self._defined is None:
            pre, names = self.preprocessor, set[str]()
            contents = [data for pair in pre.sources.values() for data in pair]
            for path in sorted(pre.read):
                if path.startswith(ROOT_TOKEN + "/"):
                    file = pre.root / relative(path)
                elif os.path.isabs(path):
                    file = Path(path)
                else:
                    continue  # <tmp>: the stand-ins and units; <built-in>, <command-line>
                try:
                    contents.append(file.read_bytes())
                except OSError:
                    continue
            for data in contents:
                names.update(match.decode("ascii") for match in _DEFINE_RE.findall(data))
            self._defined = names
        return self._defined
