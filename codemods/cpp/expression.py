"""The tri-state `#if` expression: parsed from a directive's tokens, evaluated with C preprocessor rules.

`parse(tokens)` gives the expression tree (nodes keep their byte offsets, so
a gate can rewrite one operand); `truth(node, macros)` is True, False or None
for unknown. An arch macro not in `macros` is undefined (0); any other
identifier not in `macros` is unknown, and so is everything that depends on
it, except where a known operand settles `&&`/`||`, as unifdef does.
Arithmetic is 64-bit, signed or unsigned as in C.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

from codemods.core.arch import is_arch_macro
from codemods.cpp.lexer import Token

_BITS = 64
_MASK = (1 << _BITS) - 1

_Value = tuple[int, bool]  # the number, and whether its type is unsigned


class Malformed(Exception):
    """The tokens are not a preprocessor expression."""


class Invalid(Exception):
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
class Number:
    start: int
    end: int
    value: _Value

    def evaluate(self, macros: dict[str, int]) -> _Value | None:
        return self.value

    def unsigned(self, macros: dict[str, int]) -> bool | None:
        return self.value[1]


@dataclass(frozen=True, slots=True)
class Macro:
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
class Defined:
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
class Opaque:
    """A function-like macro call or a character literal: never evaluated."""

    start: int
    end: int

    def evaluate(self, macros: dict[str, int]) -> _Value | None:
        return None

    def unsigned(self, macros: dict[str, int]) -> bool | None:
        return None


@dataclass(frozen=True, slots=True)
class Group:
    """A parenthesized expression; `start`/`end` include the parentheses."""

    start: int
    end: int
    inner: Node

    def evaluate(self, macros: dict[str, int]) -> _Value | None:
        return self.inner.evaluate(macros)

    def unsigned(self, macros: dict[str, int]) -> bool | None:
        return self.inner.unsigned(macros)


@dataclass(frozen=True, slots=True)
class Unary:
    start: int
    end: int
    op: str
    operand: Node

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


COMPARISONS = {
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
        raise Invalid("division by zero")
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
class Binary:
    start: int
    end: int
    op: str
    left: Node
    right: Node

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
        if self.op in COMPARISONS:
            return _boolean(COMPARISONS[self.op](a, b))
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
        if self.op in COMPARISONS or self.op in ("&&", "||"):
            return False
        left = self.left.unsigned(macros)
        if self.op in ("<<", ">>"):
            return left
        right = self.right.unsigned(macros)
        return None if left is None or right is None else left or right


@dataclass(frozen=True, slots=True)
class Conditional:
    start: int
    end: int
    condition: Node
    then: Node
    otherwise: Node

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


Node = Number | Macro | Defined | Opaque | Group | Unary | Binary | Conditional

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


def integer(text: str) -> _Value | None:
    """A C integer literal's value and whether its type is unsigned; None when `text` is none or needs over 64 bits."""
    match = _INTEGER_RE.fullmatch(text)
    if match is None:
        return None
    if match["hex"]:
        number = int(match["hex"], 16)
    elif match["bin"]:
        number = int(match["bin"], 2)
    elif match["oct"]:
        number = int(match["oct"], 8)
    else:
        number = int(match["dec"])
    if number > _MASK:
        return None
    return number, "u" in match["suffix"].lower() or number >= 1 << (_BITS - 1)


def _integer(token: Token) -> Number:
    value = integer(token.text)
    if value is None:
        raise Malformed(f"{token.text!r} is not an integer literal of 64 bits")
    return Number(token.start, token.end, value)


class _Parser:
    """Precedence climbing over the tokens of one `#if` condition."""

    def __init__(self, tokens: tuple[Token, ...] | list[Token]):
        self.tokens = tokens
        self.pos = 0

    def parse(self) -> Node:
        node = self._conditional()
        if self.pos != len(self.tokens):
            raise Malformed(f"unexpected {self.tokens[self.pos].text!r}")
        return node

    def _peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _peek_punct(self) -> str | None:
        token = self._peek()
        return token.text if token is not None and token.kind == "punct" else None

    def _next(self) -> Token:
        token = self._peek()
        if token is None:
            raise Malformed("the condition ends early")
        self.pos += 1
        return token

    def _expect(self, punct: str) -> Token:
        token = self._next()
        if token.kind != "punct" or token.text != punct:
            raise Malformed(f"expected {punct!r}, found {token.text!r}")
        return token

    def _conditional(self) -> Node:
        condition = self._binary(1)
        if self._peek_punct() != "?":
            return condition
        self._next()
        then = self._conditional()
        self._expect(":")
        otherwise = self._conditional()
        return Conditional(condition.start, otherwise.end, condition, then, otherwise)

    def _binary(self, min_precedence: int) -> Node:
        left = self._unary()
        while (op := self._peek_punct()) in _PRECEDENCE and _PRECEDENCE[op] >= min_precedence:
            self._next()
            right = self._binary(_PRECEDENCE[op] + 1)
            left = Binary(left.start, right.end, op, left, right)
        return left

    def _unary(self) -> Node:
        token = self._next()
        if token.kind == "punct" and token.text in ("!", "~", "-", "+"):
            operand = self._unary()
            return Unary(token.start, operand.end, token.text, operand)
        if token.kind == "punct" and token.text == "(":
            inner = self._conditional()
            close = self._expect(")")
            return Group(token.start, close.end, inner)
        if token.kind == "number":
            return _integer(token)
        if token.kind == "char":
            return Opaque(token.start, token.end)
        if token.kind == "ident" and token.text == "defined":
            return self._defined(token)
        if token.kind == "ident" and self._peek_punct() == "(":
            return self._call(token)
        if token.kind == "ident":
            return Macro(token.start, token.end, token.text)
        raise Malformed(f"unexpected {token.text!r}")

    def _defined(self, keyword: Token) -> Defined:
        parenthesized = self._peek_punct() == "("
        if parenthesized:
            self._next()
        name = self._next()
        if name.kind != "ident":
            raise Malformed("defined needs a macro name")
        end = self._expect(")").end if parenthesized else name.end
        return Defined(keyword.start, end, name.text)

    def _call(self, name: Token) -> Opaque:
        depth = 0
        while True:
            token = self._next()
            if token.kind == "punct" and token.text == "(":
                depth += 1
            elif token.kind == "punct" and token.text == ")":
                depth -= 1
                if depth == 0:
                    return Opaque(name.start, token.end)


def parse(tokens: tuple[Token, ...] | list[Token]) -> Node:
    """The expression the tokens of one `#if` condition spell; raises Malformed when they spell none."""
    return _Parser(tokens).parse()


def truth(node: Node, macros: dict[str, int]) -> bool | None:
    """The node's value with `macros` defined: True, False, or None (unknown, or an error such as 1 / 0)."""
    try:
        value = node.evaluate(macros)
    except (Invalid, RecursionError):
        return None
    return None if value is None else value[0] != 0

