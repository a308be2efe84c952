"""Statements and expressions of the small, side-effect-free part of Python the JIT flag reader evaluates.

`Evaluator` is the half of codemods.jit.interpreter's `Interpreter` that
runs code: if/for/try/return/raise, assignments, literals, f-strings,
operators, comprehensions. Names, attributes, calls and imports it leaves to
the interpreter (`global_name`, `attribute`, `call`, `import_alias`).
Anything else stops the reading with `Unreadable`.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable

from codemods.jit.values import (
    EXCEPTIONS, MISSING, Break, Class, Continue, ExceptionValue, External, Function, Instance, Module, Raised, Return, TextPath,
    Unreadable, Version,
)

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.BitOr: operator.or_, ast.BitAnd: operator.and_}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
            ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
            ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_CONVERSIONS: dict[int, Callable[[object], str]] = {115: str, 114: repr, 97: ascii}  # f"{x!s}", !r, !a
_MAX_STEPS = 200_000


class Evaluator:
    """Runs statements and evaluates expressions; the interpreter supplies names, attributes, calls and imports."""

    read: Callable[[str], str | None]
    where: str
    steps: int
    externals: dict

    def rel(self, path: str) -> str:
        raise NotImplementedError

    def global_name(self, module: Module, name: str):
        raise NotImplementedError

    def import_alias(self, module: Module, stmt, alias: ast.alias, scope: dict) -> None:
        raise NotImplementedError

    def call(self, function, args: list, kwargs: dict):
        raise NotImplementedError

    def attribute(self, value, name: str):
        raise NotImplementedError

    def exec_block(self, body: list[ast.stmt], scope: dict, module: Module) -> None:
        for stmt in body:
            self.steps += 1
            if self.steps > _MAX_STEPS:
                raise Unreadable(f"{self.where}: too many steps (a loop this reader cannot finish)")
            self.where = f"{self.rel(module.path)}:{stmt.lineno}"
            self.exec(stmt, scope, module)

    def exec(self, stmt: ast.stmt, scope: dict, module: Module) -> None:
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
                except Break:
                    break
                except Continue:
                    continue
            else:
                self.exec_block(stmt.orelse, scope, module)
        elif isinstance(stmt, ast.Try):
            self._try(stmt, scope, module)
        elif isinstance(stmt, ast.Return):
            raise Return(None if stmt.value is None else self.eval(stmt.value, scope, module))
        elif isinstance(stmt, ast.Raise):
            value = self.eval(stmt.exc, scope, module) if stmt.exc is not None else ExceptionValue("RuntimeError", "re-raised")
            if isinstance(value, External) and value.name in EXCEPTIONS:
                value = ExceptionValue(value.name, "")
            if not isinstance(value, ExceptionValue):
                raise Unreadable(f"{self.where}: raises something this reader does not evaluate")
            raise Raised(value)
        elif isinstance(stmt, ast.FunctionDef):
            scope[stmt.name] = Function(stmt, module)
        elif isinstance(stmt, ast.ClassDef):
            scope[stmt.name] = Class(stmt, module, dataclass=any(_is_dataclass(d) for d in stmt.decorator_list))
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                self.import_alias(module, stmt, alias, scope)
        elif isinstance(stmt, ast.With):
            self.exec_block(stmt.body, scope, module)  # the context managers are locks and timers
        elif isinstance(stmt, ast.Break):
            raise Break()
        elif isinstance(stmt, ast.Continue):
            raise Continue()
        elif isinstance(stmt, (ast.Pass, ast.Assert)):
            pass
        else:
            raise Unreadable(f"{self.where}: a {type(stmt).__name__} statement is not evaluated here")

    def _try(self, stmt: ast.Try, scope: dict, module: Module) -> None:
        try:
            try:
                self.exec_block(stmt.body, scope, module)
            except Raised as exc:
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

    def assign(self, target: ast.expr, value, scope: dict, module: Module) -> None:
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
            if not isinstance(owner, Instance):
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
        if isinstance(value, (External, Function, Class, Module)):
            raise Unreadable(f"{self.where}: a condition on {getattr(value, 'name', 'an object')} this reader cannot decide")
        return bool(value)

    def name(self, name: str, scope: dict, module: Module):
        if name in scope:
            return scope[name]
        return self.global_name(module, name)

    def eval(self, node: ast.expr, scope: dict, module: Module):
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
            mapping = {}
            for k, v in zip(node.keys, node.values):
                if k is None:  # `{**mapping}`: refused as eval refuses any node it does not read
                    raise Unreadable(f"{self.where}: a NoneType expression is not evaluated here")
                mapping[self.eval(k, scope, module)] = self.eval(v, scope, module)
            return mapping
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
            for comparison, right_node in zip(node.ops, node.comparators):
                right = self.eval(right_node, scope, module)
                if isinstance(right, External) and isinstance(comparison, (ast.In, ast.NotIn)):
                    right = self.externals.get(right.name, MISSING)
                    if right is MISSING:
                        raise Unreadable(f"{self.where}: a membership test this reader cannot decide")
                if not _COMPARE[type(comparison)](left, right):
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

    def _format(self, value: ast.expr, scope: dict, module: Module) -> str:
        if isinstance(value, ast.Constant):
            return str(value.value)
        if not isinstance(value, ast.FormattedValue):
            raise Unreadable(f"{self.where}: an f-string part is not evaluated here")
        item = self.eval(value.value, scope, module)
        item = _CONVERSIONS.get(value.conversion, lambda x: x)(item)
        spec = "" if value.format_spec is None else self.eval(value.format_spec, scope, module)
        return format(str(item) if isinstance(item, (TextPath, Version)) else item, spec)

    def _comprehension(self, node, scope: dict, module: Module):
        inner = dict(scope)
        out: list = []
        # names a comprehension reads from its module resolve through `inner`'s fallback
        self._generate(node, 0, inner, module, out)
        if isinstance(node, ast.SetComp):
            return set(out)
        if isinstance(node, ast.DictComp):
            return dict(out)
        return out

    def _generate(self, node, index: int, inner: dict, module: Module, out: list) -> None:
        """The items of a comprehension from its `index`th generator on, into `out`."""
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
                self._generate(node, index + 1, inner, module, out)


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
