"""Which definition a C++/CUDA call reaches: C++ name lookup in the shapes real kernel code has.

`read(source, name)` finds, in one file, the functions named `name` (their
namespace and class scope, whether each is a `__global__` kernel), the calls
of that name (the scope around the call site, the qualification as written,
the number of arguments) and the `using namespace` directives and namespace
aliases in force. `definitions(source)` finds the function definition around
an offset (codemods.cpp.syntax.Definitions) and `function` describes it.
`reaches(call, function, known)` answers whether a call reaches one
definition: True, False or None (codemod cannot tell).

The lookup it models: an unqualified call inside namespace `N` finds `N::f`
before any outer or other namespace's `f` (the innermost scope that declares
the name wins; a `using namespace X` counts where C++ says it does, in the
nearest namespace enclosing both); `ns::f` looks `ns` up from the call site
outward; `::ns::f` is absolute; `x.f()`/`x->f()` reach members only. What it
cannot follow (a class's bases, a name also used in a macro body or taken as a
pointer, overloads it cannot tell apart by argument count) is None, never a
guess. Nothing here reads files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter

from codemods.cpp import syntax
from codemods.cpp.lexer import mask_comments

Scope = tuple[str, ...]  # namespaces and classes, outermost first; () is the global namespace


@dataclass(frozen=True)
class Function:
    """One function named in a file: a definition or a declaration."""

    name: str
    scope: Scope
    file: str
    start: int  # byte range of the definition (or declaration)
    end: int
    definition: bool
    kernel: bool  # `__global__`: launched from the host, not called by name
    member: bool  # declared in a class
    arity: tuple[int, int | None]  # fewest and most arguments it takes (None: variadic)

    @property
    def qualified(self) -> str:
        return "::".join((*self.scope, self.name))


@dataclass(frozen=True)
class Call:
    """One call of a name, as written."""

    name: str
    qualifier: Scope | None  # None: unqualified; ("", "cute") for `::cute::f`
    scope: Scope  # the scopes around the call site
    member: bool  # `x.f()` / `x->f()`
    arguments: int
    file: str
    offset: int


@dataclass(frozen=True)
class Names:
    """What one file says about one name (read)."""

    file: str
    functions: tuple[Function, ...]
    calls: tuple[Call, ...]
    usings: tuple[tuple[Scope, Scope], ...]  # (scope of the directive, namespace as written)
    aliases: tuple[tuple[Scope, str, Scope], ...]  # (scope, alias, namespace as written)
    namespaces: frozenset[Scope]  # every namespace the file opens
    brought: tuple[tuple[Scope, Scope], ...]  # `using ns::name;`: (scope it declares the name in, ns as written)
    unread: tuple[int, ...]  # offsets where the name is used other than as a call or a declaration


# Every file here is compiled by nvcc as part of a JIT module, headers (`.h`) included: read with the CUDA grammar.
_GRAMMAR = "cuda"
_KERNEL_RE = re.compile(rb"\b__global__\b")
_TEMPLATE_ARGS_RE = re.compile(r"<[^<>]*>")


def _text(node: tree_sitter.Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _path(text: str) -> tuple[str, ...]:
    """`::a::b<T>::f` -> ("", "a", "b", "f"): components without template arguments or blanks."""
    text = "".join(text.split())
    while True:
        stripped = _TEMPLATE_ARGS_RE.sub("", text)
        if stripped == text:
            break
        text = stripped
    return tuple(text.split("::"))


def _declarator(node: tree_sitter.Node) -> tree_sitter.Node | None:
    """The function_declarator of a definition or declaration, if it declares a function."""
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        if declarator.type not in ("pointer_declarator", "reference_declarator", "attributed_declarator"):
            return None
        declarator = declarator.child_by_field_name("declarator")
    return declarator


def _scope(node: tree_sitter.Node) -> Scope:
    """The namespaces and classes around `node` (an anonymous namespace adds nothing: its names are the enclosing one's)."""
    parts: list[str] = []
    parent = node.parent
    while parent is not None:
        if parent.type == "namespace_definition":
            name = parent.child_by_field_name("name")
            if name is not None:
                parts[:0] = [p for p in _path(_text(name)) if p]
        elif parent.type in ("class_specifier", "struct_specifier", "union_specifier"):
            name = parent.child_by_field_name("name")
            if name is not None:
                parts.insert(0, _path(_text(name))[-1])
        elif parent.type == "function_definition":
            declarator = _declarator(parent)
            written = _path(_text(declarator.child_by_field_name("declarator"))) if declarator else ()
            parts[:0] = [p for p in written[:-1] if p]  # `void S::h() { ... }` looks in S first
        parent = parent.parent
    return tuple(parts)


def _arity(declarator: tree_sitter.Node) -> tuple[int, int | None]:
    parameters = declarator.child_by_field_name("parameters")
    if parameters is None:
        return 0, None
    fewest, most = 0, 0
    for child in parameters.named_children:
        if child.type == "variadic_parameter_declaration" or child.type == "variadic_parameter":
            return fewest, None
        if child.type == "optional_parameter_declaration":
            most += 1
        elif child.type == "parameter_declaration":
            if _text(child).strip() == "void" and parameters.named_child_count == 1:
                return 0, 0
            fewest, most = fewest + 1, most + 1
    if "..." in _text(parameters):
        return fewest, None
    return fewest, most


def function(node: tree_sitter.Node, source: bytes, file: str = "") -> Function | None:
    """The function a definition or declaration declares (None: it declares no function)."""
    declarator = _declarator(node)
    if declarator is None:
        return None
    written = _path(_text(declarator.child_by_field_name("declarator")))
    outer = node.parent if node.parent is not None and node.parent.type == "template_declaration" else node
    head = source[outer.start_byte : declarator.start_byte]
    member = node.type == "field_declaration" or (
        node.parent is not None and node.parent.type == "field_declaration_list"
    )
    return Function(
        name=written[-1],
        scope=_scope(node) + tuple(p for p in written[:-1] if p),
        file=file,
        start=outer.start_byte,
        end=node.end_byte,
        definition=node.type == "function_definition",
        kernel=bool(_KERNEL_RE.search(head)),
        member=member or len(written) > 1,
        arity=_arity(declarator),
    )


def definitions(source: bytes) -> syntax.Definitions:
    """The function definitions of `source`, read as `read` reads it: index a file once for all its offsets.

    `definitions(source).innermost(offset, body=True)` is the definition whose
    body holds `offset` (None: file or class level), `function` describes it.
    """
    return syntax.Definitions(syntax.parse_code(source, _GRAMMAR), _GRAMMAR)


def read(source: bytes, name: str, file: str = "") -> Names:
    """What `source` says about `name`: its functions, its calls, and the directives name lookup needs."""
    tree = syntax.parse_code(source, _GRAMMAR)
    functions: list[Function] = []
    calls: list[Call] = []
    usings: list[tuple[Scope, Scope]] = []
    aliases: list[tuple[Scope, str, Scope]] = []
    namespaces: set[Scope] = set()
    brought: list[tuple[Scope, Scope]] = []
    spans: list[tuple[int, int]] = []  # where the name is read: declarators and callees
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        kind = node.type
        if kind in ("function_definition", "declaration", "field_declaration"):
            found = function(node, source, file)
            if found is not None and found.name == name:
                functions.append(found)
                declarator = _declarator(node)
                assert declarator is not None
                spans.append((declarator.start_byte, declarator.end_byte))
        elif kind == "namespace_definition":
            label = node.child_by_field_name("name")
            if label is not None:
                namespaces.add(_scope(node) + tuple(p for p in _path(_text(label)) if p))
        elif kind == "using_declaration":
            target = next((c for c in node.named_children if c.type != "comment"), None)
            written = _path(_text(target))
            if re.match(r"using\s+namespace\b", _text(node)):
                usings.append((_scope(node), written))
            elif len(written) > 1 and written[-1] == name and target is not None:
                brought.append((_scope(node), written[:-1]))
                spans.append((target.start_byte, target.end_byte))
        elif kind == "namespace_alias_definition" and node.named_child_count >= 2:
            alias, target = node.named_children[0], node.named_children[-1]
            aliases.append((_scope(node), _text(alias), _path(_text(target))))
        elif kind == "call_expression":
            call = _call(node, name, file)
            callee = node.child_by_field_name("function")
            if call is not None and callee is not None:
                calls.append(call)
                spans.append((callee.start_byte, callee.end_byte))
        stack.extend(node.children)
    unread = _unread(source, name, spans)
    return Names(
        file, tuple(functions), tuple(calls), tuple(usings), tuple(aliases), frozenset(namespaces), tuple(brought), unread
    )


def _call(node: tree_sitter.Node, name: str, file: str) -> Call | None:
    callee = node.child_by_field_name("function")
    if callee is None:
        return None
    member = callee.type == "field_expression"
    if member:
        written: tuple[str, ...] = _path(_text(callee.child_by_field_name("field")))
    elif callee.type in ("identifier", "qualified_identifier", "template_function"):
        written = _path(_text(callee))
    else:
        return None
    if not written or written[-1] != name:
        return None
    arguments = node.child_by_field_name("arguments")
    count = arguments.named_child_count if arguments is not None else 0
    qualifier = None if member or len(written) == 1 else written[:-1]
    return Call(name, qualifier, _scope(node), member, count, file, node.start_byte)


def _unread(source: bytes, name: str, spans: list[tuple[int, int]]) -> tuple[int, ...]:
    """Uses of `name` in code (not comments) outside `spans`: in a macro body, taken as a pointer, ..."""
    code = mask_comments(source)
    return tuple(
        match.start()
        for match in re.finditer(rb"\b" + re.escape(name.encode()) + rb"\b", code)
        if not any(start <= match.start() < end for start, end in spans)
    )


# ---------------------------------------------------------------- lookup


@dataclass(frozen=True)
class Known:
    """What every file that may hold a candidate says about one name, together."""

    functions: tuple[Function, ...]
    usings: tuple[tuple[Scope, Scope], ...]
    aliases: tuple[tuple[Scope, str, Scope], ...]
    namespaces: frozenset[Scope]
    brought: tuple[tuple[Scope, Scope], ...] = ()

    @classmethod
    def of(cls, names: list[Names]) -> Known:
        return cls(
            tuple(f for n in names for f in n.functions),
            tuple(dict.fromkeys(u for n in names for u in n.usings)),
            tuple(dict.fromkeys(a for n in names for a in n.aliases)),
            frozenset().union(*(n.namespaces for n in names)),
            tuple(dict.fromkeys(b for n in names for b in n.brought)),
        )

    def scopes(self) -> set[Scope]:
        return set(self.namespaces) | {f.scope for f in self.functions}


def _namespace(written: Scope, at: Scope, known: Known) -> Scope | None:
    """The namespace `written` names from scope `at`: absolute with a leading "", else the innermost that exists."""
    if written and written[0] == "":
        return tuple(written[1:])
    scopes = known.scopes()
    for depth in range(len(at), -1, -1):
        prefix = at[:depth]
        for where, alias, target in known.aliases:
            if where == prefix and written[0] == alias:
                base = _namespace(target, where, known)
                return None if base is None else base + tuple(written[1:])
        if prefix + written in scopes:
            return prefix + written
    return None


def _common(a: Scope, b: Scope) -> Scope:
    depth = 0
    while depth < min(len(a), len(b)) and a[depth] == b[depth]:
        depth += 1
    return a[:depth]


def resolve(call: Call, known: Known) -> Scope | None:
    """The scope whose `call.name` the call finds, or None when codemod cannot tell (or it finds none)."""
    declared = {f.scope for f in known.functions}
    if call.qualifier is not None:
        target = _namespace(call.qualifier, call.scope, known)
        return target if target in declared else None
    # using-directives in force at the call site, each seen from the nearest namespace enclosing both
    visible: dict[Scope, set[Scope]] = {}
    for where, written in known.usings:
        if call.scope[: len(where)] != where:
            continue
        target = _namespace(written, where, known) or tuple(p for p in written if p)
        visible.setdefault(_common(where, target), set()).add(target)
    brought: dict[Scope, set[Scope]] = {}  # `using ns::f;` declares ns's f right where it stands
    for where, written in known.brought:
        target = _namespace(written, where, known)
        brought.setdefault(where, set()).add(target if target is not None else ("?", *written))
    for depth in range(len(call.scope), -1, -1):
        prefix = call.scope[:depth]
        found = ({prefix} | visible.get(prefix, set())) & declared | brought.get(prefix, set())
        if len(found) == 1 and not next(iter(found))[:1] == ("?",):
            return found.pop()
        if found:
            return None  # ambiguous in C++ too, overloads across namespaces, or a namespace not read: cannot tell
    return None


def reaches(call: Call, function: Function, known: Known) -> bool | None:
    """Whether `call` reaches `function`: True, False, or None when codemod cannot tell."""
    if call.member:
        return None if function.member else False
    scope = resolve(call, known)
    if scope is None:
        # A qualifier codemod cannot place still names its namespace by its last name, unless it is an alias.
        # (A member can also be reached through a type alias or a template parameter: no such answer there.)
        aliased = any(alias == call.qualifier[0] for _, alias, _ in known.aliases) if call.qualifier else True
        if call.qualifier is not None and not (aliased or function.member) and call.qualifier[-1:] != function.scope[-1:]:
            return False
        return None
    if scope != function.scope or not _admits(function.arity, call.arguments):
        return False
    others = [
        f for f in known.functions
        if f.scope == scope and f.definition and not _same_body(f, function) and _admits(f.arity, call.arguments)
    ]  # fmt: skip
    return None if others else True


def named_calls_only(function: Function) -> bool:
    """Whether code reaches `function` only by calling its name: not an operator, constructor or destructor."""
    return function.name.isidentifier() and not (function.member and function.scope[-1:] == (function.name,))


def _same_body(a: Function, b: Function) -> bool:
    return a.file == b.file and a.start == b.start


def _admits(arity: tuple[int, int | None], count: int) -> bool:
    fewest, most = arity
    return fewest <= count and (most is None or count <= most)
