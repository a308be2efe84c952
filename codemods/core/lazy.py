"""Modules imported on first use.

libcst takes most of a second to import and GitPython a tenth; a `codemod
scan` of C sources, or one answered from the cache, needs neither, and the
command's start-up time is part of every scan.
"""

from __future__ import annotations

import importlib


class LazyModule:
    """Stands for the module `name` and imports it when an attribute is first asked for."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<module {self._name} (lazy)>"
