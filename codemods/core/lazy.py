"""Modules imported on first use.

libcst takes most of a second to import and GitPython a tenth; a `codemod
scan` of C sources, or one answered from the cache, needs neither, and the
command's start-up time is part of every scan.
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
