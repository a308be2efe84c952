"""What the two readings of a JIT spec file share: the records, the gen_jit_spec calls, the index they fill.

`codemods.jit.specs.find` reads a file with `spec_ast.AstIndex` (Python's
`ast`, fast) and falls back to `spec_cst.LibcstIndex` (libcst) for what the
ast reading cannot vouch for; both answer the questions of `Index`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from codemods.core.arch import Arch

SOURCE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".inl", ".jinja")
FLAGS_RE = re.compile(r"^sm_?(?P<code>\d{2,3})(?P<variant>[af]?)_nvcc_flags$")
ROOTS = {"FLASHINFER_CSRC_DIR": "csrc", "FLASHINFER_INCLUDE_DIR": "include"}


@dataclass(frozen=True)
class JitGate:
    """The archs a spec is built for: listed majors, exact targets from flag names, or both."""

    function: str
    line: int
    text: str
    majors: tuple[int, ...] = ()
    targets: tuple[Arch, ...] = ()  # exact nvcc targets (sm90a_nvcc_flags -> sm_90a)

    def admits(self, arch: Arch) -> bool:
        return arch.major in self.majors or any(t.plain == arch.plain for t in self.targets)


@dataclass(frozen=True)
class JitSpec:
    module: str
    function: str  # the function that calls gen_jit_spec
    line: int  # line of the gen_jit_spec call
    sources: tuple[tuple[str, str], ...]  # (root, path): root is "csrc" or "include"
    include_dirs: tuple[tuple[str, str], ...]
    gate: JitGate | None  # None: built for every arch the JIT is asked for


@dataclass(frozen=True)
class SpecCall:
    """One `gen_jit_spec(...)` call and the argument nodes a spec is read from."""

    node: object
    function: str  # the function that makes the call
    line: int
    name: object | None  # first positional argument, or `name=`
    sources: object | None  # second positional argument, or `sources=`
    include: object | None  # `extra_include_paths=`


class Index:
    """One parsed file, indexed once by enclosing function: what `find` asks of it, from ast or libcst."""

    _callees: dict[str, set[str]]  # function ("" at module level) -> names it calls

    def calls(self) -> Iterator[SpecCall]:
        """The gen_jit_spec calls, in source order."""
        raise NotImplementedError

    def string(self, node: object | None) -> str | None:
        """The value of a single str literal (not `"a" "b"`, an f-string or bytes); None otherwise."""
        raise NotImplementedError

    def is_list(self, node: object | None) -> bool:
        raise NotImplementedError

    def paths(
        self, *, within: object | None = None, function: str = "", dirs: bool = False, loose: bool = False
    ) -> list[tuple[str, str]]:
        """The FlashInfer paths under `within` (or in `function`); with `loose`, also bare source file names."""
        raise NotImplementedError

    def lists(self, function: str) -> Iterable[tuple[list[int] | None, str, int]]:
        """The supported_major_versions lists in `function`: (majors, or None when not all int literals; text; line)."""
        raise NotImplementedError

    def flags(self, function: str, call: object | None) -> Iterable[tuple[str, re.Match[str], int]]:
        """The `smXXa_nvcc_flags` names in `function`, those `call` uses if given: (name, match, line)."""
        raise NotImplementedError

    def callers(self, function: str) -> list[str]:
        return [
            caller for caller, callees in self._callees.items() if caller and caller != function and function in callees
        ]

    def gate(self, function: str, call: object | None = None) -> JitGate | None:
        """The gate of `function`: its supported_major_versions lists and flag names (those `call` uses, if given)."""
        if not function:
            return None
        majors: set[int] = set()
        texts, lines = [], []
        for listed, text, line in self.lists(function):
            if listed is None:
                return None  # a computed list: the gate cannot be read
            majors.update(listed)
            texts.append(text)
            lines.append(line)
        targets = []
        for name, match, line in self.flags(function, call):
            code = int(match["code"])
            targets.append(Arch(code // 10, code % 10, match["variant"]))
            texts.append(name)
            lines.append(line)
        if not texts:
            return None
        return JitGate(
            function=function,
            line=min(lines),
            text=", ".join(dict.fromkeys(texts)),
            majors=tuple(sorted(majors)),
            targets=tuple(dict.fromkeys(targets)),
        )


def names_source(value: str) -> bool:
    """A bare string naming a csrc-relative source or template file."""
    return bool(value) and value.endswith(SOURCE_SUFFIXES) and "{" not in value and not value.startswith("/")


def may_name_source(value: str) -> bool:
    """False when no piece of `value` can end in a source suffix (each suffix holds one of these)."""
    return ".c" in value or ".h" in value or ".inl" in value or ".jinja" in value


class Unsupported(Exception):
    """Input the ast reading cannot vouch to read as libcst does: the libcst reading decides."""
