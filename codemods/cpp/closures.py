"""Include closures: the files one JIT spec compiles, found by following `#include`s inside a tree.

`Closures` resolves a spec's sources and follows their includes with the
lexer's `includes` (or a faster reader of the same answer), caching per file.
It does no I/O of its own: the caller gives `exists` and `read`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field

from codemods.cpp.lexer import includes


@dataclass
class Closure:
    """The files one JIT spec compiles, and what could not be followed."""

    files: list[str]  # its sources and every file they include inside the tree, sources first
    missing: list[str]  # named sources that are not in the tree
    unresolved: list[tuple[str, str]]  # (including file, include) of FOLLOWED_INCLUDES found nowhere
    library: set[str] = field(default_factory=set)  # files found only through a library dir (CUTLASS)


# First components of includes a closure must follow: FlashInfer's own headers and CUTLASS/CuTe,
# where the arch-specific atoms and instructions live. Others (<cuda_runtime.h>, <vector>, <torch/...>)
# are the toolkit's or the system's.
FOLLOWED_INCLUDES = ("flashinfer", "cutlass", "cute")


class Closures:
    """Resolve JIT spec sources and follow their `#include`s inside a tree, caching per file.

    `exists(rel)` says whether a tree-relative path is a file of the tree,
    `read(rel)` gives its bytes (OSError when it cannot). Quoted includes are
    looked up in the including file's folder first, then, like angled ones,
    in the include root, the csrc folder, the spec's include dirs and the
    library dirs (CUTLASS's include folders). No I/O of its own.
    """

    def __init__(
        self,
        csrc: str,
        include: str,
        exists: Callable[[str], bool],
        read: Callable[[str], bytes],
        libraries: tuple[str, ...] = (),
        parse: Callable[[bytes], list[tuple[str, bool]]] = includes,
    ) -> None:
        self.csrc, self.include, self.libraries = csrc, include, tuple(libraries)
        self.exists = exists
        self._read, self._parse = read, parse
        self._includes: dict[str, list[tuple[str, bool]]] = {}
        self._resolved: dict[tuple, str | None] = {}  # (including folder for "", path, dirs) -> file

    def place(self, root_name: str, path: str) -> str:
        base = self.csrc if root_name == "csrc" else self.include
        return posixpath.normpath(posixpath.join(base, path))

    def closure(self, spec, *, libraries: bool = True) -> Closure:
        """The files `spec` (a jit_specs.JitSpec) compiles and includes, and what could not be followed.

        Without `libraries`, includes are not looked up in the library dirs.
        """
        dirs = [self.include, self.csrc] + [self.place(*d) for d in spec.include_dirs]
        all_dirs = dirs + list(self.libraries if libraries else ())
        queue: list[str] = []
        missing: list[str] = []
        for source in spec.sources:
            rel = self.place(*source)
            (queue if self.exists(rel) else missing).append(rel)
        seen = dict.fromkeys(queue)
        unresolved: dict[tuple[str, str], None] = {}
        library: set[str] = set()
        key_dirs = tuple(all_dirs)
        while queue:
            current = queue.pop()
            for path, quoted in self.includes_of(current):
                here = posixpath.dirname(current) if quoted else None
                key = (here, path, key_dirs)
                if key not in self._resolved:
                    self._resolved[key] = None
                    for folder in ([here] if here is not None else []) + all_dirs:
                        rel = posixpath.normpath(posixpath.join(folder, path))
                        if self.exists(rel):
                            self._resolved[key] = rel
                            break
                found = self._resolved[key]
                if found is None:
                    if path.split("/", 1)[0] in FOLLOWED_INCLUDES:
                        unresolved.setdefault((current, path))
                    continue
                if found not in seen:
                    seen[found] = None
                    queue.append(found)
                    if any(_under(found, folder) for folder in self.libraries):
                        library.add(found)
        return Closure(list(seen), missing, list(unresolved), library)

    def includes_of(self, rel: str) -> list[tuple[str, bool]]:
        if rel not in self._includes:
            try:
                self._includes[rel] = self._parse(self._read(rel))
            except OSError:
                self._includes[rel] = []
        return self._includes[rel]


def _under(rel: str, folder: str) -> bool:
    return rel == folder or rel.startswith(folder.rstrip("/") + "/")
