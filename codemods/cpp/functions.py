"""The C/C++/CUDA function around an offset, read with the lexer: brace depth and the head before each `{`.

One walk over the source, comments and string literals masked, `#define`
lines skipped, tracks the braces: compiled (native, _lex.c), as it reads
every byte of every guard file; what each head opens is read here. A `{` where declarations may stand (file
scope, a namespace, a class) opens a function body when the text before it,
back to the last `;`, `{` or `}`, holds a `(`...`)` group preceded by a name
and followed only by what may close a declarator: `const`, `noexcept`,
`override`, `&`, `-> T` or a constructor's `: a(b), c{d}`. The name is the
declarator as written, qualified the way the source qualifies it
(`Runner::run`, `operator()`, `~Tile`, `apply<int>`), never with the
namespaces and classes around it, as tree-sitter's `function_definition`
spells it. Qualifiers, `template <...>` heads and macros before the name
(`__global__`, `__launch_bounds__(256)`, `CUTLASS_DEVICE`) are not the name:
the name is the one before the parameter group. `namespace`, `extern "C"`
and class bodies are scopes that hold functions; any other brace (an
initializer, an enum, a lambda at file scope) holds none. Inside a body only
braces count, and a local class's methods are functions again.

An `#if` whose branches open or close braces differently is read as its
first branch: `#else`/`#elif` go back to the state at the `#if`, and
`#endif` to the state at the end of the first branch. An offset in a
function's head (between its first token and its `{`: a guard in a
parameter list) is in that function. Nothing here reads files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from codemods.cpp import native

_BLANK = bytes(0x0A if b == 0x0A else 0x20 for b in range(256))


def mask(source: bytes) -> bytes:
    """`source` with comments and the insides of literals (raw strings too) turned into spaces, newlines kept (same
    offsets): compiled (native, _lex.c), as this walk reads every byte of every guard file."""
    return native.mask(source)


_DIRECTIVE_RE = re.compile(rb"[ \t]*#[ \t]*(\w*)")
_DIRECTIVE_LINE_RE = re.compile(rb"^[ \t]*#(?:\\\r?\n|[^\n])*", re.MULTILINE)

# After a function's parameter group, before its `{`.
_TAIL_RE = re.compile(
    rb"""\s*(?:(?:const|volatile|noexcept|override|final|&&?|
        noexcept\s*\(.*?\)|throw\s*\(.*?\)|__attribute__\s*\(\(.*?\)\))\s*)*
        (?:(?:->|(?P<init>:(?!:))|requires\b).*)?""",
    re.VERBOSE | re.DOTALL,
)
_NESTING_RE = re.compile(rb"[()\[\]{}]")
_OPERATOR_RE = re.compile(
    rb"""\boperator\s*(?:\(\s*\)|\[\s*\]|(?:new|delete)(?:\s*\[\s*\])?|->\*?|<=>|<<=?|>>=?|&&|\|\||\+\+|--
        |[-+*/%^&|!=<>,~]=?|""\s*\w+|[A-Za-z_][\w\s:<>*&]*?)\s*\Z""",
    re.VERBOSE,
)
_IDENT_END_RE = re.compile(rb"(?:~\s*)?[A-Za-z_]\w*\Z")
_QUALIFIER_END_RE = re.compile(rb"::\s*\Z")
# Words that stand before a `(`...`)` group without naming a function.
_NOT_NAMES = frozenset(
    b"""if for while switch return sizeof alignof alignas decltype static_assert catch
    __global__ __device__ __host__ __forceinline__ __noinline__ __launch_bounds__ __attribute__ __declspec
    constexpr consteval inline static mutable noexcept throw typeid new delete""".split()
)
_NAMESPACE_RE = re.compile(rb"\bnamespace\b")
_EXTERN_RE = re.compile(rb'\bextern\s*"\s*"\s*\Z')

# Frame kinds: a scope holds declarations (file, namespace, extern "C"), so does a class; a function's body and
# any other brace hold statements or values.
_SCOPE, _CLASS, _FUNCTION, _BLOCK = 0, 1, 2, 3


@dataclass(frozen=True)
class Definition:
    """One function definition: its name as written, where its head starts, its body `{`...`}`."""

    name: str
    start: int
    body_start: int
    body_end: int

    @property
    def short_name(self) -> str:
        """The name without its qualification (`Runner::run` -> `run`), whitespace aside."""
        text = " ".join(self.name.split())
        return text.rsplit("::", 1)[-1] if "::" in text else text


class _Heads:
    """What the brace walk (native.walk, _lex.c) asks of the text: what a `{` opens, read from its head."""

    def __init__(self, source: bytes, code: bytes) -> None:
        self.source = source
        self.code = code

    # ------------------------------------------------------------------ heads

    def _classify(self, head: int, brace: int) -> tuple[int, str]:
        """What a `{` at a scope or class level opens: (kind, the function's name)."""
        text = _head_text(self.code[head:brace])
        name = self._function_name(text, head)
        if name is not None:
            return _FUNCTION, name
        text = _without_template(text)
        if _NAMESPACE_RE.search(text) or _EXTERN_RE.search(text):
            return _SCOPE, ""
        if _CLASS_HEAD_RE.match(_COMPARISON_RE.sub(b"  ", text)):  # `enable_if<A >= 80>`: `=` of no initializer
            return _CLASS, ""
        return _BLOCK, ""

    def _function_name(self, text: bytes, head: int) -> str | None:
        """The name of the function whose head is `text` (`_head_text`, from `head`), or None when it heads no function."""
        depth = 0
        group = -1
        for match in _NESTING_RE.finditer(text):
            byte = text[match.start()]
            if byte in b"([{":
                if depth == 0 and byte == 0x28:
                    group = match.start()
                depth += 1
            elif depth > 0:
                depth -= 1
                if depth == 0 and byte == 0x29 and group >= 0:
                    tail = _TAIL_RE.fullmatch(text, match.end())
                    if tail is not None:
                        if tail.group("init") and not text.rstrip().endswith((b")", b"}", b"...")):
                            return None  # `a{x}` in a constructor's initializer list
                        return self._name_before(text, head, group)
                    group = -1
        return None

    def _name_before(self, text: bytes, head: int, paren: int) -> str | None:
        """The declarator name that ends just before `text[paren]`, a `(`, as written in the source, or None."""
        before = text[:paren].rstrip()
        end = len(before)
        operator = _OPERATOR_RE.search(before)
        if operator is not None:
            start = operator.start()
        else:
            found = _name_start(before)
            if found is None:
                return None
            start = found
            word = text[start:end].lstrip(b"~ \t\r\n").split(b"<", 1)[0].strip()
            if word in _NOT_NAMES or not word:
                return None
        start = _qualified_start(text, 0, start)
        if start > 0 and (text[start - 1 : start] in (b".", b"]") or text[start - 2 : start] == b"->"):
            return None  # a member call, a lambda's capture
        return self.source[head + start : head + end].decode("utf-8", "replace")

    def _local_class(self, brace: int) -> bool:
        """Whether a `{` inside a body opens a class (its methods are functions again)."""
        code = self.code
        start = max(code.rfind(b";", 0, brace), code.rfind(b"{", 0, brace), code.rfind(b"}", 0, brace)) + 1
        return bool(_CLASS_HEAD_RE.match(_without_template(code[start:brace])))


# A class head: `__device__ struct __attribute__((aligned(32))) Tile : Base<T> final`, no `=`, no call.
_PARENS = rb"\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"
_CLASS_HEAD_RE = re.compile(
    rb"\s*(?:(?:\w+|\[\[[^\]]*\]\])\s+)*?(?:class|struct|union)\b(?:[^()=;]+|" + _PARENS + rb")*+\Z"
)
_COMPARISON_RE = re.compile(rb"[<>!=]=")
_TEMPLATE_RE = re.compile(rb"\s*template\s*<")


def _without_template(text: bytes) -> bytes:
    """`text` without the `template <...>` heads it starts with."""
    while True:
        match = _TEMPLATE_RE.match(text)
        if match is None:
            return text
        depth = 1
        i = match.end()
        while i < len(text) and depth:
            depth += {0x3C: 1, 0x3E: -1}.get(text[i], 0)
            i += 1
        text = text[i:]


def _head_text(text: bytes) -> bytes:
    """A head with its directive lines blanked, and the `#elif`/`#else` branches of the `#if`s it holds (read as
    their first branch, as the walk reads braces: `__launch_bounds__(512) kernel(` / `#else` / `kernel(`)."""
    if b"#" not in text:
        return text
    out = bytearray(text)
    depth = 0
    skipping = 0  # the depth whose later branch is blanked, 0: none
    skipping_from = 0
    for match in _DIRECTIVE_LINE_RE.finditer(text):
        keyword = _DIRECTIVE_RE.match(match.group())
        word = keyword.group(1) if keyword is not None else b""
        if word in (b"if", b"ifdef", b"ifndef"):
            depth += 1
        elif word in (b"elif", b"else", b"elifdef", b"elifndef") and depth and not skipping:
            skipping = depth
        elif word == b"endif" and depth:
            if skipping == depth:
                out[skipping_from:match.start()] = text[skipping_from:match.start()].translate(_BLANK)
                skipping = 0
            depth -= 1
        if skipping == depth and word in (b"elif", b"else", b"elifdef", b"elifndef"):
            skipping_from = match.start()
        out[match.start() : match.end()] = match.group().translate(_BLANK)
    return bytes(out)


def _name_start(before: bytes) -> int | None:
    """Where the last name of `before` starts (an identifier, a template-id, a destructor), or None."""
    end = len(before)
    if before.endswith(b">"):
        depth = 0
        i = end - 1
        while i >= 0:
            byte = before[i]
            if byte == 0x3E:
                depth += 1
            elif byte == 0x3C:
                depth -= 1
                if depth == 0:
                    break
            elif byte in b";{}":
                return None
            i -= 1
        if i <= 0:
            return None
        end = len(before[:i].rstrip())
    match = _IDENT_END_RE.search(before, 0, end)
    return None if match is None else match.start()


def _qualified_start(code: bytes, head: int, start: int) -> int:
    """`start` moved back over the qualification written before the name (`Tile<T>::`, `ns::`)."""
    while True:
        qualifier = _QUALIFIER_END_RE.search(code, head, start)
        if qualifier is None:
            return start
        before = code[head : qualifier.start()].rstrip()
        found = _name_start(before)
        if found is None:
            return qualifier.start()  # `::run`: the global namespace
        start = head + found


def _walk(source: bytes, offsets: list[int], until: int | None) -> tuple[list[str | None], dict[int, Definition]]:
    """The names of the functions around `offsets`, and the definitions whose bodies closed by `until` (by the
    offset of their `{`): one compiled walk of the masked source (native.walk), which asks `_Heads` what each
    head opens."""
    code = mask(source)
    heads = _Heads(source, code)
    names: list[str] = []  # a function's name number is its place here, plus one
    found: dict[int, Definition] = {}

    def classify(head: int, brace: int) -> int:
        kind, name = heads._classify(head, brace)
        if kind != _FUNCTION:
            return kind
        names.append(name)
        return kind | len(names) << 2

    def define(name: int, start: int, body: int, end: int) -> None:
        found.setdefault(body, Definition(names[name - 1], start, body, end))

    order = sorted(range(len(offsets)), key=lambda i: offsets[i])
    numbers = native.walk(code, [offsets[i] for i in order], len(code) if until is None else until, classify, heads._local_class, define)
    out: list[str | None] = [None] * len(offsets)
    for index, number in zip(order, numbers):
        out[index] = names[number - 1] if number else None
    return out, found


def enclosing_functions(source: bytes, offsets: list[int]) -> list[str | None]:
    """For each offset, the name of the innermost function definition holding it (None at file or class level)."""
    if not offsets:
        return []
    names, _ = _walk(source, offsets, max(offsets) + 1)
    return names


def definitions(source: bytes) -> list[Definition]:
    """Every function definition of `source`, in order of their bodies."""
    _, found = _walk(source, [], None)
    return [found[at] for at in sorted(found)]


def outermost(found: list[Definition]) -> list[Definition]:
    """The definitions no other one of `found` holds."""
    out: list[Definition] = []
    for definition in found:
        if out and out[-1].body_start < definition.body_start < out[-1].body_end:
            continue
        out.append(definition)
    return out


def named(source: bytes, function: str | None) -> list[Definition]:
    """The definitions of `function` (a qualified name matches by its last part too) outside any other function;
    every outermost definition when `function` is None."""
    found = outermost(definitions(source))
    if function is None:
        return found
    spellings = {function, function.rsplit("::", 1)[-1]}
    return [d for d in found if d.short_name in spellings]
