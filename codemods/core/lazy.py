"""Modules imported on first use.

libcst takes most of a second to import and GitPython a tenth; a `codemod
scan` of C sources, or one answered from the cache, needs neither, and the
command's start-up time is part of every scan.

Not `importlib.util.LazyLoader`, for three reasons measured or read here:
its recipe starts with `importlib.util.find_spec`, which for `libcst.helpers`
or `libcst.metadata` imports `libcst` itself, the cost this module avoids;
the lazy module it puts in `sys.modules` is not thread-safe before Python
3.12.3 (CPython gh-114763), and `verify` reads on a thread pool while we
support 3.11; and a module whose code fails stays half-made in
`sys.modules`. `LazyModule` only defers `importlib.import_module`, which
takes the import lock and registers nothing until the module is complete.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class LazyModule:
    """Stands for the module `name` and imports it when an attribute is first asked for."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str):
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self) -> str:
        return f"<module {self._name} (lazy)>"
