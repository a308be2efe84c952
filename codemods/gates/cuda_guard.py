"""CUDA preprocessor guards: `#if` conditions that name an arch macro.

A gate of this kind is the condition of an `#if` or `#elif` (or the name after
`#ifdef`, `#ifndef`, `#elifdef`, `#elifndef`) that names `__CUDA_ARCH__`,
`__CUDA_ARCH_SPECIFIC__`, `__CUDA_ARCH_FAMILY_SPECIFIC__` or a
`__CUDA_ARCH_FEAT_SM<NN>_ALL` macro. Tree-sitter finds the directives, so a
guard inside a comment or a string literal is not a gate. Each condition is
evaluated as the C preprocessor does in nvcc's device pass for every arch of
the universe, with `Arch.macros()` defined: admitted, excluded, or unknown
when the answer depends on any other macro or the condition does not parse.

`widen` rewrites only the bytes of one condition, in one of two ways:

- it drops the `&&` conjuncts that exclude the targets, each with one adjacent
  `&&`, and keeps every parenthesis the author wrote (FlashInfer PR #3903:
  `(defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))`
  became `(defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))`);
- otherwise it appends a disjunct for the targets,
  `cond || (__CUDA_ARCH__ >= 1200 && __CUDA_ARCH__ < 1300)`.

Either way the result must admit exactly the old archs plus the targets, and
every other arch of the universe must evaluate as before; it is re-parsed and
re-evaluated to make sure. It leaves alone guards that are unknown on any arch,
`#ifdef`-style guards, comments, continuation lines, line endings and every
other directive.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass, replace
from functools import cache, lru_cache

import tree_sitter
import tree_sitter_cpp
import tree_sitter_cuda

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet, is_arch_macro
from codemods.gates import CannotWiden, Edit, Gate, SourceError, apply_edits, decode

KIND = "cuda_guard"

_CONDITION_DIRECTIVES = ("#if", "#elif")
_DEFINED_DIRECTIVES = ("#ifdef", "#elifdef")
_UNDEFINED_DIRECTIVES = ("#ifndef", "#elifndef")
_DIRECTIVES = _CONDITION_DIRECTIVES + _DEFINED_DIRECTIVES + _UNDEFINED_DIRECTIVES

_GRAMMARS = {"cuda": tree_sitter_cuda.language, "cpp": tree_sitter_cpp.language}


@cache
def _grammar(language: str) -> tuple[tree_sitter.Parser, tree_sitter.Query]:
    """The parser and the directive-keyword query for `language`, built once."""
    if language not in _GRAMMARS:
        raise ValueError(f"unknown language {language!r}; use one of {sorted(_GRAMMARS)}")
    grammar = tree_sitter.Language(_GRAMMARS[language]())
    keywords = " ".join(f'"{directive}"' for directive in _DIRECTIVES)
    return tree_sitter.Parser(grammar), tree_sitter.Query(grammar, f"[{keywords}] @keyword")


def _keywords(tree: tree_sitter.Tree, language: str) -> list[tree_sitter.Node]:
    _, query = _grammar(language)
    captures = tree_sitter.QueryCursor(query).captures(tree.root_node)
    return sorted(captures.get("keyword", []), key=lambda node: node.start_byte)


@cache
def _directive_query(language: str) -> tree_sitter.Query:
    return tree_sitter.Query(
        tree_sitter.Language(_GRAMMARS[language]()),
        # single-node patterns: one with a child pattern keeps a state open per enclosing #if (quadratic)
        "[(preproc_if) (preproc_elif) (preproc_ifdef) (preproc_elifdef)] @directive",
    )


def _directives(tree: tree_sitter.Tree, language: str) -> dict[int, tree_sitter.Node]:
    """The directive nodes (`preproc_if` ...) by offset: a directive starts where its keyword does.

    A keyword tree-sitter could not place in a directive (inside an ERROR) has none.
    """
    captures = tree_sitter.QueryCursor(_directive_query(language)).captures(tree.root_node)
    return {node.start_byte: node for node in captures.get("directive", [])}


_TOKEN_RE = re.compile(
    rb"""
      (?P<space>[ \t\f\v\r]+ | \\[ \t]*\r?\n | /\*.*?\*/ | //(?:\\\r?\n|[^\n])* )
    | (?P<newline>\n)
    | (?P<number>\.?[0-9](?:[eEpP][+-]|[0-9A-Za-z_.])*)
    | (?P<char>(?:u8|[uUL])?'(?:[^'\\\n]|\\.)*')
    | (?P<ident>[A-Za-z_$][A-Za-z0-9_$]*)
    | (?P<punct>&&|\|\||<<|>>|<=|>=|==|!=|[-+*/%<>&^|!~?:(),])
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # number, char, ident, punct, or stray for a byte no C token starts with
    text: str  # an alternative token is given as the operator it spells (`and` -> `&&`)
    start: int
    end: int
    alternative: bool = False  # spelled as a C++ alternative token (`and`, `or`, `not` ...)


# C++ [lex.digraph]: in C++ (and so in CUDA) these are the operators, in #if as anywhere.
_ALTERNATIVE_TOKENS = {
    "and": "&&", "or": "||", "not": "!", "bitand": "&", "bitor": "|",
    "xor": "^", "compl": "~", "not_eq": "!=",
}  # fmt: skip


def _scan_line(source: bytes, pos: int) -> tuple[list[_Token], int]:
    """Tokens of the logical line from `pos`, and the offset just past its newline.

    Continuation backslashes, comments and whitespace separate tokens and are
    not tokens themselves, as in translation phases 2 and 3.
    """
    tokens = []
    while pos < len(source):
        match = _TOKEN_RE.match(source, pos)
        if match is None:
            tokens.append(_Token("stray", source[pos : pos + 1].decode("latin-1"), pos, pos + 1))
            pos += 1
            continue
        kind = match.lastgroup
        pos = match.end()
        if kind == "newline":
            break
        if kind == "ident" and match.group().decode("latin-1") in _ALTERNATIVE_TOKENS:
            spelled = _ALTERNATIVE_TOKENS[match.group().decode("latin-1")]
            tokens.append(_Token("punct", spelled, match.start(), pos, alternative=True))
        elif kind != "space":
            tokens.append(_Token(kind, match.group().decode("latin-1"), match.start(), pos))
    return tokens, pos


_BITS = 64
_MASK = (1 << _BITS) - 1

_Value = tuple[int, bool]  # the number, and whether its type is unsigned


class _Malformed(Exception):
    """The tokens are not a preprocessor expression."""


class _Invalid(Exception):
    """Evaluating the expression is an error (division by zero)."""


def _wrap(number: int, unsigned: bool) -> _Value:
    number &= _MASK
    if not unsigned and number >= 1 << (_BITS - 1):
        number -= 1 << _BITS
    return number, unsigned


def _as(value: _Value, unsigned: bool) -> int:
    return value[0] & _MASK if unsigned else value[0]


_TRUE: _Value = (1, False)
_FALSE: _Value = (0, False)


def _boolean(truth: bool) -> _Value:
    return _TRUE if truth else _FALSE


@dataclass(frozen=True, slots=True)
class _Number:
    start: int
    end: int
    value: _Value

    def evaluate(self, macros: dict[str, int]) -> _Value | None:
        return self.value

    def unsigned(self, macros: dict[str, int]) -> bool | None:
        return self.value[1]


@dataclass(frozen=True, slots=True)
class _Macro:
    """An identifier: a known macro's value, 0 for an arch macro not defined on the target."""

    start: int
    end: int
    name: str

    def evaluate(self, macros: dict[str, int]) -> _Value | None:
        if self.name in macros:
            return _wrap(macros[self.name], False)
        return _FALSE if is_arch_macro(self.name) else None

    def unsigned(self, macros: dict[str, int]) -> bool | None:
        return False if self.name in macros or is_arch_macro(self.name) else None


@dataclass(frozen=True, slots=True)
class _Defined:
    start: int
    end: int
    name: str

    def evaluate(self, macros: dict[str, int]) -> _Value | None:
        if self.name in macros:
            return _TRUE
        return _FALSE if is_arch_macro(self.name) else None

    def unsigned(self, macros: dict[str, int]) -> bool | None:
        return False


@dataclass(frozen=True, slots=True)
class _Opaque:
    """A function-like macro call or a character literal: never evaluated."""

    start: int
    end: int

    def evaluate(self, macros: dict[str, int]) -> _Value | None:
        return None

    def unsigned(self, macros: dict[str, int]) -> bool | None:
        return None


@dataclass(frozen=True, slots=True)
class _Group:
    """A parenthesized expression; `start`/`end` include the parentheses."""

    start: int
    end: int
    inner: _Node

    def evaluate(self, macros: dict[str, int]) -> _Value | None:
        return self.inner.evaluate(macros)

    def unsigned(self, macros: dict[str, int]) -> bool | None:
        return self.inner.unsigned(macros)


@dataclass(frozen=True, slots=True)
class _Unary:
    start: int
    end: int
    op: str
    operand: _Node

    def evaluate(self, macros: dict[str, int]) -> _Value | None:
        value = self.operand.evaluate(macros)
        if value is None:
            return None
        if self.op == "!":
            return _boolean(not value[0])
        if self.op == "~":
            return _wrap(~value[0], value[1])
        if self.op == "-":
            return _wrap(-value[0], value[1])
        return value

    def unsigned(self, macros: dict[str, int]) -> bool | None:
        return False if self.op == "!" else self.operand.unsigned(macros)


_COMPARISONS = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
}  # fmt: skip
_ARITHMETIC = {
    "+": operator.add, "-": operator.sub, "*": operator.mul,
    "&": operator.and_, "|": operator.or_, "^": operator.xor,
}  # fmt: skip


def _divide(a: int, b: int) -> tuple[int, int]:
    """C division: the quotient truncates toward zero."""
    if b == 0:
        raise _Invalid("division by zero")
    quotient = abs(a) // abs(b)
    if (a < 0) != (b < 0):
        quotient = -quotient
    return quotient, a - b * quotient


def _shift(value: _Value, amount: int, left: bool) -> _Value:
    if amount < 0:
        amount, left = -amount, not left
    number, unsigned = value
    if left:
        return _wrap(number << min(amount, _BITS), unsigned)
    return _wrap(number >> min(amount, _BITS), unsigned)


@dataclass(frozen=True, slots=True)
class _Binary:
    start: int
    end: int
    op: str
    left: _Node
    right: _Node

    def evaluate(self, macros: dict[str, int]) -> _Value | None:
        if self.op in ("&&", "||"):
            return self._logical(macros)
        left = self.left.evaluate(macros)
        right = self.right.evaluate(macros)
        if left is None or right is None:
            return None
        if self.op in ("<<", ">>"):
            return _shift(left, _as(right, right[1]), self.op == "<<")
        unsigned = left[1] or right[1]
        a, b = _as(left, unsigned), _as(right, unsigned)
        if self.op in _COMPARISONS:
            return _boolean(_COMPARISONS[self.op](a, b))
        if self.op in _ARITHMETIC:
            return _wrap(_ARITHMETIC[self.op](a, b), unsigned)
        quotient, remainder = _divide(a, b)
        return _wrap(quotient if self.op == "/" else remainder, unsigned)

    def _logical(self, macros: dict[str, int]) -> _Value | None:
        # A known operand that settles the result decides it whatever the other
        # one is: False && unknown is False, True || unknown is True. An operand
        # the left one short-circuits is not evaluated, as in cpp.
        settles = self.op == "||"
        left = self.left.evaluate(macros)
        if left is not None and bool(left[0]) is settles:
            return _boolean(settles)
        right = self.right.evaluate(macros)
        if right is not None and bool(right[0]) is settles:
            return _boolean(settles)
        if left is None or right is None:
            return None
        return _boolean(not settles)

    def unsigned(self, macros: dict[str, int]) -> bool | None:
        if self.op in _COMPARISONS or self.op in ("&&", "||"):
            return False
        left = self.left.unsigned(macros)
        if self.op in ("<<", ">>"):
            return left
        right = self.right.unsigned(macros)
        return None if left is None or right is None else left or right


@dataclass(frozen=True, slots=True)
class _Conditional:
    start: int
    end: int
    condition: _Node
    then: _Node
    otherwise: _Node

    def evaluate(self, macros: dict[str, int]) -> _Value | None:
        unsigned = self.unsigned(macros)
        if unsigned is None:
            return None
        condition = self.condition.evaluate(macros)
        if condition is not None:
            chosen = (self.then if condition[0] else self.otherwise).evaluate(macros)
            return None if chosen is None else _wrap(chosen[0], unsigned)
        then, otherwise = self.then.evaluate(macros), self.otherwise.evaluate(macros)
        if then is None or otherwise is None or _as(then, unsigned) != _as(otherwise, unsigned):
            return None
        return _wrap(then[0], unsigned)

    def unsigned(self, macros: dict[str, int]) -> bool | None:
        then, otherwise = self.then.unsigned(macros), self.otherwise.unsigned(macros)
        return None if then is None or otherwise is None else then or otherwise


_Node = _Number | _Macro | _Defined | _Opaque | _Group | _Unary | _Binary | _Conditional

_PRECEDENCE = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5,
    "==": 6, "!=": 6, "<": 7, "<=": 7, ">": 7, ">=": 7,
    "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}  # fmt: skip

_INTEGER_RE = re.compile(
    r"""(?:0[xX](?P<hex>[0-9a-fA-F]+) | 0[bB](?P<bin>[01]+) | (?P<oct>0[0-7]*) | (?P<dec>[1-9][0-9]*))
        (?P<suffix>(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)?)""",
    re.VERBOSE,
)


def _integer(token: _Token) -> _Number:
    match = _INTEGER_RE.fullmatch(token.text)
    if match is None:
        raise _Malformed(f"{token.text!r} is not an integer literal")
    if match["hex"]:
        number = int(match["hex"], 16)
    elif match["bin"]:
        number = int(match["bin"], 2)
    elif match["oct"]:
        number = int(match["oct"], 8)
    else:
        number = int(match["dec"])
    if number > _MASK:
        raise _Malformed(f"{token.text} does not fit in 64 bits")
    unsigned = "u" in match["suffix"].lower() or number >= 1 << (_BITS - 1)
    return _Number(token.start, token.end, (number, unsigned))


class _ExpressionParser:
    """Precedence climbing over the tokens of one `#if` condition."""

    def __init__(self, tokens: list[_Token]):
        self.tokens = tokens
        self.pos = 0

    def parse(self) -> _Node:
        node = self._conditional()
        if self.pos != len(self.tokens):
            raise _Malformed(f"unexpected {self.tokens[self.pos].text!r}")
        return node

    def _peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _peek_punct(self) -> str | None:
        token = self._peek()
        return token.text if token is not None and token.kind == "punct" else None

    def _next(self) -> _Token:
        token = self._peek()
        if token is None:
            raise _Malformed("the condition ends early")
        self.pos += 1
        return token

    def _expect(self, punct: str) -> _Token:
        token = self._next()
        if token.kind != "punct" or token.text != punct:
            raise _Malformed(f"expected {punct!r}, found {token.text!r}")
        return token

    def _conditional(self) -> _Node:
        condition = self._binary(1)
        if self._peek_punct() != "?":
            return condition
        self._next()
        then = self._conditional()
        self._expect(":")
        otherwise = self._conditional()
        return _Conditional(condition.start, otherwise.end, condition, then, otherwise)

    def _binary(self, min_precedence: int) -> _Node:
        left = self._unary()
        while (op := self._peek_punct()) in _PRECEDENCE and _PRECEDENCE[op] >= min_precedence:
            self._next()
            right = self._binary(_PRECEDENCE[op] + 1)
            left = _Binary(left.start, right.end, op, left, right)
        return left

    def _unary(self) -> _Node:
        token = self._next()
        if token.kind == "punct" and token.text in ("!", "~", "-", "+"):
            operand = self._unary()
            return _Unary(token.start, operand.end, token.text, operand)
        if token.kind == "punct" and token.text == "(":
            inner = self._conditional()
            close = self._expect(")")
            return _Group(token.start, close.end, inner)
        if token.kind == "number":
            return _integer(token)
        if token.kind == "char":
            return _Opaque(token.start, token.end)
        if token.kind == "ident" and token.text == "defined":
            return self._defined(token)
        if token.kind == "ident" and self._peek_punct() == "(":
            return self._call(token)
        if token.kind == "ident":
            return _Macro(token.start, token.end, token.text)
        raise _Malformed(f"unexpected {token.text!r}")

    def _defined(self, keyword: _Token) -> _Defined:
        parenthesized = self._peek_punct() == "("
        if parenthesized:
            self._next()
        name = self._next()
        if name.kind != "ident":
            raise _Malformed("defined needs a macro name")
        end = self._expect(")").end if parenthesized else name.end
        return _Defined(keyword.start, end, name.text)

    def _call(self, name: _Token) -> _Opaque:
        depth = 0
        while True:
            token = self._next()
            if token.kind == "punct" and token.text == "(":
                depth += 1
            elif token.kind == "punct" and token.text == ")":
                depth -= 1
                if depth == 0:
                    return _Opaque(name.start, token.end)


def _truth(node: _Node, macros: dict[str, int]) -> bool | None:
    try:
        value = node.evaluate(macros)
    except (_Invalid, RecursionError):
        return None
    return None if value is None else value[0] != 0


_ADMITS: dict[tuple, ArchSet] = {}


@dataclass(frozen=True)
class _Guard:
    directive: str  # "#if", "#elif", "#ifdef" ...
    tokens: list[_Token]
    expression: _Node | None  # None: the condition does not parse, so every arch is unknown
    stop: int  # offset just past the directive's line

    @property
    def start(self) -> int:
        return self.tokens[0].start

    @property
    def end(self) -> int:
        return self.tokens[-1].end

    def truth(self, macros: dict[str, int]) -> bool | None:
        return None if self.expression is None else _truth(self.expression, macros)

    def admits(self, universe: tuple[Arch, ...]) -> ArchSet:
        # The verdicts depend on the tokens' texts only, and a header repeats its guards:
        # evaluating each once keeps a file of 200,000 guards linear in its guards, not in its arch checks.
        key = (self.directive, tuple(t.text for t in self.tokens), self.expression is None, tuple(universe))
        found = _ADMITS.get(key)
        if found is None:
            verdicts = {arch: self.truth(arch.macros()) for arch in universe}
            found = ArchSet(
                universe=tuple(universe),
                admitted=frozenset(arch for arch, verdict in verdicts.items() if verdict),
                unknown=frozenset(arch for arch, verdict in verdicts.items() if verdict is None),
            )
            if len(_ADMITS) >= 4096:
                _ADMITS.clear()
            _ADMITS[key] = found
        return found

    def unknown_names(self) -> list[str]:
        names = (t.text for t in self.tokens if t.kind == "ident" and t.text != "defined")
        return sorted({name for name in names if not is_arch_macro(name)})


def _one_line(text: str) -> str:
    """A condition for a one-line message: continuations and runs of whitespace become one space."""
    return " ".join(re.sub(r"\\[ \t]*\r?\n", " ", text).split())


def _has_syntax_error(tree: tree_sitter.Tree, start: int, end: int, near: tree_sitter.Node | None = None) -> bool:
    """Whether tree-sitter parsed the condition at `[start, end)` as an ERROR or with ERROR/MISSING inside.

    `near` is a node that may span the condition (its directive): the search for the
    node covering it starts there, not at the root, which in nested `#if`s costs the depth.
    """
    top = near if near is not None and near.start_byte <= start and end <= near.end_byte else tree.root_node
    covering = top.descendant_for_byte_range(start, end)
    if covering is None or covering.is_error:
        return True
    pending = [covering]
    while pending:
        node = pending.pop()
        if node.is_missing and start <= node.start_byte <= end:
            return True
        if node.is_error and node.start_byte < end and node.end_byte > start:
            return True
        if node.has_error:
            for child in node.children:
                if child.start_byte > end:
                    break
                if child.end_byte >= start:
                    pending.append(child)
    return False


def _starts_logical_line(source: bytes, offset: int) -> bool:
    """Whether only blanks (or a BOM) precede `offset` on its line, and no backslash continues the line before."""
    line_start = source.rfind(b"\n", 0, offset) + 1
    blanks = source[line_start:offset]
    if line_start == 0:
        blanks = blanks.removeprefix(b"\xef\xbb\xbf")
    if blanks.strip(b" \t\f\v"):
        return False
    before_newline = line_start - 2
    if before_newline >= 0 and source[before_newline] == ord("\r"):
        before_newline -= 1
    return before_newline < 0 or source[before_newline] != ord("\\")


def _read_guard(
    source: bytes,
    tree: tree_sitter.Tree,
    keyword: tree_sitter.Node,
    *,
    arch_macros_only: bool = False,
    directive: tree_sitter.Node | None = None,
) -> _Guard | None:
    """The guard of the directive that starts with `keyword` (`directive`: its node, when known).

    None when the keyword does not start a logical line (so it is no
    directive), when the directive has no condition, or, with
    `arch_macros_only`, when its condition names no arch macro.
    """
    if not _starts_logical_line(source, keyword.start_byte):
        return None
    tokens, stop = _scan_line(source, keyword.end_byte)
    if not tokens:
        return None
    if arch_macros_only and not any(t.kind == "ident" and is_arch_macro(t.text) for t in tokens):
        return None
    try:
        expression = _expression(keyword.type, tokens)
    except (_Malformed, RecursionError):
        expression = None
    # tree-sitter's C grammar has no `?:` in directives and reads `and`/`or`/`not`
    # as identifiers, so it reports an ERROR for those; there the parser above decides alone.
    parser_alone = any(t.kind == "punct" and (t.text == "?" or t.alternative) for t in tokens)
    if (
        expression is not None
        and not parser_alone
        and _has_syntax_error(tree, tokens[0].start, tokens[-1].end, directive)
    ):
        expression = None
    return _Guard(keyword.type, tokens, expression, stop)


def _expression(directive: str, tokens: list[_Token]) -> _Node:
    if directive in _CONDITION_DIRECTIVES:
        return _ExpressionParser(tokens).parse()
    if len(tokens) != 1 or tokens[0].kind != "ident":
        raise _Malformed(f"{directive} takes one macro name")
    name = tokens[0]
    defined = _Defined(name.start, name.end, name.text)
    if directive in _UNDEFINED_DIRECTIVES:
        return _Unary(name.start, name.end, "!", defined)
    return defined


_SNIPPET_HEADS = {
    "#if": b"#if ", "#elif": b"#if ",
    "#ifdef": b"#ifdef ", "#elifdef": b"#ifdef ",
    "#ifndef": b"#ifndef ", "#elifndef": b"#ifndef ",
}  # fmt: skip


@lru_cache(maxsize=1024)
def _snippet_guard(directive: str, condition: bytes, language: str) -> tuple[_Guard | None, int]:
    """Parse `condition` on its own as a `directive` line; return the guard and the condition's offset.

    The guard is None when the condition is not exactly one logical line.
    """
    head = _SNIPPET_HEADS[directive]
    snippet = head + condition + b"\n#endif\n"
    parser, _ = _grammar(language)
    tree = parser.parse(snippet)
    keywords = _keywords(tree, language)
    if not keywords or keywords[0].start_byte != 0:
        return None, len(head)
    guard = _read_guard(snippet, tree, keywords[0])
    if guard is None or guard.stop != len(head) + len(condition) + 1:
        return None, len(head)
    return guard, len(head)


def _enclosing_functions(tree: tree_sitter.Tree, nodes: list[tree_sitter.Node], language: str) -> list[str]:
    """For each of `nodes` (in source order), the name of the innermost function holding it, or "" at file scope.

    One sweep over the function definitions: walking up from each node instead
    costs the depth of the tree per step (tree-sitter finds a parent from the
    root), cubic in the depth of nested `#if`s.
    """
    functions = _function_query(language)
    found = tree_sitter.QueryCursor(functions).captures(tree.root_node).get("function", [])
    pending = sorted(found, key=lambda node: (node.start_byte, -node.end_byte))
    open_: list[tuple[int, tree_sitter.Node]] = []  # enclosing definitions, outermost first
    names = []
    index = 0
    for node in nodes:
        while index < len(pending) and pending[index].start_byte <= node.start_byte:
            definition = pending[index]
            while open_ and open_[-1][0] <= definition.start_byte:
                open_.pop()
            open_.append((definition.end_byte, definition))
            index += 1
        while open_ and open_[-1][0] <= node.start_byte:
            open_.pop()
        names.append(_function_name(open_[-1][1]) if open_ else "")
    return names


@cache
def _function_query(language: str) -> tree_sitter.Query:
    return tree_sitter.Query(tree_sitter.Language(_GRAMMARS[language]()), "(function_definition) @function")


def _function_name(node: tree_sitter.Node) -> str:
    """The name a function definition declares ("" when tree-sitter gives none)."""
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    name = declarator.child_by_field_name("declarator") if declarator is not None else None
    return name.text.decode("utf-8") if name is not None and name.text is not None else ""


def evaluate(condition_text: str, macros: dict[str, int]) -> bool | None:
    """Evaluate one `#if` condition with C preprocessor rules: True, False, or None for unknown.

    `macros` are the defined macros and their values. An arch macro that is
    not in `macros` is undefined (0); any other identifier is unknown. A
    condition that does not parse as one logical line is unknown.
    """
    guard, _ = _snippet_guard("#if", condition_text.encode("utf-8"), "cuda")
    return None if guard is None else guard.truth(macros)


def find(source: bytes, universe: tuple[Arch, ...] = DEFAULT_ARCHS, language: str = "cuda") -> list[Gate]:
    """Every `#if`/`#elif`/`#ifdef`-style directive that names an arch macro, with what it admits.

    `Gate.start`/`end` span the condition (the macro name for `#ifdef`);
    `Gate.line` is the directive's line. A condition tree-sitter cannot parse,
    or that names any macro besides the arch macros, is unknown where the
    answer depends on it. Raises SourceError when the source is not UTF-8.
    """
    decode(source)
    parser, _ = _grammar(language)
    if b"__CUDA_ARCH" not in source:
        return []
    _check_balanced(source)
    if len(source) > _CHUNK:
        return _find_in_chunks(source, universe, language)
    return _find_parsed(source, universe, language)


_CONDITIONAL_RE = re.compile(rb"^[ \t]*#[ \t]*(if|ifdef|ifndef|endif)\b", re.M)


def _check_balanced(source: bytes) -> None:
    """Raise SourceError when #if-style lines and #endif lines do not pair up (outside comments and strings)."""
    code = _OPAQUE_RE.sub(lambda m: b"\n" * m.group().count(b"\n") or b" ", source)
    code = re.sub(rb"\\[ \t]*\r?\n", b" ", code)  # a continued line is not a line start
    opened = closed = 0
    for match in _CONDITIONAL_RE.finditer(code):
        if match.group(1) == b"endif":
            closed += 1
        else:
            opened += 1
    if opened != closed:
        raise SourceError(f"unbalanced preprocessor conditionals: {opened} #if/#ifdef/#ifndef but {closed} #endif")


def _find_parsed(source: bytes, universe: tuple[Arch, ...], language: str) -> list[Gate]:
    """find() over one tree-sitter tree of the whole source."""
    parser, _ = _grammar(language)
    tree = parser.parse(source)
    gates = []
    keywords = []
    directives = _directives(tree, language)
    for keyword in _keywords(tree, language):
        guard = _read_guard(source, tree, keyword, arch_macros_only=True, directive=directives.get(keyword.start_byte))
        if guard is None:
            continue
        keywords.append(keyword)
        gates.append(
            Gate(
                kind=KIND,
                start=guard.start,
                end=guard.end,
                line=keyword.start_point.row + 1,
                text=source[guard.start : guard.end].decode("utf-8"),
                admits=guard.admits(universe),
                context="",
                detail={"directive": guard.directive, "language": language},
            )
        )
    functions = _enclosing_functions(tree, keywords, language)
    return [replace(gate, context=function) if function else gate for gate, function in zip(gates, functions)]


# Above this size a file is parsed in pieces cut at line ends outside comments
# and strings: a 50 MB generated header as one tree-sitter tree needs > 1 GB.
_CHUNK = 4 * 1024 * 1024
_OPAQUE_RE = re.compile(rb"""/\*.*?\*/|//(?:\\\r?\n|[^\n])*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""", re.DOTALL)


def _cuts(source: bytes) -> list[int]:
    """Offsets that start a line outside any comment or string literal, about _CHUNK apart."""
    cuts = [0]
    opaque = _OPAQUE_RE.finditer(source)
    current = next(opaque, None)
    want = _CHUNK
    while want < len(source):
        cut = source.find(b"\n", want)
        if cut < 0:
            break
        cut += 1
        while current is not None and current.end() <= cut:
            current = next(opaque, None)
        if current is not None and current.start() < cut:
            want = current.end()  # inside a comment or string: cut after it
            continue
        if source[max(0, cut - 3) : cut - 1].rstrip(b"\r").endswith(b"\\"):
            want = cut
            continue
        cuts.append(cut)
        want = cut + _CHUNK
    return cuts


def _find_in_chunks(source: bytes, universe: tuple[Arch, ...], language: str) -> list[Gate]:
    gates = []
    cuts = _cuts(source) + [len(source)]
    line = 0
    for start, end in zip(cuts, cuts[1:]):
        piece = source[start:end]
        if b"__CUDA_ARCH" in piece:
            for gate in _find_parsed(piece, universe, language):
                gates.append(replace(gate, start=gate.start + start, end=gate.end + start, line=gate.line + line))
        line += piece.count(b"\n")
    return gates


def widen(
    source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...] = DEFAULT_ARCHS
) -> list[Edit]:
    """The smallest edits after which `gate` also admits `targets` and every other arch stays as it was.

    Returns [] when the gate already admits every target. Raises CannotWiden
    when the gate is unknown on any arch, is an `#ifdef`-style guard, or no
    rewrite gives exactly the old archs plus the targets.
    """
    condition = source[gate.start : gate.end]
    if gate.kind != KIND or condition.decode("utf-8", "replace") != gate.text:
        raise CannotWiden(f"line {gate.line}: the source no longer has this guard; find the gates again")
    directive = gate.detail.get("directive", "#if")
    language = gate.detail.get("language", "cuda")
    scope = tuple(dict.fromkeys((*universe, *targets)))
    guard, head = _snippet_guard(directive, condition, language)
    before = guard.admits(scope) if guard is not None else None
    if before is not None and all(before.admits(target) for target in targets):
        return []
    if before is None or before.unknown or gate.admits.unknown:
        raise CannotWiden(_why_unknown(gate, guard, before))
    if directive not in _CONDITION_DIRECTIVES:
        raise CannotWiden(
            f"line {gate.line}: `{directive} {gate.text}` names a single macro; rewrite it as #if to widen it"
        )
    expected = before.admitted | frozenset(targets)
    candidates = (
        _extend_chain(guard, before, targets, _Lines(source, gate.start - head)),
        _drop_conjuncts(guard, before, targets),
        _add_disjunct(guard, condition, before, targets, scope),
    )
    for edits in candidates:
        if not edits:
            continue
        in_condition = [Edit(e.start - head, e.end - head, e.text) for e in edits]
        rewritten, _ = _snippet_guard(directive, apply_edits(condition, in_condition), language)
        if rewritten is None:
            continue
        after = rewritten.admits(scope)
        if not after.unknown and after.admitted == expected:
            return [Edit(e.start + gate.start, e.end + gate.start, e.text) for e in in_condition]
    wanted = ",".join(target.name for target in targets)
    raise CannotWiden(
        f"line {gate.line}: no rewrite of `{_one_line(gate.text)}` admits exactly its archs "
        f"plus {wanted}; widen it by hand"
    )


def _why_unknown(gate: Gate, guard: _Guard | None, before: ArchSet | None) -> str:
    condition = _one_line(gate.text)
    if guard is None or guard.expression is None:
        return f"line {gate.line}: cannot parse the condition `{condition}`; widen it by hand"
    names = guard.unknown_names()
    if names:
        return (
            f"line {gate.line}: `{condition}` depends on {', '.join(names)}, "
            "which codemod cannot evaluate; widen it by hand"
        )
    if not before.unknown:
        return f"line {gate.line}: tree-sitter cannot parse `{condition}` where it stands; widen it by hand"
    return f"line {gate.line}: cannot evaluate `{condition}` on every arch; widen it by hand"


def _disjuncts(node: _Node) -> list[_Node]:
    """The operands of a top-level `a || b || c` chain, left to right."""
    if isinstance(node, _Binary) and node.op == "||":
        return [*_disjuncts(node.left), node.right]
    return [node]


def _equality(node: _Node) -> _Number | None:
    """The number of `__CUDA_ARCH__ == N` (or `N == __CUDA_ARCH__`, in parentheses or not), else None."""
    while isinstance(node, _Group):
        node = node.inner
    if not (isinstance(node, _Binary) and node.op == "=="):
        return None
    for macro, number in ((node.left, node.right), (node.right, node.left)):
        if isinstance(macro, _Macro) and macro.name == "__CUDA_ARCH__" and isinstance(number, _Number):
            return number
    return None


@lru_cache(maxsize=8)
def _file_style(source: bytes) -> tuple[int, bool, bytes, bytes, bytes]:
    """Once per file (bytes cache their hash): column limit, how long `#if` lines continue, line ending."""
    # The file's column limit: the length three of its lines reach, so that one or two stray long
    # lines (a URL, a clang-format-off block) do not count; xqa/utils.cuh has one 102-column line
    # and upstream still breaks its #elif at 100 (54101e953). A file of short lines may use 80.
    lengths = sorted((len(line.rstrip(b"\r")) for line in source.split(b"\n")), reverse=True)
    longest = max(80, lengths[2] if len(lengths) > 2 else 0)
    match = _Lines._CONTINUED.search(source)
    return (
        longest,
        bool(match and match.group("lead")),
        match.group("before") if match and match.group("before") else b" ",
        match.group("indent") if match else b"    ",
        b"\r\n" if b"\r\n" in source else b"\n",
    )


class _Lines:
    """The file around a condition: its longest line, and how it continues long `#if` lines."""

    _CONTINUED = re.compile(rb"^[ \t]*#[ \t]*(?:if|elif)\b.*?(?P<before>[ \t]*)\\\r?\n(?P<indent>[ \t]*)(?P<lead>\|\||\bor\b)?", re.M)

    def __init__(self, source: bytes, shift: int) -> None:
        self.source = source
        self.shift = shift  # add to an offset in the snippet to get one in the source
        self.longest, self.operator_first, self.before_backslash, self.indent, self.eol = _file_style(source)

    def column(self, offset: int) -> tuple[int, int]:
        """(length of the line holding `offset` in the source, its column) for a snippet offset."""
        at = offset + self.shift
        start = self.source.rfind(b"\n", 0, at) + 1
        end = self.source.find(b"\n", at)
        end = len(self.source) if end < 0 else end
        return len(self.source[start:end].rstrip(b"\r")), at - start


def _extend_chain(guard: _Guard, before: ArchSet, targets: tuple[Arch, ...], lines: _Lines) -> list[Edit]:
    """`A == 860 || A == 890 || A == 1200` gains `|| A == 1210`: one more equality per missing value, where it sorts.

    Only for a condition that is such a chain (two equalities or more, in
    parentheses or not). Each new term copies its neighbour's text with the
    number changed, joined by the chain's own operator (`||` or `or`). A line
    that would grow past the file's column limit (the length three of its
    lines reach, 80 at least) is continued with a backslash, as the file
    continues its other long `#if` lines.
    """
    top = guard.expression
    while isinstance(top, _Group):
        top = top.inner
    terms = _disjuncts(top)
    numbers = [_equality(term) for term in terms]
    if len(terms) < 2 or any(number is None for number in numbers):
        return []
    values = [number.value[0] for number in numbers]
    wanted = sorted({target.cuda_arch for target in targets if not before.admits(target)} - set(values))
    if not wanted:
        return []
    source = lines.source
    word = any(t.alternative and t.text == "||" for t in guard.tokens)
    operator_text = b"or" if word else b"||"
    inserts: dict[int, list[int]] = {}  # index of the term to insert after (-1: before the first) -> values
    for value in wanted:
        after = max((i for i, listed in enumerate(values) if listed < value), default=-1)
        inserts.setdefault(after, []).append(value)
    edits = []
    for after, added in inserts.items():
        reference = terms[max(after, 0)]
        number = numbers[max(after, 0)]
        ref_start, ref_end = reference.start + lines.shift, reference.end + lines.shift
        texts = [
            source[ref_start : number.start + lines.shift] + str(value).encode() + source[number.end + lines.shift : ref_end]
            for value in added
        ]
        if after >= 0:
            at = reference.end
            edits.append(Edit(at, at, _joined(lines, at, operator_text, texts, prefix=True)))
        else:
            at = reference.start
            edits.append(Edit(at, at, _joined(lines, at, operator_text, texts, prefix=False)))
    return edits


def _joined(lines: _Lines, at: int, operator_text: bytes, texts: list[bytes], prefix: bool) -> bytes:
    """`|| t1 || t2` to insert at snippet offset `at` (or `t1 || t2 || ` before a term), continued where too long."""
    length, column = lines.column(at)
    out = b""
    width = column  # where the text being written starts on its line
    rest = length - column  # what follows the insertion point on the original line
    pieces = [(b" " + operator_text + b" ", text) for text in texts] if prefix else [(b"", text + b" " + operator_text + b" ") for text in texts]
    for joiner, text in pieces:
        piece = joiner + text
        if width + len(piece) + rest > lines.longest and width > 0:
            if lines.operator_first:
                out += lines.before_backslash + b"\\" + lines.eol + lines.indent + joiner.lstrip() + text
                width = len(lines.indent) + len(joiner.lstrip() + text)
            else:
                out += joiner.rstrip() + lines.before_backslash + b"\\" + lines.eol + lines.indent + text
                width = len(lines.indent) + len(text)
            continue
        out += piece
        width += len(piece)
    return out


def _conjuncts(node: _Node) -> list[_Node]:
    """The operands of a top-level `a && b && c` chain, left to right."""
    if isinstance(node, _Binary) and node.op == "&&":
        return [*_conjuncts(node.left), node.right]
    return [node]


def _drop_conjuncts(guard: _Guard, before: ArchSet, targets: tuple[Arch, ...]) -> list[Edit]:
    """Delete the conjuncts that are false on a target, each with one adjacent `&&`.

    A conjunct after a kept one goes with the operator and whitespace before
    it; a leading conjunct goes with the operator and whitespace after it.
    Parentheses around the whole condition stay.
    """
    top = guard.expression
    while isinstance(top, _Group):
        top = top.inner
    conjuncts = _conjuncts(top)
    missing = [target for target in targets if not before.admits(target)]
    dropped = {
        index
        for index, conjunct in enumerate(conjuncts)
        if any(_truth(conjunct, target.macros()) is False for target in missing)
    }
    if not dropped or len(dropped) == len(conjuncts):
        return []
    edits = []
    kept_before = False
    for index, conjunct in enumerate(conjuncts):
        if index not in dropped:
            kept_before = True
        elif kept_before:
            edits.append(Edit(conjuncts[index - 1].end, conjunct.end, b""))
        else:
            edits.append(Edit(conjunct.start, conjuncts[index + 1].start, b""))
    return edits


def _add_disjunct(
    guard: _Guard, condition: bytes, before: ArchSet, targets: tuple[Arch, ...], scope: tuple[Arch, ...]
) -> list[Edit]:
    """Append `|| <targets>`, parenthesizing the condition first when `||` would bind it wrongly."""
    wanted = [target for target in dict.fromkeys(targets) if not before.admits(target)]
    blockers = [arch for arch in scope if not before.admits(arch) and arch not in targets]
    disjunct = " || ".join(_disjunct_terms(wanted, blockers))
    words = any(t.alternative for t in guard.tokens)  # the file's own spelling: `or`, not `||`
    if words:
        disjunct = disjunct.replace("&&", "and").replace("||", "or").replace("!defined", "not defined")
    joiner = b" or " if words else b" || "
    top = guard.expression
    # `a && b || c` is right but reads wrong (gcc -Wparentheses); `a ? b : c || d` is wrong.
    # The parenthesized form is one edit over the whole condition, so that the
    # rewritten gate starts where the old one did (an insertion at its first
    # byte would read as an edit before the gate).
    if isinstance(top, _Conditional) or (isinstance(top, _Binary) and top.op == "&&"):
        return [Edit(top.start, top.end, b"(" + condition + b")" + joiner + disjunct.encode())]
    return [Edit(top.end, top.end, joiner + disjunct.encode())]


_VARIANT_TESTS = {
    "": "!defined(__CUDA_ARCH_FAMILY_SPECIFIC__)",
    "a": "defined(__CUDA_ARCH_SPECIFIC__)",
    "f": "defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && !defined(__CUDA_ARCH_SPECIFIC__)",
}


def _disjunct_terms(wanted: list[Arch], blockers: list[Arch]) -> list[str]:
    """`__CUDA_ARCH__` ranges that hold every wanted arch and no blocker.

    When a blocker shares a `__CUDA_ARCH__` value with a wanted arch (sm_120
    wanted, sm_120a not), each range also tests which variant the target is.
    """
    blocked = {arch.cuda_arch for arch in blockers}
    if not blocked & {arch.cuda_arch for arch in wanted}:
        return [_parenthesized(term) for term in _arch_ranges(wanted, blocked)]
    terms = []
    for variant, test in _VARIANT_TESTS.items():
        group = [arch for arch in wanted if arch.variant == variant]
        if group:
            group_blocked = {arch.cuda_arch for arch in blockers if arch.variant == variant}
            terms += [f"({test} && {term})" for term in _arch_ranges(group, group_blocked)]
    return terms


def _arch_ranges(wanted: list[Arch], blocked: set[int]) -> list[str]:
    """One test per run of wanted values with no blocked value between them.

    A run reaches to the next major version when nothing blocked lies there
    (`>= 1200 && < 1300`), else to its last value (`== 1100`, `>= 1000 && <= 1030`).
    """
    values = sorted({arch.cuda_arch for arch in wanted})
    runs = [[values[0]]]
    for value in values[1:]:
        if any(runs[-1][-1] < b < value for b in blocked):
            runs.append([value])
        else:
            runs[-1].append(value)
    terms = []
    for run in runs:
        low, high = run[0], run[-1]
        next_major = (high // 100 + 1) * 100
        if not any(low <= b < next_major for b in blocked):
            terms.append(f"__CUDA_ARCH__ >= {low} && __CUDA_ARCH__ < {next_major}")
        elif low == high:
            terms.append(f"__CUDA_ARCH__ == {low}")
        else:
            terms.append(f"__CUDA_ARCH__ >= {low} && __CUDA_ARCH__ <= {high}")
    return terms


def _parenthesized(term: str) -> str:
    return f"({term})" if "&&" in term else term



@lru_cache(maxsize=4096)
def admits(text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> ArchSet:
    """The archs a guard condition, given as text, admits (device pass of each arch)."""
    guard, _ = _snippet_guard("#if", text.encode("utf-8"), "cuda")
    if guard is None:
        return ArchSet(universe, frozenset(), frozenset(universe))
    return guard.admits(universe)
