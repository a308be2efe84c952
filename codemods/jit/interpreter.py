"""The interpreter that reads FlashInfer's JIT code: its modules, names, imports, calls, classes and attributes.

What FlashInfer asks of the machine (the GPU's arch, CUDA's folder and
version, TVM-FFI's headers, the environment) is answered from `Machine`
through a table of external names; a project function that asks the
machine is answered, not evaluated. Statements and expressions run in
codemods.jit.evaluator.
"""

from __future__ import annotations

import ast
import posixpath
import shlex
from typing import TYPE_CHECKING, cast

from codemods.jit.evaluator import Evaluator
from codemods.jit.values import (
    EXCEPTIONS, MISSING, Class, ExceptionValue, External, Function, Instance, Module, NotBuilt, Raised, Return, TextPath,
    Unreadable, Version,
)

if TYPE_CHECKING:
    from codemods.jit.machine import Machine

_NATIVE_METHODS = {
    str: {"startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip", "replace", "join", "isdigit",
          "lower", "upper", "format", "removeprefix", "removesuffix", "splitlines", "count", "find", "partition"},
    list: {"append", "extend", "insert", "remove", "index", "copy", "pop", "count"},
    set: {"add", "update", "remove", "discard", "copy", "union", "intersection"},
    dict: {"get", "items", "keys", "values", "setdefault", "copy", "update", "pop"},
    tuple: {"index", "count"},
}

_BUILTINS = {
    "len": len, "any": any, "all": all, "int": int, "str": str, "bool": bool, "list": list, "tuple": tuple,
    "set": set, "dict": dict, "sorted": sorted, "range": range, "enumerate": enumerate, "zip": zip, "min": min,
    "max": max, "sum": sum, "reversed": reversed, "isinstance": None, "None": None, "True": True, "False": False,
}


class Interpreter(Evaluator):
    """Evaluates a project function of FlashInfer's JIT, reading its modules through `read`."""

    def __init__(self, read, package: str, arch: tuple[int, int], machine: Machine) -> None:
        self.read = read
        self.package = package.rstrip("/")
        self.package_name = posixpath.basename(self.package)
        self.arch = arch
        self.machine = machine
        self.modules: dict[str, Module] = {}
        self.steps = 0
        self.where = ""
        major, minor = arch
        self.externals: dict[str, object] = {
            "os.environ.get": lambda key, default=None: default,
            "os.getenv": lambda key, default=None: default,
            "os.environ": {},
            "os.pathsep": ":",
            "os.sep": "/",
            "os.path.join": posixpath.join,
            "os.path.dirname": posixpath.dirname,
            "os.path.basename": posixpath.basename,
            "pathlib.Path": TextPath,
            "pathlib.Path.home": lambda: TextPath("/home/user"),
            "sysconfig.get_path": lambda name: machine.python_include,
            "sysconfig.get_config_var": lambda name: None,
            "torch._C._GLIBCXX_USE_CXX11_ABI": True,
            "torch.cuda.device_count": lambda: 1,
            "torch.cuda.get_device_capability": lambda device=0: (major, minor),
            "torch.cuda.is_available": lambda: True,
            "torch.version.cuda": machine.cuda_version,
            "tvm_ffi.libinfo.find_include_path": lambda: machine.tvm_ffi_include,
            "tvm_ffi.libinfo.find_dlpack_include_path": lambda: machine.tvm_ffi_include,
            "packaging.version.Version": Version,
            "datetime.datetime.now": lambda: None,
            "shlex.split": shlex.split,
            "logging.getLogger": lambda name=None: External("logger"),
            "dataclasses.field": lambda default=None, default_factory=None: default_factory() if default_factory else default,
        }
        # project functions that ask the machine: answered, not evaluated
        self.answers = {
            "get_cuda_path": lambda: machine.cuda_home,
            "get_cuda_version": lambda: Version(machine.cuda_version),
        }

    # ---------------------------------------------------------- modules

    def module(self, path: str) -> Module:
        if path not in self.modules:
            text = self.read(path)
            if text is None:
                raise Raised(ExceptionValue("ModuleNotFoundError", f"no module at {path}"))
            try:
                tree = ast.parse(text, filename=path)
            except SyntaxError as exc:
                raise Unreadable(f"{self.rel(path)}:{exc.lineno}: not Python this interpreter can parse: {exc.msg}") from None
            self.modules[path] = Module(path, tree, {"__file__": TextPath(path), "__name__": path})
        return self.modules[path]

    def rel(self, path: str) -> str:
        parent = posixpath.dirname(self.package)
        return posixpath.relpath(path, parent) if path.startswith(parent + "/") else path

    def _module_file(self, dotted: str, level: int, current: str) -> str | None:
        """The file of a project module for an import, or None when it is not the project's."""
        if level == 0:
            top = dotted.split(".")[0]
            if top != self.package_name:
                return None
            base = posixpath.dirname(self.package)
        else:
            base = posixpath.dirname(current)
            for _ in range(level - 1):
                base = posixpath.dirname(base)
        path = posixpath.join(base, *dotted.split(".")) if dotted else base
        if self.read(path + ".py") is not None:
            return path + ".py"
        if self.read(posixpath.join(path, "__init__.py")) is not None:
            return posixpath.join(path, "__init__.py")
        return path + ".py"  # raises ModuleNotFoundError when used

    def global_name(self, module: Module, name: str):
        if name in module.globals:
            return module.globals[name]
        for stmt in _top_level(module.tree.body):
            if self._binds(stmt, name):
                self._exec_top(module, stmt, name)
                if name in module.globals:
                    return module.globals[name]
        if name in _BUILTINS:
            return _BUILTINS[name]
        if name in ("getattr", "hasattr"):
            return self._getattr if name == "getattr" else (lambda obj, attr: self._getattr(obj, attr, MISSING) is not MISSING)
        if name in EXCEPTIONS:
            return External(name)
        raise Unreadable(f"{self.rel(module.path)}: name {name} is not defined")

    def _binds(self, stmt: ast.stmt, name: str) -> bool:
        if isinstance(stmt, ast.Try):
            inner = [*stmt.body, *stmt.orelse, *(s for h in stmt.handlers for s in h.body)]
            return any(self._binds(s, name) for s in inner)
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            return stmt.name == name
        if isinstance(stmt, ast.Assign):
            return any(name in _target_names(t) for t in stmt.targets)
        if isinstance(stmt, ast.AnnAssign):
            return isinstance(stmt.target, ast.Name) and stmt.target.id == name and stmt.value is not None
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            return any((a.asname or a.name.split(".")[0]) == name for a in stmt.names)
        return False

    def _exec_top(self, module: Module, stmt: ast.stmt, name: str) -> None:
        scope = module.globals
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if (alias.asname or alias.name.split(".")[0]) == name:
                    self.import_alias(module, stmt, alias, scope)
            return
        self.exec_block([stmt], scope, module)

    def import_alias(self, module: Module, stmt, alias: ast.alias, scope: dict) -> None:
        bound = alias.asname or alias.name.split(".")[0]
        if isinstance(stmt, ast.Import):
            path = self._module_file(alias.name if alias.asname else alias.name.split(".")[0], 0, module.path)
            scope[bound] = self.module(path) if path else External(alias.name if alias.asname else bound)
            return
        path = self._module_file(stmt.module or "", stmt.level, module.path)
        if path is None:
            scope[bound] = External(f"{stmt.module}.{alias.name}")
            return
        sub = self._module_file(f"{stmt.module or ''}.{alias.name}".lstrip("."), stmt.level, module.path)
        if sub is not None and self.read(sub) is not None:
            scope[bound] = self.module(sub)  # `from . import env`: a submodule
            return
        scope[bound] = self.global_name(self.module(path), alias.name)

    # ---------------------------------------------------------- calls

    def call_function(self, path: str, name: str, args=(), kwargs=None):
        module = self.module(path)
        function = self.global_name(module, name)
        try:
            return self.call(function, list(args), dict(kwargs or {}))
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError) as exc:
            raise Unreadable(f"{self.where}: {type(exc).__name__}: {exc}") from None
        except Raised as exc:
            if exc.value.kind == "RuntimeError":
                raise NotBuilt(exc.value.message) from None
            raise Unreadable(f"{self.where}: {exc.value.kind}: {exc.value.message}") from None

    def call(self, function, args: list, kwargs: dict):
        if isinstance(function, Function):
            answer = self.answers.get(function.node.name)
            if answer is not None and function.self_value is None:
                return answer()
            return self._call_function(function, args, kwargs)
        if isinstance(function, Class):
            return self._instantiate(function, args, kwargs)
        if isinstance(function, External):
            if function.name in EXCEPTIONS:
                return ExceptionValue(function.name, str(args[0]) if args else "")
            if function.name.rsplit(".", 1)[-1] in ("warning", "info", "debug", "warning_once", "info_once", "debug_once"):
                return None  # logging
            known = self.externals.get(_canonical(function.name))
            if callable(known):
                return known(*args, **kwargs)
            raise Unreadable(f"{self.where}: calls {function.name}(), which this reader does not evaluate")
        if function is None:
            raise Unreadable(f"{self.where}: calls a function this reader does not evaluate")
        if callable(function):
            return function(*args, **kwargs)
        raise Unreadable(f"{self.where}: calls something that is not a function")

    def _call_function(self, function: Function, args: list, kwargs: dict):
        node = function.node
        scope: dict = {}
        params = node.args
        positional = [*params.posonlyargs, *params.args]
        if function.self_value is not None:
            args = [function.self_value, *args]
        defaults = dict(zip([p.arg for p in positional[len(positional) - len(params.defaults):]], params.defaults))
        for i, param in enumerate(positional):
            if i < len(args):
                scope[param.arg] = args[i]
            elif param.arg in kwargs:
                scope[param.arg] = kwargs.pop(param.arg)
            elif param.arg in defaults:
                scope[param.arg] = self.eval(defaults[param.arg], {}, function.module)
            else:
                raise Unreadable(f"{self.rel(function.module.path)}:{node.lineno}: {node.name}() needs an argument {param.arg}")
        if params.vararg:
            scope[params.vararg.arg] = tuple(args[len(positional):])
        for param, default in zip(params.kwonlyargs, params.kw_defaults):
            if param.arg in kwargs:
                scope[param.arg] = kwargs.pop(param.arg)
            elif default is not None:
                scope[param.arg] = self.eval(default, {}, function.module)
            else:
                raise Unreadable(f"{self.rel(function.module.path)}:{node.lineno}: {node.name}() needs {param.arg}=")
        if params.kwarg:
            scope[params.kwarg.arg] = dict(kwargs)
        elif kwargs:
            raise Unreadable(f"{self.rel(function.module.path)}:{node.lineno}: {node.name}() takes no {', '.join(kwargs)}")
        try:
            self.exec_block(node.body, scope, function.module)
        except Return as ret:
            return ret.value
        return None

    def _class_attrs(self, cls: Class) -> None:
        if cls.attrs:
            return
        for stmt in cls.node.body:
            if isinstance(stmt, ast.FunctionDef):
                cls.attrs[stmt.name] = stmt
            elif isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
                value = self.eval(stmt.value, {}, cls.module)
                for t in stmt.targets:
                    cls.attrs[cast(ast.Name, t).id] = value  # all() above checked each is a Name; mypy cannot follow
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                cls.attrs.setdefault("__fields__", []).append((stmt.target.id, stmt.value))

    def _instantiate(self, cls: Class, args: list, kwargs: dict) -> Instance:
        self._class_attrs(cls)
        instance = Instance(cls)
        if cls.dataclass:
            fields = cls.attrs.get("__fields__", [])
            for i, (name, default) in enumerate(fields):
                if i < len(args):
                    instance.attrs[name] = args[i]
                elif name in kwargs:
                    instance.attrs[name] = kwargs.pop(name)
                elif default is not None:
                    instance.attrs[name] = self.eval(default, {}, cls.module)
                else:
                    raise Unreadable(f"{self.where}: {cls.node.name}() needs {name}")
            return instance
        init = cls.attrs.get("__init__")
        if isinstance(init, ast.FunctionDef):
            self._call_function(Function(init, cls.module, instance), args, kwargs)
        return instance

    def attribute(self, value, name: str):
        if isinstance(value, Module):
            return self.global_name(value, name)
        if isinstance(value, External):
            full = f"{value.name}.{name}"
            known = self.externals.get(_canonical(full), MISSING)
            if known is not MISSING and not callable(known):
                return known
            return External(full)
        if isinstance(value, Instance):
            if name in value.attrs:
                return value.attrs[name]
            self._class_attrs(value.cls)
            member = value.cls.attrs.get(name, MISSING)
            if isinstance(member, ast.FunctionDef):
                decorators = {d.id for d in member.decorator_list if isinstance(d, ast.Name)}
                if "staticmethod" in decorators:
                    return Function(member, value.cls.module)
                function = Function(member, value.cls.module, value)
                if "property" in decorators:
                    return self._call_function(function, [], {})
                return function
            if member is not MISSING:
                return member
            raise Unreadable(f"{self.where}: {value.cls.node.name} has no attribute {name}")
        if isinstance(value, Class):
            self._class_attrs(value)
            member = value.attrs.get(name, MISSING)
            if member is MISSING or isinstance(member, ast.FunctionDef):
                raise Unreadable(f"{self.where}: {value.node.name}.{name} is not evaluated here")
            return member
        if isinstance(value, TextPath) and name in ("read_text", "exists", "is_file"):
            return self._file_method(value, name)
        if isinstance(value, (TextPath, Version)):
            return getattr(value, name)
        if isinstance(value, ExceptionValue):
            return value.message
        for kind, names in _NATIVE_METHODS.items():
            if isinstance(value, kind) and name in names:
                return getattr(value, name)
        raise Unreadable(f"{self.where}: .{name} of a {type(value).__name__} is not evaluated here")

    def _getattr(self, value, name: str, *default):
        try:
            return self.attribute(value, name)
        except (Unreadable, Raised):
            if not default:
                raise
            return default[0]

    def _file_method(self, path: TextPath, name: str):
        """Reading a file of the project (CUTLASS's arch.h ...) goes through `read`."""

        def read_text(*args, **kwargs) -> str:
            text = self.read(path.text)
            if text is None:
                raise Raised(ExceptionValue("FileNotFoundError", path.text))
            return text

        return read_text if name == "read_text" else (lambda: self.read(path.text) is not None)


def _canonical(name: str) -> str:
    """`Path` imported from pathlib, `datetime.now` ... as the table names them."""
    aliases = {"datetime.now": "datetime.datetime.now", "Path": "pathlib.Path", "Version": "packaging.version.Version",
               "pathlib.Path.home": "pathlib.Path.home", "Path.home": "pathlib.Path.home"}
    return aliases.get(name, name)


def _top_level(body: list[ast.stmt]):
    """Module-level statements, including those inside top-level if/try blocks."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from _top_level(stmt.body)
            yield from _top_level(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield stmt  # executed whole, so its handlers run when the body fails
        else:
            yield stmt


def _target_names(target: ast.expr) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_target_names(t) for t in target.elts))
    return set()
