"""The nvcc command FlashInfer's own JIT would run for a module, read from its Python source.

`module_build(...)` answers: for the JIT module made by `gen_X_module()` in
`flashinfer/jit/X.py`, on a GPU of one arch, which sources would FlashInfer
compile and with which nvcc flags? It does not import FlashInfer (which needs
torch, a GPU and its own compiled library). It reads the source text with the
stdlib `ast` and evaluates, step by step, the code FlashInfer runs: the
module's `gen_X_module()`, `gen_jit_spec(...)` (the `-std`, `-O3`,
`-DFLASHINFER_ENABLE_*` flags), `CompilationContext.get_nvcc_flags_list` (the
`-gencode` of the GPU's arch, or the error FlashInfer raises when the module
is not built for it) and `cpp_ext.generate_ninja_build_for_op` (the include
folders, `--expt-relaxed-constexpr` ...). The `cuda_cflags` of the ninja file
that function writes are the flags. What FlashInfer asks of the machine is
answered from `Machine`: the GPU is one device of the given arch, nvcc is the
one codemod runs, TVM-FFI's headers are those of the installed
`apache-tvm-ffi`, and every `FLASHINFER_*` environment variable is unset (the
defaults).

Only a small, side-effect-free part of Python is evaluated: literals,
f-strings, names, attributes, calls of the project's own functions and
classes, list/set/dict methods, comprehensions, if/for/try/return/raise.
Anything else (an unknown library call, a `while` loop) stops the reading
with `Unreadable`, naming the file and line, rather than guessing a flag.
Pure apart from `read`, the callback that gives the text of a project file.
"""

from __future__ import annotations

import ast
import operator
import posixpath
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field


class Unreadable(Exception):
    """The JIT code does something this reader does not evaluate; message says what and where."""


class NotBuilt(Exception):
    """FlashInfer's JIT itself refuses to build the module for the arch (its own error message)."""


@dataclass(frozen=True)
class Machine:
    """What FlashInfer's JIT asks of the machine it runs on."""

    cuda_home: str  # the folder above nvcc's bin/
    cuda_version: str  # "13.0"
    tvm_ffi_include: str  # apache-tvm-ffi's include folder (holds tvm/ffi and dlpack)
    python_include: str = "/usr/include/python3"


@dataclass(frozen=True)
class ModuleBuild:
    """One JIT module on one arch: its sources and the nvcc flags FlashInfer compiles them with."""

    module: str
    sources: tuple[str, ...]  # absolute paths
    flags: tuple[str, ...]  # nvcc flags without -c/-o and dependency output

    def gencode(self) -> list[str]:
        return [f for f in self.flags if f.startswith("-gencode")]


def module_build(
    read: Callable[[str], str | None],
    package: str,
    spec_file: str,
    function: str,
    arch: tuple[int, int],
    machine: Machine,
) -> ModuleBuild:
    """Evaluate `function()` of `spec_file` and the ninja generation FlashInfer runs for the spec it returns.

    `package` is the absolute path of the `flashinfer` package folder,
    `spec_file` the absolute path of the .py file defining `function`;
    `read(path)` returns the text of an absolute path, or None when there is
    no such file. Raises NotBuilt when FlashInfer's own code refuses the arch,
    Unreadable when the code cannot be evaluated here.
    """
    interp = _Interpreter(read, package, arch, machine)
    spec = interp.call_function(spec_file, function)
    if not isinstance(spec, _Instance):
        raise Unreadable(f"{spec_file}: {function}() did not return a JitSpec")
    fields = spec.attrs
    ninja_file = posixpath.join(package, "jit", "cpp_ext.py")
    text = interp.call_function(
        ninja_file,
        "generate_ninja_build_for_op",
        kwargs={
            "name": fields.get("name"),
            "sources": fields.get("sources"),
            "extra_cflags": fields.get("extra_cflags"),
            "extra_cuda_cflags": fields.get("extra_cuda_cflags"),
            "extra_ldflags": fields.get("extra_ldflags"),
            "extra_include_dirs": fields.get("extra_include_dirs"),
            "needs_device_linking": fields.get("needs_device_linking", False),
        },
    )
    if not isinstance(text, str):
        raise Unreadable(f"{ninja_file}: generate_ninja_build_for_op did not return the ninja text")
    variables = ninja_variables(text)
    if "cuda_cflags" not in variables:
        raise Unreadable(f"{ninja_file}: the ninja file it writes has no cuda_cflags")
    flags = shlex.split(ninja_expand(variables["cuda_cflags"], variables))
    sources = tuple(str(s) for s in fields.get("sources") or ())
    return ModuleBuild(str(fields.get("name")), sources, tuple(flags))


# ------------------------------------------------------------------ ninja


def ninja_variables(text: str) -> dict[str, str]:
    """The top-level `name = value` bindings of a ninja file (continuations `$` + newline joined)."""
    text = re.sub(r"\$\n[ \t]*", "", text)
    found = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z_][\w.-]*)[ \t]*=[ \t]*(.*)$", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def ninja_expand(value: str, variables: dict[str, str], depth: int = 0) -> str:
    """Expand `$name`, `${name}`, `$$` and `$ ` the way ninja does (unknown names expand to nothing)."""
    if depth > 20:
        raise Unreadable("ninja variables refer to each other in a loop")

    def one(match: re.Match) -> str:
        token = match.group(0)
        if token == "$$":
            return "$"
        if token in ("$ ", "$:"):
            return token[1]
        name = match.group(1) or match.group(2)
        return ninja_expand(variables.get(name, ""), variables, depth + 1)

    return re.sub(r"\$\$|\$ |\$:|\$\{([\w.-]+)\}|\$([A-Za-z_][\w-]*)", one, value)


# ------------------------------------------------------------------ values


class _Path:
    """pathlib.Path over posix strings, without touching the file system (resolve() only normalises)."""

    def __init__(self, *parts) -> None:
        text = posixpath.join(*(str(p) for p in parts)) if parts else "."
        self.text = posixpath.normpath(text) if text else "."

    def __truediv__(self, other) -> "_Path":
        return _Path(self.text, str(other))

    def __rtruediv__(self, other) -> "_Path":
        return _Path(str(other), self.text)

    def __str__(self) -> str:
        return self.text

    def __fspath__(self) -> str:
        return self.text

    def __eq__(self, other) -> bool:
        return isinstance(other, _Path) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __lt__(self, other) -> bool:
        return self.text < str(other)

    def resolve(self, *args, **kwargs) -> "_Path":
        return self

    def absolute(self) -> "_Path":
        return self

    def as_posix(self) -> str:
        return self.text

    def with_suffix(self, suffix: str) -> "_Path":
        stem, _ = posixpath.splitext(self.text)
        return _Path(stem + suffix)

    @property
    def parent(self) -> "_Path":
        return _Path(posixpath.dirname(self.text) or ".")

    @property
    def parents(self) -> list["_Path"]:
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


class _Version:
    """packaging.version.Version, for the release numbers FlashInfer compares."""

    def __init__(self, text) -> None:
        self.parts = tuple(int(p) for p in re.findall(r"\d+", str(text))[:3])

    def _cmp(self, other, op):
        other = other if isinstance(other, _Version) else _Version(other)
        width = max(len(self.parts), len(other.parts))
        pad = lambda parts: parts + (0,) * (width - len(parts))  # noqa: E731
        return op(pad(self.parts), pad(other.parts))

    __lt__ = lambda self, o: self._cmp(o, operator.lt)  # noqa: E731
    __le__ = lambda self, o: self._cmp(o, operator.le)  # noqa: E731
    __gt__ = lambda self, o: self._cmp(o, operator.gt)  # noqa: E731
    __ge__ = lambda self, o: self._cmp(o, operator.ge)  # noqa: E731
    __eq__ = lambda self, o: self._cmp(o, operator.eq)  # noqa: E731
    __hash__ = lambda self: hash(self.parts)  # noqa: E731

    @property
    def major(self) -> int:
        return self.parts[0]

    @property
    def minor(self) -> int:
        return self.parts[1] if len(self.parts) > 1 else 0


@dataclass
class _External:
    """A name from outside the project (os, torch, tvm_ffi ...): only what `_EXTERNALS` answers may be used."""

    name: str


@dataclass
class _Module:
    path: str  # absolute path of the .py file
    tree: ast.Module
    globals: dict = field(default_factory=dict)


@dataclass
class _Function:
    node: ast.FunctionDef
    module: _Module
    self_value: object = None


@dataclass
class _Class:
    node: ast.ClassDef
    module: _Module
    attrs: dict = field(default_factory=dict)
    dataclass: bool = False


@dataclass
class _Instance:
    cls: _Class
    attrs: dict = field(default_factory=dict)


@dataclass
class _Exception:
    kind: str
    message: str


class _Raised(Exception):
    def __init__(self, value: _Exception) -> None:
        self.value = value


class _Return(Exception):
    def __init__(self, value) -> None:
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


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
_EXCEPTIONS = {"Exception", "RuntimeError", "ValueError", "KeyError", "ImportError", "ModuleNotFoundError",
               "FileNotFoundError", "OSError", "TypeError", "NotImplementedError", "AssertionError", "BaseException"}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.BitOr: operator.or_, ast.BitAnd: operator.and_}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
            ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
            ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_MAX_STEPS = 200_000


class _Interpreter:
    def __init__(self, read, package: str, arch: tuple[int, int], machine: Machine) -> None:
        self.read = read
        self.package = package.rstrip("/")
        self.package_name = posixpath.basename(self.package)
        self.arch = arch
        self.machine = machine
        self.modules: dict[str, _Module] = {}
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
            "pathlib.Path": _Path,
            "pathlib.Path.home": lambda: _Path("/home/user"),
            "sysconfig.get_path": lambda name: machine.python_include,
            "sysconfig.get_config_var": lambda name: None,
            "torch._C._GLIBCXX_USE_CXX11_ABI": True,
            "torch.cuda.device_count": lambda: 1,
            "torch.cuda.get_device_capability": lambda device=0: (major, minor),
            "torch.cuda.is_available": lambda: True,
            "torch.version.cuda": machine.cuda_version,
            "tvm_ffi.libinfo.find_include_path": lambda: machine.tvm_ffi_include,
            "tvm_ffi.libinfo.find_dlpack_include_path": lambda: machine.tvm_ffi_include,
            "packaging.version.Version": _Version,
            "datetime.datetime.now": lambda: None,
            "shlex.split": shlex.split,
            "logging.getLogger": lambda name=None: _External("logger"),
            "dataclasses.field": lambda default=None, default_factory=None: default_factory() if default_factory else default,
        }
        # project functions that ask the machine: answered, not evaluated
        self.answers = {
            "get_cuda_path": lambda: machine.cuda_home,
            "get_cuda_version": lambda: _Version(machine.cuda_version),
        }

    # ---------------------------------------------------------- modules

    def module(self, path: str) -> _Module:
        if path not in self.modules:
            text = self.read(path)
            if text is None:
                raise _Raised(_Exception("ModuleNotFoundError", f"no module at {path}"))
            try:
                tree = ast.parse(text, filename=path)
            except SyntaxError as exc:
                raise Unreadable(f"{self._rel(path)}:{exc.lineno}: not Python this interpreter can parse: {exc.msg}") from None
            self.modules[path] = _Module(path, tree, {"__file__": _Path(path), "__name__": path})
        return self.modules[path]

    def _rel(self, path: str) -> str:
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

    def global_name(self, module: _Module, name: str):
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
            return self._getattr if name == "getattr" else (lambda obj, attr: self._getattr(obj, attr, _MISSING) is not _MISSING)
        if name in _EXCEPTIONS:
            return _External(name)
        raise Unreadable(f"{self._rel(module.path)}: name {name} is not defined")

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

    def _exec_top(self, module: _Module, stmt: ast.stmt, name: str) -> None:
        scope = module.globals
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if (alias.asname or alias.name.split(".")[0]) == name:
                    self._import(module, stmt, alias, scope)
            return
        self.exec_block([stmt], scope, module)

    def _import(self, module: _Module, stmt, alias: ast.alias, scope: dict) -> None:
        bound = alias.asname or alias.name.split(".")[0]
        if isinstance(stmt, ast.Import):
            path = self._module_file(alias.name if alias.asname else alias.name.split(".")[0], 0, module.path)
            scope[bound] = self.module(path) if path else _External(alias.name if alias.asname else bound)
            return
        path = self._module_file(stmt.module or "", stmt.level, module.path)
        if path is None:
            scope[bound] = _External(f"{stmt.module}.{alias.name}")
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
        except _Raised as exc:
            if exc.value.kind == "RuntimeError":
                raise NotBuilt(exc.value.message) from None
            raise Unreadable(f"{self.where}: {exc.value.kind}: {exc.value.message}") from None

    def call(self, function, args: list, kwargs: dict):
        if isinstance(function, _Function):
            answer = self.answers.get(function.node.name)
            if answer is not None and function.self_value is None:
                return answer()
            return self._call_function(function, args, kwargs)
        if isinstance(function, _Class):
            return self._instantiate(function, args, kwargs)
        if isinstance(function, _External):
            if function.name in _EXCEPTIONS:
                return _Exception(function.name, str(args[0]) if args else "")
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

    def _call_function(self, function: _Function, args: list, kwargs: dict):
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
                raise Unreadable(f"{self._rel(function.module.path)}:{node.lineno}: {node.name}() needs an argument {param.arg}")
        if params.vararg:
            scope[params.vararg.arg] = tuple(args[len(positional):])
        for param, default in zip(params.kwonlyargs, params.kw_defaults):
            if param.arg in kwargs:
                scope[param.arg] = kwargs.pop(param.arg)
            elif default is not None:
                scope[param.arg] = self.eval(default, {}, function.module)
            else:
                raise Unreadable(f"{self._rel(function.module.path)}:{node.lineno}: {node.name}() needs {param.arg}=")
        if params.kwarg:
            scope[params.kwarg.arg] = dict(kwargs)
        elif kwargs:
            raise Unreadable(f"{self._rel(function.module.path)}:{node.lineno}: {node.name}() takes no {', '.join(kwargs)}")
        try:
            self.exec_block(node.body, scope, function.module)
        except _Return as ret:
            return ret.value
        return None

    def _class_attrs(self, cls: _Class) -> None:
        if cls.attrs:
            return
        for stmt in cls.node.body:
            if isinstance(stmt, ast.FunctionDef):
                cls.attrs[stmt.name] = stmt
            elif isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
                value = self.eval(stmt.value, {}, cls.module)
                for t in stmt.targets:
                    cls.attrs[t.id] = value
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                cls.attrs.setdefault("__fields__", []).append((stmt.target.id, stmt.value))

    def _instantiate(self, cls: _Class, args: list, kwargs: dict) -> _Instance:
        self._class_attrs(cls)
        instance = _Instance(cls)
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
            self._call_function(_Function(init, cls.module, instance), args, kwargs)
        return instance

    def attribute(self, value, name: str):
        if isinstance(value, _Module):
            return self.global_name(value, name)
        if isinstance(value, _External):
            full = f"{value.name}.{name}"
            known = self.externals.get(_canonical(full), _MISSING)
            if known is not _MISSING and not callable(known):
                return known
            return _External(full)
        if isinstance(value, _Instance):
            if name in value.attrs:
                return value.attrs[name]
            self._class_attrs(value.cls)
            member = value.cls.attrs.get(name, _MISSING)
            if isinstance(member, ast.FunctionDef):
                decorators = {d.id for d in member.decorator_list if isinstance(d, ast.Name)}
                if "staticmethod" in decorators:
                    return _Function(member, value.cls.module)
                function = _Function(member, value.cls.module, value)
                if "property" in decorators:
                    return self._call_function(function, [], {})
                return function
            if member is not _MISSING:
                return member
            raise Unreadable(f"{self.where}: {value.cls.node.name} has no attribute {name}")
        if isinstance(value, _Class):
            self._class_attrs(value)
            member = value.attrs.get(name, _MISSING)
            if member is _MISSING or isinstance(member, ast.FunctionDef):
                raise Unreadable(f"{self.where}: {value.node.name}.{name} is not evaluated here")
            return member
        if isinstance(value, _Path) and name in ("read_text", "exists", "is_file"):
            return self._file_method(value, name)
        if isinstance(value, (_Path, _Version)):
            return getattr(value, name)
        if isinstance(value, _Exception):
            return value.message
        for kind, names in _NATIVE_METHODS.items():
            if isinstance(value, kind) and name in names:
                return getattr(value, name)
        raise Unreadable(f"{self.where}: .{name} of a {type(value).__name__} is not evaluated here")

    def _getattr(self, value, name: str, *default):
        try:
            return self.attribute(value, name)
        except (Unreadable, _Raised):
            if not default:
                raise
            return default[0]

    def _file_method(self, path: _Path, name: str):
        """Reading a file of the project (CUTLASS's arch.h ...) goes through `read`."""

        def read_text(*args, **kwargs) -> str:
            text = self.read(path.text)
            if text is None:
                raise _Raised(_Exception("FileNotFoundError", path.text))
            return text

        return read_text if name == "read_text" else (lambda: self.read(path.text) is not None)

    # ---------------------------------------------------------- statements

    def exec_block(self, body: list[ast.stmt], scope: dict, module: _Module) -> None:
        for stmt in body:
            self.steps += 1
            if self.steps > _MAX_STEPS:
                raise Unreadable(f"{self.where}: too many steps (a loop this reader cannot finish)")
            self.where = f"{self._rel(module.path)}:{stmt.lineno}"
            self.exec(stmt, scope, module)

    def exec(self, stmt: ast.stmt, scope: dict, module: _Module) -> None:
        if isinstance(stmt, ast.Expr):
            self.eval(stmt.value, scope, module)
        elif isinstance(stmt, ast.Assign):
            value = self.eval(stmt.value, scope, module)
            for target in stmt.targets:
                self.assign(target, value, scope, module)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.assign(stmt.target, self.eval(stmt.value, scope, module), scope, module)
        elif isinstance(stmt, ast.AugAssign):
            op = _BINARY.get(type(stmt.op))
            if op is None:
                raise Unreadable(f"{self.where}: this augmented assignment is not evaluated here")
            current = self.eval(_load(stmt.target), scope, module)
            if isinstance(current, list) and isinstance(stmt.op, ast.Add):
                current += self.eval(stmt.value, scope, module)  # in place, as Python does for lists
                value = current
            else:
                value = op(current, self.eval(stmt.value, scope, module))
            self.assign(stmt.target, value, scope, module)
        elif isinstance(stmt, ast.If):
            branch = stmt.body if self.truth(self.eval(stmt.test, scope, module)) else stmt.orelse
            self.exec_block(branch, scope, module)
        elif isinstance(stmt, ast.For):
            for item in list(self.eval(stmt.iter, scope, module)):
                self.assign(stmt.target, item, scope, module)
                try:
                    self.exec_block(stmt.body, scope, module)
                except _Break:
                    break
                except _Continue:
                    continue
            else:
                self.exec_block(stmt.orelse, scope, module)
        elif isinstance(stmt, ast.Try):
            self._try(stmt, scope, module)
        elif isinstance(stmt, ast.Return):
            raise _Return(None if stmt.value is None else self.eval(stmt.value, scope, module))
        elif isinstance(stmt, ast.Raise):
            value = self.eval(stmt.exc, scope, module) if stmt.exc is not None else _Exception("RuntimeError", "re-raised")
            if isinstance(value, _External) and value.name in _EXCEPTIONS:
                value = _Exception(value.name, "")
            if not isinstance(value, _Exception):
                raise Unreadable(f"{self.where}: raises something this reader does not evaluate")
            raise _Raised(value)
        elif isinstance(stmt, ast.FunctionDef):
            scope[stmt.name] = _Function(stmt, module)
        elif isinstance(stmt, ast.ClassDef):
            scope[stmt.name] = _Class(stmt, module, dataclass=any(_is_dataclass(d) for d in stmt.decorator_list))
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                self._import(module, stmt, alias, scope)
        elif isinstance(stmt, ast.With):
            self.exec_block(stmt.body, scope, module)  # the context managers are locks and timers
        elif isinstance(stmt, ast.Break):
            raise _Break()
        elif isinstance(stmt, ast.Continue):
            raise _Continue()
        elif isinstance(stmt, (ast.Pass, ast.Assert)):
            pass
        else:
            raise Unreadable(f"{self.where}: a {type(stmt).__name__} statement is not evaluated here")

    def _try(self, stmt: ast.Try, scope: dict, module: _Module) -> None:
        try:
            try:
                self.exec_block(stmt.body, scope, module)
            except _Raised as exc:
                for handler in stmt.handlers:
                    if _handles(handler, exc.value.kind):
                        if handler.name:
                            scope[handler.name] = exc.value
                        self.exec_block(handler.body, scope, module)
                        break
                else:
                    raise
            else:
                self.exec_block(stmt.orelse, scope, module)
        finally:
            if stmt.finalbody:
                self.exec_block(stmt.finalbody, scope, module)

    def assign(self, target: ast.expr, value, scope: dict, module: _Module) -> None:
        if isinstance(target, ast.Name):
            scope[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = list(value)
            if len(items) != len(target.elts):
                raise Unreadable(f"{self.where}: unpacks {len(items)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, items):
                self.assign(t, v, scope, module)
        elif isinstance(target, ast.Attribute):
            owner = self.eval(target.value, scope, module)
            if not isinstance(owner, _Instance):
                raise Unreadable(f"{self.where}: sets an attribute of something other than a project object")
            owner.attrs[target.attr] = value
        elif isinstance(target, ast.Subscript):
            owner = self.eval(target.value, scope, module)
            if not isinstance(owner, (dict, list)):
                raise Unreadable(f"{self.where}: item assignment into a {type(owner).__name__}")
            owner[self.eval(target.slice, scope, module)] = value
        else:
            raise Unreadable(f"{self.where}: assignment to a {type(target).__name__} is not evaluated here")

    # ---------------------------------------------------------- expressions

    def truth(self, value) -> bool:
        if isinstance(value, (_External, _Function, _Class, _Module)):
            raise Unreadable(f"{self.where}: a condition on {getattr(value, 'name', 'an object')} this reader cannot decide")
        return bool(value)

    def name(self, name: str, scope: dict, module: _Module):
        if name in scope:
            return scope[name]
        return self.global_name(module, name)

    def eval(self, node: ast.expr, scope: dict, module: _Module):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.name(node.id, scope, module)
        if isinstance(node, ast.Attribute):
            return self.attribute(self.eval(node.value, scope, module), node.attr)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    items.extend(self.eval(elt.value, scope, module))
                else:
                    items.append(self.eval(elt, scope, module))
            return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
        if isinstance(node, ast.Dict):
            return {self.eval(k, scope, module): self.eval(v, scope, module) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.JoinedStr):
            return "".join(self._format(v, scope, module) for v in node.values)
        if isinstance(node, ast.BinOp):
            op = _BINARY.get(type(node.op))
            if op is None:
                raise Unreadable(f"{self.where}: operator {type(node.op).__name__} is not evaluated here")
            return op(self.eval(node.left, scope, module), self.eval(node.right, scope, module))
        if isinstance(node, ast.UnaryOp):
            value = self.eval(node.operand, scope, module)
            if isinstance(node.op, ast.Not):
                return not self.truth(value)
            if isinstance(node.op, ast.USub):
                return -value
            raise Unreadable(f"{self.where}: operator {type(node.op).__name__} is not evaluated here")
        if isinstance(node, ast.BoolOp):
            value = None
            for operand in node.values:
                value = self.eval(operand, scope, module)
                if isinstance(node.op, ast.And) and not self.truth(value):
                    return value
                if isinstance(node.op, ast.Or) and self.truth(value):
                    return value
            return value
        if isinstance(node, ast.Compare):
            left = self.eval(node.left, scope, module)
            for op, right_node in zip(node.ops, node.comparators):
                right = self.eval(right_node, scope, module)
                if isinstance(right, _External) and isinstance(op, (ast.In, ast.NotIn)):
                    right = self.externals.get(right.name, _MISSING)
                    if right is _MISSING:
                        raise Unreadable(f"{self.where}: a membership test this reader cannot decide")
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            chosen = node.body if self.truth(self.eval(node.test, scope, module)) else node.orelse
            return self.eval(chosen, scope, module)
        if isinstance(node, ast.Call):
            function = self.eval(node.func, scope, module)
            args, kwargs = [], {}
            for arg in node.args:
                if isinstance(arg, ast.Starred):
                    args.extend(self.eval(arg.value, scope, module))
                else:
                    args.append(self.eval(arg, scope, module))
            for kw in node.keywords:
                if kw.arg is None:
                    kwargs.update(self.eval(kw.value, scope, module))
                else:
                    kwargs[kw.arg] = self.eval(kw.value, scope, module)
            where = self.where
            result = self.call(function, args, kwargs)
            self.where = where
            return result
        if isinstance(node, ast.Subscript):
            value = self.eval(node.value, scope, module)
            if isinstance(node.slice, ast.Slice):
                parts = [None if p is None else self.eval(p, scope, module) for p in (node.slice.lower, node.slice.upper, node.slice.step)]
                return value[slice(*parts)]
            return value[self.eval(node.slice, scope, module)]
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return self._comprehension(node, scope, module)
        raise Unreadable(f"{self.where}: a {type(node).__name__} expression is not evaluated here")

    def _format(self, value: ast.expr, scope: dict, module: _Module) -> str:
        if isinstance(value, ast.Constant):
            return str(value.value)
        if not isinstance(value, ast.FormattedValue):
            raise Unreadable(f"{self.where}: an f-string part is not evaluated here")
        item = self.eval(value.value, scope, module)
        item = {115: str, 114: repr, 97: ascii}.get(value.conversion, lambda x: x)(item)
        spec = "" if value.format_spec is None else self.eval(value.format_spec, scope, module)
        return format(str(item) if isinstance(item, (_Path, _Version)) else item, spec)

    def _comprehension(self, node, scope: dict, module: _Module):
        inner = dict(scope)
        out: list = []

        def walk(index: int) -> None:
            if index == len(node.generators):
                if isinstance(node, ast.DictComp):
                    out.append((self.eval(node.key, inner, module), self.eval(node.value, inner, module)))
                else:
                    out.append(self.eval(node.elt, inner, module))
                return
            generator = node.generators[index]
            for item in list(self.eval(generator.iter, inner, module)):
                self.assign(generator.target, item, inner, module)
                if all(self.truth(self.eval(test, inner, module)) for test in generator.ifs):
                    walk(index + 1)

        # names a comprehension reads from its module resolve through `inner`'s fallback
        walk(0)
        if isinstance(node, ast.SetComp):
            return set(out)
        if isinstance(node, ast.DictComp):
            return dict(out)
        return out


_MISSING = object()


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


def _load(target: ast.expr) -> ast.expr:
    node = ast.parse(ast.unparse(target), mode="eval").body
    return ast.copy_location(node, target)


def _is_dataclass(decorator: ast.expr) -> bool:
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(node, ast.Attribute) and node.attr == "dataclass") or (isinstance(node, ast.Name) and node.id == "dataclass")


def _handles(handler: ast.ExceptHandler, kind: str) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    wanted = {n.id if isinstance(n, ast.Name) else getattr(n, "attr", "") for n in names}
    family = {kind, "Exception", "BaseException"}
    if kind == "ModuleNotFoundError":
        family.add("ImportError")
    if kind == "FileNotFoundError":
        family.add("OSError")
    return bool(wanted & family)
