"""The Python values the JIT flag reader evaluates to, and the signals it raises.

Project modules, functions, classes and instances are read from their
syntax trees (codemods.jit.interpreter); `TextPath` and `Version` stand in
for pathlib and packaging without touching the file system; a name from
outside the project is an `External` that only the interpreter's table of
answers may give a value.
"""

from __future__ import annotations

import ast
import operator
import posixpath
import re
from dataclasses import dataclass, field


class Unreadable(Exception):
    """The JIT code does something this reader does not evaluate; message says what and where."""


class NotBuilt(Exception):
    """FlashInfer's JIT itself refuses to build the module for the arch (its own error message)."""


class TextPath:
    """pathlib.Path over posix strings, without touching the file system (resolve() only normalises)."""

    def __init__(self, *parts) -> None:
        text = posixpath.join(*(str(p) for p in parts)) if parts else "."
        self.text = posixpath.normpath(text) if text else "."

    def __truediv__(self, other) -> TextPath:
        return TextPath(self.text, str(other))

    def __rtruediv__(self, other) -> TextPath:
        return TextPath(str(other), self.text)

    def __str__(self) -> str:
        return self.text

    def __fspath__(self) -> str:
        return self.text

    def __eq__(self, other) -> bool:
        return isinstance(other, TextPath) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __lt__(self, other) -> bool:
        return self.text < str(other)

    def resolve(self, *args, **kwargs) -> TextPath:
        return self

    def absolute(self) -> TextPath:
        return self

    def as_posix(self) -> str:
        return self.text

    def with_suffix(self, suffix: str) -> TextPath:
        stem, _ = posixpath.splitext(self.text)
        return TextPath(stem + suffix)

    @property
    def parent(self) -> TextPath:
        return TextPath(posixpath.dirname(self.text) or ".")

    @property
    def parents(self) -> list[TextPath]:
        out, path = [], self
        while path.parent.text != path.text:
            path = path.parent
            out.append(path)
        return out

    @property
    def name(self) -> str:
        return posixpath.basename(self.text)

    @property
    def stem(self) -> str:
        return posixpath.splitext(self.name)[0]

    @property
    def suffix(self) -> str:
        return posixpath.splitext(self.name)[1]


class Version:
    """packaging.version.Version, for the release numbers FlashInfer compares."""

    def __init__(self, text) -> None:
        self.parts = tuple(int(p) for p in re.findall(r"\d+", str(text))[:3])

    def _cmp(self, other, op):
        other = other if isinstance(other, Version) else Version(other)
        width = max(len(self.parts), len(other.parts))
        pad = lambda parts: parts + (0,) * (width - len(parts))  # noqa: E731
        return op(pad(self.parts), pad(other.parts))

    def __lt__(self, other) -> bool:
        return self._cmp(other, operator.lt)

    def __le__(self, other) -> bool:
        return self._cmp(other, operator.le)

    def __gt__(self, other) -> bool:
        return self._cmp(other, operator.gt)

    def __ge__(self, other) -> bool:
        return self._cmp(other, operator.ge)

    def __eq__(self, other) -> bool:
        return self._cmp(other, operator.eq)

    def __hash__(self) -> int:
        return hash(self.parts)

    @property
    def major(self) -> int:
        return self.parts[0]

    @property
    def minor(self) -> int:
        return self.parts[1] if len(self.parts) > 1 else 0


@dataclass
class External:
    """A name from outside the project (os, torch, tvm_ffi ...): only what `_EXTERNALS` answers may be used."""

    name: str


@dataclass
class Module:
    path: str  # absolute path of the .py file
    tree: ast.Module
    globals: dict = field(default_factory=dict)


@dataclass
class Function:
    node: ast.FunctionDef
    module: Module
    self_value: object = None


@dataclass
class Class:
    node: ast.ClassDef
    module: Module
    attrs: dict = field(default_factory=dict)
    dataclass: bool = False


@dataclass
class Instance:
    cls: Class
    attrs: dict = field(default_factory=dict)


@dataclass
class ExceptionValue:
    kind: str
    message: str


class Raised(Exception):
    """An exception the evaluated code raised (its value), on its way to a handler."""

    def __init__(self, value: ExceptionValue) -> None:
        self.value = value


class Return(Exception):
    """A `return` leaving the evaluated function with its value."""

    def __init__(self, value) -> None:
        self.value = value


class Break(Exception):
    pass


class Continue(Exception):
    pass

EXCEPTIONS = {"Exception", "RuntimeError", "ValueError", "KeyError", "ImportError", "ModuleNotFoundError",
              "FileNotFoundError", "OSError", "TypeError", "NotImplementedError", "AssertionError", "BaseException"}

MISSING = object()  # an attribute or name that is not there
