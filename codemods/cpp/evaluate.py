"""The one tri-state `#if` evaluator: a directive's condition is true, false or unknown on each arch.

A condition is read from the bytes of its directive line (`read_guard`) or
from its text (`evaluate`, `admits`) and evaluated as the C preprocessor does
in nvcc's device pass of each arch, with `Arch.macros()` defined. Unknown
(another macro decides, or the condition does not parse) is an answer of its
own, never guessed, as in unifdef. tree-sitter has the last word on whether
a condition parses where it stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import tree_sitter

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet, is_arch_macro
from codemods.cpp import syntax
from codemods.cpp.expression import Defined, Malformed, Node, Unary, parse, truth
from codemods.cpp.lexer import Token, scan_line, starts_logical_line

CONDITION_DIRECTIVES = ("#if", "#elif")
DEFINED_DIRECTIVES = ("#ifdef", "#elifdef")
UNDEFINED_DIRECTIVES = ("#ifndef", "#elifndef")
DIRECTIVES = CONDITION_DIRECTIVES + DEFINED_DIRECTIVES + UNDEFINED_DIRECTIVES

_ADMITS: dict[tuple, ArchSet] = {}


@dataclass(frozen=True)
class Guard:
    """The condition of one directive: its tokens and, when they parse, its expression."""

    directive: str  # "#if", "#elif", "#ifdef" ...
    tokens: tuple[Token, ...]
    expression: Node | None  # None: the condition does not parse, so every arch is unknown
    stop: int  # offset just past the directive's line

    @property
    def start(self) -> int:
        return self.tokens[0].start

    @property
    def end(self) -> int:
        return self.tokens[-1].end

    def truth(self, macros: dict[str, int]) -> bool | None:
        return None if self.expression is None else truth(self.expression, macros)

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
        """The macros other than arch macros the condition names: what makes it unknown."""
        names = (t.text for t in self.tokens if t.kind == "ident" and t.text != "defined")
        return sorted({name for name in names if not is_arch_macro(name)})


def read_guard(
    source: bytes,
    tree: tree_sitter.Tree,
    keyword: tree_sitter.Node,
    *,
    arch_macros_only: bool = False,
    directive: tree_sitter.Node | None = None,
) -> Guard | None:
    """The guard of the directive that starts with `keyword` (`directive`: its node, when known).

    None when the keyword does not start a logical line (so it is no
    directive), when the directive has no condition, or, with
    `arch_macros_only`, when its condition names no arch macro.
    """
    if not starts_logical_line(source, keyword.start_byte):
        return None
    tokens, stop = scan_line(source, keyword.end_byte)
    if not tokens:
        return None
    if arch_macros_only and not any(t.kind == "ident" and is_arch_macro(t.text) for t in tokens):
        return None
    try:
        expression = _expression(keyword.type, tokens)
    except (Malformed, RecursionError):
        expression = None
    # tree-sitter's C grammar has no `?:` in directives and reads `and`/`or`/`not`
    # as identifiers, so it reports an ERROR for those; there the parser above decides alone.
    parser_alone = any(t.kind == "punct" and (t.text == "?" or t.alternative) for t in tokens)
    if (
        expression is not None
        and not parser_alone
        and syntax.has_syntax_error(tree, tokens[0].start, tokens[-1].end, directive)
    ):
        expression = None
    return Guard(keyword.type, tuple(tokens), expression, stop)


def _expression(directive: str, tokens: list[Token]) -> Node:
    if directive in CONDITION_DIRECTIVES:
        return parse(tokens)
    if len(tokens) != 1 or tokens[0].kind != "ident":
        raise Malformed(f"{directive} takes one macro name")
    name = tokens[0]
    defined = Defined(name.start, name.end, name.text)
    if directive in UNDEFINED_DIRECTIVES:
        return Unary(name.start, name.end, "!", defined)
    return defined


# The conditional directives' keywords and nodes, one query: single-node patterns (one with a child pattern keeps a
# state open per enclosing #if: quadratic)
_CONDITIONALS = (
    "[" + " ".join(f'"{directive}"' for directive in DIRECTIVES) + "] @keyword\n"
    "[(preproc_if) (preproc_elif) (preproc_ifdef) (preproc_elifdef)] @directive"
)


def conditionals(tree: tree_sitter.Tree, language: str) -> tuple[list[tree_sitter.Node], dict[int, tree_sitter.Node]]:
    """The keywords (`#if`, `#elifndef` ...) of every conditional directive in `tree`, in source order, and the
    directive nodes (`preproc_if` ...) by offset (a directive starts where its keyword does; a keyword tree-sitter
    could not place in a directive, inside an ERROR, has none)."""
    found = syntax.captures(tree, language, _CONDITIONALS)
    keywords = sorted(found.get("keyword", []), key=lambda node: node.start_byte)
    return keywords, {node.start_byte: node for node in found.get("directive", [])}


_SNIPPET_HEADS = {
    "#if": b"#if ", "#elif": b"#if ",
    "#ifdef": b"#ifdef ", "#elifdef": b"#ifdef ",
    "#ifndef": b"#ifndef ", "#elifndef": b"#ifndef ",
}  # fmt: skip


@lru_cache(maxsize=1024)
def snippet_guard(directive: str, condition: bytes, language: str) -> tuple[Guard | None, int]:
    """Parse `condition` on its own as a `directive` line; return the guard and the condition's offset.

    The guard is None when the condition is not exactly one logical line.
    """
    head = _SNIPPET_HEADS[directive]
    snippet = head + condition + b"\n#endif\n"
    tree = syntax.parser(language).parse(snippet)
    keywords = conditionals(tree, language)[0]
    if not keywords or keywords[0].start_byte != 0:
        return None, len(head)
    guard = read_guard(snippet, tree, keywords[0])
    if guard is None or guard.stop != len(head) + len(condition) + 1:
        return None, len(head)
    return guard, len(head)


def evaluate(condition_text: str, macros: dict[str, int]) -> bool | None:
    """Evaluate one `#if` condition with C preprocessor rules: True, False, or None for unknown.

    `macros` are the defined macros and their values. An arch macro that is
    not in `macros` is undefined (0); any other identifier is unknown. A
    condition that does not parse as one logical line is unknown.
    """
    guard, _ = snippet_guard("#if", condition_text.encode("utf-8"), "cuda")
    return None if guard is None else guard.truth(macros)


@lru_cache(maxsize=4096)
def admits(text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> ArchSet:
    """The archs a guard condition, given as text, admits (device pass of each arch)."""
    guard, _ = snippet_guard("#if", text.encode("utf-8"), "cuda")
    if guard is None:
        return ArchSet(universe, frozenset(), frozenset(universe))
    return guard.admits(universe)
