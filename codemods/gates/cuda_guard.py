"""CUDA preprocessor guards: `#if` conditions that name an arch macro.

A gate of this kind is the condition of an `#if` or `#elif` (or the name after
`#ifdef`, `#ifndef`, `#elifdef`, `#elifndef`) that names `__CUDA_ARCH__`,
`__CUDA_ARCH_SPECIFIC__`, `__CUDA_ARCH_FAMILY_SPECIFIC__` or a
`__CUDA_ARCH_FEAT_SM<NN>_ALL` macro. Tree-sitter finds the directives, so a
guard inside a comment or a string literal is not a gate. Each condition is
evaluated as the C preprocessor does in nvcc's device pass for every arch of
the universe, with `Arch.macros()` defined: admitted, excluded, or unknown
when the answer depends on any other macro or the condition does not parse.

`widen` rewrites only the bytes of one condition, in one of three ways:

- an equality chain (`__CUDA_ARCH__ == 900`, or several joined by `||`),
  alone or in parentheses behind `defined(__CUDA_ARCH__) &&`, gains one
  equality per target value, in its own style, never a range
  (FlashInfer 5854494a0, ef687e900); a list of feature macros
  (`defined(__CUDA_ARCH_FEAT_SM100_ALL) || ...`) gains one per `a` target;
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

import re
import sys
from collections.abc import Callable
from copy import copy
from dataclasses import replace
from functools import lru_cache


from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.cpp import syntax
from codemods.cpp.evaluate import (
    CONDITION_DIRECTIVES,
    Guard,
    admits,
    conditionals,
    read_guard,
    snippet_guard,
)
from codemods.cpp.expression import (
    Binary,
    Conditional,
    Defined,
    Group,
    Macro,
    Node,
    Number,
    truth,
)
from codemods.cpp.lexer import OPAQUE_RE, one_line
from codemods.gates import CannotWiden, Edit, Gate, SourceError, apply_edits, decode
from codemods.gates._cpp_wrap import column_limit

KIND = "cuda_guard"

__all__ = ["KIND", "admits", "find", "widen"]  # admits: what a guard given as text admits, the evaluator's answer


def find(source: bytes, universe: tuple[Arch, ...] = DEFAULT_ARCHS, language: str = "cuda") -> list[Gate]:
    """Every `#if`/`#elif`/`#ifdef`-style directive that names an arch macro, with what it admits.

    `Gate.start`/`end` span the condition (the macro name for `#ifdef`);
    `Gate.line` is the directive's line. A condition tree-sitter cannot parse,
    or that names any macro besides the arch macros, is unknown where the
    answer depends on it. Raises SourceError when the source is not UTF-8.
    """
    decode(source)
    syntax.parser(language)  # an unknown language is an error whatever the source holds
    if b"__CUDA_ARCH" not in source:
        return []
    _check_balanced(source)
    if len(source) > _CHUNK:
        return _find_in_chunks(source, universe, language)
    return _find_parsed(source, universe, language)


_CONDITIONAL_RE = re.compile(rb"^[ \t]*#[ \t]*(if|ifdef|ifndef|endif)\b", re.M)


def _check_balanced(source: bytes) -> None:
    """Raise SourceError when #if-style lines and #endif lines do not pair up (outside comments and strings)."""
    code = OPAQUE_RE.sub(lambda m: b"\n" * m.group().count(b"\n") or b" ", source)
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
    tree = syntax.parser(language).parse(source)
    gates = []
    keywords = []
    keywords_found, directives = conditionals(tree, language)
    for keyword in keywords_found:
        guard = read_guard(source, tree, keyword, arch_macros_only=True, directive=directives.get(keyword.start_byte))
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
    functions = syntax.enclosing_functions(tree, keywords, language)
    return [replace(gate, context=function) if function else gate for gate, function in zip(gates, functions)]


# Above this size a file is parsed in pieces cut at line ends outside comments
# and strings: a 50 MB generated header as one tree-sitter tree needs > 1 GB.
_CHUNK = 4 * 1024 * 1024


def _cuts(source: bytes) -> list[int]:
    """Offsets that start a line outside any comment or string literal, about _CHUNK apart."""
    cuts = [0]
    opaque = OPAQUE_RE.finditer(source)
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
    guard, head = snippet_guard(directive, condition, language)
    before = guard.admits(scope) if guard is not None else None
    if before is not None and all(before.admits(target) for target in targets):
        return []
    if guard is None or before is None or before.unknown or gate.admits.unknown:
        raise CannotWiden(_why_unknown(gate, guard, before))
    if directive not in CONDITION_DIRECTIVES:
        raise CannotWiden(
            f"line {gate.line}: `{directive} {gate.text}` names a single macro; rewrite it as #if to widen it"
        )
    expected = before.admitted | frozenset(targets)
    lines = _Lines(source, gate.start - head)
    candidates = (
        _extend_chain(guard, before, targets, lines),
        _extend_features(guard, before, targets, lines),
        _drop_conjuncts(guard, before, targets),
        _add_disjunct(guard, condition, before, targets, scope),
    )
    for edits in candidates:
        if not edits:
            continue
        in_condition = [Edit(e.start - head, e.end - head, e.text) for e in edits]
        rewritten, _ = snippet_guard(directive, apply_edits(condition, in_condition), language)
        if rewritten is None:
            continue
        after = rewritten.admits(scope)
        if not after.unknown and after.admitted == expected:
            return _aligned(source, gate, [Edit(e.start + gate.start, e.end + gate.start, e.text) for e in in_condition])
    wanted = ",".join(target.name for target in targets)
    raise CannotWiden(
        f"line {gate.line}: no rewrite of `{one_line(gate.text)}` admits exactly its archs "
        f"plus {wanted}; widen it by hand"
    )


def _why_unknown(gate: Gate, guard: Guard | None, before: ArchSet | None) -> str:
    condition = one_line(gate.text)
    if guard is None or guard.expression is None:
        return f"line {gate.line}: cannot parse the condition `{condition}`; widen it by hand"
    names = guard.unknown_names()
    if names:
        return (
            f"line {gate.line}: `{condition}` depends on {', '.join(names)}, "
            "which codemod cannot evaluate; widen it by hand"
        )
    if before is not None and not before.unknown:
        return f"line {gate.line}: tree-sitter cannot parse `{condition}` where it stands; widen it by hand"
    return f"line {gate.line}: cannot evaluate `{condition}` on every arch; widen it by hand"


def _disjuncts(node: Node) -> list[Node]:
    """The operands of a top-level `a || b || c` chain, left to right."""
    if isinstance(node, Binary) and node.op == "||":
        return [*_disjuncts(node.left), node.right]
    return [node]


def _comparison(node: Node) -> tuple[str, Number] | None:
    """The operator and number of `__CUDA_ARCH__ <op> N` (or `N <op> __CUDA_ARCH__`, in parentheses or not)."""
    while isinstance(node, Group):
        node = node.inner
    if not (isinstance(node, Binary) and node.op in ("==", "<", "<=", ">", ">=")):
        return None
    for macro, number in ((node.left, node.right), (node.right, node.left)):
        if isinstance(macro, Macro) and macro.name == "__CUDA_ARCH__" and isinstance(number, Number):
            return node.op, number
    return None


def _arch_chain(node: Node | None) -> tuple[list[Node], Group | None] | None:
    """The terms of the condition's equality chain, with the parentheses that hold it when it is an `&&` operand:
    the whole condition (`A == 900 || A == 1000`), or the one parenthesized operand of a top-level `&&` that is such
    a chain (`defined(__CUDA_ARCH__) && (A == 1000 || A == 1030)`, FlashInfer's and SGLang's usual shape). Its terms
    compare `__CUDA_ARCH__` with a number, one at least with `==` (`A == 1030 || A >= 1200` is one too)."""

    def chain(inner: Node) -> list[Node] | None:
        terms = _disjuncts(inner)
        found = [_comparison(term) for term in terms]
        if any(c is None for c in found) or not any(c and c[0] == "==" for c in found):
            return None
        return terms

    while isinstance(node, Group):
        node = node.inner
    if node is None:
        return None
    terms = chain(node)
    if terms is not None:
        return terms, None
    held = []
    for conjunct in _conjuncts(node) if isinstance(node, Binary) and node.op == "&&" else []:
        group = None
        while isinstance(conjunct, Group):
            group, conjunct = conjunct, conjunct.inner
        terms = chain(conjunct)
        if group is not None and terms is not None:  # unparenthesized, `a && A == 900 || ...` would read wrong
            held.append((terms, group))
    return held[0] if len(held) == 1 else None


def _after_opening(opening: int, lines: _Lines) -> bytes:
    """The indent of a continuation line inside the `(` at snippet offset `opening`: one column past it, as
    clang-format aligns it."""
    opening += lines.shift
    return b" " * (opening - (lines.source.rfind(b"\n", 0, opening) + 1) + 1)


@lru_cache(maxsize=8)
def _file_style(source: bytes) -> tuple[int, bool, bytes, bytes, bytes, bool]:
    """Once per file (bytes cache their hash): column limit, how long `#if` lines continue, line ending, and
    whether the file aligns their `\\`s clang-format's way (its first continued `#if` does, `_left_aligned`)."""
    match = _Lines._CONTINUED.search(source)
    aligned = False
    if match:
        end = match.start()
        while (end := source.find(b"\n", end) + 1) and source[max(0, end - 3) : end - 1].rstrip(b"\r").endswith(b"\\"):
            pass
        aligned = _left_aligned(source[match.start() : end or len(source)])
    return (
        column_limit(source),
        bool(match and match.group("lead")),
        # padding up to an aligned `\\` is no style of its own: one `\\` of a line goes one space past it
        match.group("before") if match and match.group("before") and not aligned else b" ",
        match.group("indent") if match else b"    ",
        b"\r\n" if b"\r\n" in source else b"\n",
        aligned,
    )


class _Lines:
    """The file around a condition: its longest line, and how it continues long `#if` lines."""

    _CONTINUED = re.compile(rb"^[ \t]*#[ \t]*(?:if|elif)\b.*?(?P<before>[ \t]*)\\\r?\n(?P<indent>[ \t]*)(?P<lead>\|\||\bor\b)?", re.M)

    def __init__(self, source: bytes, shift: int) -> None:
        self.source = source
        self.shift = shift  # add to an offset in the snippet to get one in the source
        self.longest, self.operator_first, self.before_backslash, self.indent, self.eol, self.aligned = _file_style(source)

    def column(self, offset: int) -> tuple[int, int]:
        """(length of the line holding `offset` in the source, its column) for a snippet offset."""
        at = offset + self.shift
        start = self.source.rfind(b"\n", 0, at) + 1
        end = self.source.find(b"\n", at)
        end = len(self.source) if end < 0 else end
        return len(self.source[start:end].rstrip(b"\r")), at - start

    def unlimited(self) -> _Lines:
        """These lines with no column limit: `_joined` continues no line."""
        lines = copy(self)
        lines.longest = sys.maxsize
        return lines


def _break_before(guard: Guard, operand: Node, lines: _Lines, added: int) -> Edit | None:
    """clang-format's break before an `&&` operand that grows by `added` bytes past the column limit: the line
    continued after the `&&` (before it, where the file puts operators first), the operand on a line of its own
    indented as the file continues its `#if` lines. None where the line still fits, the operand starts its line or
    spans lines, is not right after an `&&`, or would not fit on a line of its own either."""
    length, column = lines.column(operand.start)
    if length + added <= lines.longest:
        return None
    tokens = [t for t in guard.tokens if t.end <= operand.start]
    if len(tokens) < 2 or tokens[-1].text != "&&" or b"\n" in lines.source[tokens[-2].end + lines.shift : operand.end + lines.shift]:
        return None
    if len(lines.indent) + length - column + added > lines.longest:
        return None
    operator, previous = tokens[-1], tokens[-2]
    if lines.operator_first:
        return Edit(previous.end, operator.start, lines.before_backslash + b"\\" + lines.eol + lines.indent)
    return Edit(operator.end, operand.start, lines.before_backslash + b"\\" + lines.eol + lines.indent)


def _extend_chain(guard: Guard, before: ArchSet, targets: tuple[Arch, ...], lines: _Lines) -> list[Edit]:
    """`A == 860 || A == 890 || A == 1200` gains `|| A == 1210`: one more equality per missing value, where it sorts.

    Only for a condition that is such a chain, in parentheses or not, or holds
    one as a parenthesized `&&` operand (`_arch_chain`); one equality is a
    chain of one (`#elif __CUDA_ARCH__ == 900` became `... == 900 ||
    __CUDA_ARCH__ == 1000 || __CUDA_ARCH__ == 1030` upstream, ef687e900).
    Each new term copies its nearest equality's text with the number changed,
    joined by the chain's own operator (`||` or `or`). When the new terms do
    not all fit within the file's column limit (the length three of its lines
    reach, 100 at least), the line breaks before the first of them, continued
    with a backslash as the file continues its other long `#if` lines, and the
    continuation line is filled up to the limit. A chain that is an `&&`
    operand instead goes on a continuation line of its own where it fits there,
    as clang-format breaks it, else breaks inside, one column past its `(`.
    """
    found = _arch_chain(guard.expression)
    if found is None:
        return []
    terms, group = found
    comparisons = [_comparison(term) for term in terms]
    numbers = [number for _, number in filter(None, comparisons)]
    equalities = [i for i, c in enumerate(comparisons) if c and c[0] == "=="]
    values = [number.value[0] for number in numbers]
    wanted = sorted(
        {target.cuda_arch for target in targets if not before.admits(target)}
        - {value for i, value in enumerate(values) if i in equalities}
    )
    if not wanted:
        return []
    source = lines.source

    def respell(index: int, value: int) -> bytes:  # the equality nearest term `index`, with its number changed
        index = min(equalities, key=lambda i: abs(i - index))
        number = numbers[index]
        start, end = terms[index].start + lines.shift, terms[index].end + lines.shift
        return source[start : number.start + lines.shift] + str(value).encode() + source[number.end + lines.shift : end]

    if group is None:
        return _inserted(guard, lines, terms, values, wanted, respell)
    return _laid_out(guard, lines, group, lambda lines, indent: _inserted(guard, lines, terms, values, wanted, respell, indent))


def _laid_out(guard: Guard, lines: _Lines, held: Node, inserted: Callable[[_Lines, bytes | None], list[Edit]]) -> list[Edit]:
    """The edits `inserted(lines, indent)` makes inside `held`, an operand in parentheses (or about to be): on its
    line where they fit, else `held` on a continuation line of its own after its `&&` (`_break_before`), else
    broken inside, one column past its `(`."""
    inline = inserted(lines.unlimited(), None)
    broken = _break_before(guard, held, lines, sum(len(edit.text) for edit in inline))
    if broken is not None:
        return [broken, *inline]
    return inserted(lines, _after_opening(held.start, lines))


def _inserted(
    guard: Guard, lines: _Lines, terms: list, values: list[int], wanted: list[int], respell: Callable[[int, int], bytes],
    indent: bytes | None = None,
) -> list[Edit]:
    """Each wanted value a new term of a chain (`terms`, whose values are `values`), joined by the chain's
    operator (`||`, or `or` where the guard spells it so) after the greatest term below it (before the first when
    none is), spelled by `respell(i, value)`: term i with its value changed; continued where too long (`_joined`).
    New terms that go where a continued chain breaks its line and do not fit there push the terms after them
    along: those lines are filled again up to the limit, as clang-format refills them (`_refilled`)."""
    operator_text = b"or" if any(t.alternative and t.text == "||" for t in guard.tokens) else b"||"
    inserts: dict[int, list[int]] = {}  # index of the term to insert after (-1: before the first) -> values
    for value in wanted:
        after = max((i for i, listed in enumerate(values) if listed < value), default=-1)
        inserts.setdefault(after, []).append(value)
    edits = []
    for after, added in sorted(inserts.items()):
        reference = terms[max(after, 0)]
        texts = [respell(max(after, 0), value) for value in added]
        at = reference.end if after >= 0 else reference.start
        text = _joined(lines, at, operator_text, texts, prefix=after >= 0, indent=indent)
        if after >= 0 and b"\n" in text and _refilled(lines, terms[after:]):
            # the rest of the chain, old terms and new, laid out again from here
            for index in range(after + 1, len(terms)):
                texts.append(lines.source[terms[index].start + lines.shift : terms[index].end + lines.shift])
                texts += [respell(index, value) for value in inserts.get(index, [])]
            length, column = lines.column(terms[-1].end)
            edits.append(Edit(at, terms[-1].end, _joined(lines, at, operator_text, texts, True, indent, length - column)))
            break
        edits.append(Edit(at, at, text))
    return edits


_BETWEEN = re.compile(rb"[ \t]*(?:\|\||or)?[ \t]*(?:\\\r?\n[ \t]*)?(?:\|\||or)?[ \t]*")


def _refilled(lines: _Lines, terms: list) -> bool:
    """Whether the terms of a chain from `terms[0]` on may be laid out again: `terms[0]` ends its line, which
    continues, and between them stand only one operator, blanks and escaped newlines."""
    if len(terms) < 2:
        return False
    gaps = [lines.source[a.end + lines.shift : b.start + lines.shift] for a, b in zip(terms, terms[1:])]
    return b"\n" in gaps[0] and all(_BETWEEN.fullmatch(gap) and gap.count(b"||") + gap.count(b"or") == 1 for gap in gaps)


def _joined(
    lines: _Lines, at: int, operator_text: bytes, texts: list[bytes], prefix: bool, indent: bytes | None = None,
    refill: int | None = None,
) -> bytes:
    """`|| t1 || t2` to insert at snippet offset `at` (or `t1 || t2 || ` before a term), continued where too long
    (on a line indented as the file continues its `#if` lines, or by `indent`). With `refill` (the length of what
    follows the last text on its line), each line is filled up to the limit, its `operator \\` included."""
    indent = lines.indent if indent is None else indent
    length, column = lines.column(at)
    if not prefix:  # before the first term: the new terms stay where the condition starts (`#if` keeps it)
        joined = b" ".join(text + b" " + operator_text for text in texts)
        if column + len(joined) + 1 + length - column <= lines.longest:
            return joined + b" "
        # too long: the line breaks after them, and the old terms go on the continuation line
        if lines.operator_first:
            return joined[: -len(operator_text) - 1] + lines.before_backslash + b"\\" + lines.eol + indent + operator_text + b" "
        return joined + lines.before_backslash + b"\\" + lines.eol + indent
    out = b""
    width = column  # where the text being written starts on its line
    rest = length - column  # what follows the insertion point on the original line
    pieces = [(b" " + operator_text + b" ", text) for text in texts]
    # upstream breaks before the terms it adds rather than filling the old line up (ef687e900)
    fits = refill is not None or length + sum(len(joiner + text) for joiner, text in pieces) <= lines.longest
    continued = len(lines.before_backslash) + 1 + (0 if lines.operator_first else len(operator_text) + 1)
    for index, (joiner, text) in enumerate(pieces):
        piece = joiner + text
        if refill is not None:
            rest = refill if index == len(pieces) - 1 else continued
        too_long = width + len(piece) + rest > lines.longest or (index == 0 and not fits)
        if too_long and width > 0:
            if lines.operator_first:
                out += lines.before_backslash + b"\\" + lines.eol + indent + joiner.lstrip() + text
                width = len(indent) + len(joiner.lstrip() + text)
            else:
                out += joiner.rstrip() + lines.before_backslash + b"\\" + lines.eol + indent + text
                width = len(indent) + len(text)
            continue
        out += piece
        width += len(piece)
    return out


_FEATURE = re.compile(r"^__CUDA_ARCH_FEAT_SM(\d+)_ALL$")


def _feature_chains(
    node: Node | None, group: Group | None = None, bare: bool = True
) -> list[tuple[list[Defined], Group | None, bool]]:
    """Each `defined(__CUDA_ARCH_FEAT_SMnnn_ALL) || ...` chain in the condition (one such `defined` is a chain of
    one), with the parentheses right around it (None where there are none) and whether it may gain `|| ...` without
    them (at the top or as an operand of `||`; not as one of `&&`)."""
    if isinstance(node, Group):
        return _feature_chains(node.inner, node)
    if isinstance(node, Defined) and _FEATURE.match(node.name):
        return [([node], group, bare)]
    if isinstance(node, Binary) and node.op == "||":
        terms = _disjuncts(node)
        if all(isinstance(t, Defined) and _FEATURE.match(t.name) for t in terms):
            return [([t for t in terms if isinstance(t, Defined)], group, bare)]
    if isinstance(node, Binary):
        return _feature_chains(node.left, None, node.op == "||") + _feature_chains(node.right, None, node.op == "||")
    return []


def _extend_features(guard: Guard, before: ArchSet, targets: tuple[Arch, ...], lines: _Lines) -> list[Edit]:
    """`(defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL))` gains
    `|| defined(__CUDA_ARCH_FEAT_SM107_ALL)` for sm_107a, as `_extend_chain` extends an equality chain: the list of
    arch-specific targets a guard names, one more in its own spelling, where its number sorts (FlashInfer 0.7.2's
    mamba/conversion.cuh). Only where the condition holds one such list; a lone `defined` is a list of one, put in
    parentheses behind an `&&` (ln_silu_headers.cuh's `... && defined(__CUDA_ARCH_FEAT_SM100_ALL)`). Too long, a list
    behind `&&` goes on a continuation line of its own where it fits there, as clang-format breaks it; else a
    continuation line goes one column past the list's own opening parenthesis, as clang-format aligns it."""
    chains = _feature_chains(guard.expression)
    chains = [chain for chain in chains if len(chain[0]) > 1] or chains  # a list before a lone `defined`
    if len(chains) != 1:
        return []
    terms, group, bare = chains[0]
    codes = [int(_FEATURE.match(t.name)[1]) for t in terms]  # type: ignore[index]
    wanted = sorted({t.code for t in targets if t.variant == "a" and not before.admits(t)} - set(codes))
    if not wanted:
        return []
    source = lines.source

    def respell(index: int, code: int) -> bytes:  # `defined(__CUDA_ARCH_FEAT_SM103_ALL)` for another code
        text = source[terms[index].start + lines.shift : terms[index].end + lines.shift]
        return text.replace(f"SM{codes[index]}_ALL".encode(), f"SM{code}_ALL".encode())

    if group is None and bare:
        return _inserted(guard, lines, terms, codes, wanted, respell, lines.indent)
    if group is not None:
        return _laid_out(guard, lines, group, lambda lines, indent: _inserted(guard, lines, terms, codes, wanted, respell, indent))
    [term] = terms  # a lone `defined` behind `&&`: it becomes a list in parentheses
    return _laid_out(
        guard, lines, term, lambda lines, indent: _in_parentheses(term, _inserted(guard, lines, terms, codes, wanted, respell, indent))
    )


def _in_parentheses(term: Node, edits: list[Edit]) -> list[Edit]:
    """`edits` that insert before and after `term`, with `(` and `)` around the whole."""
    before = b"".join(edit.text for edit in edits if edit.start == term.start)
    after = b"".join(edit.text for edit in edits if edit.start == term.end)
    return [Edit(term.start, term.start, b"(" + before), Edit(term.end, term.end, after + b")")]


def _aligned(source: bytes, gate: Gate, edits: list[Edit]) -> list[Edit]:
    """`edits` of a guard, with the directive's escaped newlines aligned again where the edits continued it onto
    a new line and the directive had them aligned clang-format's way (`AlignEscapedNewlines: Left`, FlashInfer's:
    every `\\` one space past the longest of those lines; true of a directive with one): each is moved to one space
    past the longest line now, and so are those of a directive on one line where the file aligns them so. A
    directive whose `\\`s follow another rule keeps them as the edits wrote them."""
    start = source.rfind(b"\n", 0, gate.start) + 1
    old = source[start : gate.end]
    new = apply_edits(old, [Edit(e.start - start, e.end - start, e.text) for e in edits])  # the edits are in the gate
    if not any(b"\n" in edit.text for edit in edits) or not (_left_aligned(old) or b"\n" not in old and _file_style(source)[5]):
        return edits  # no line was continued, or neither the directive nor (on one line) the file aligns its `\\`s
    lines = new.split(b"\n")
    escaped = [i for i, line in enumerate(lines) if line.removesuffix(b"\r").endswith(b"\\")]
    width = max(len(lines[i].removesuffix(b"\r")[:-1].rstrip()) for i in escaped)
    for i in escaped:
        eol = b"\r" if lines[i].endswith(b"\r") else b""
        content = lines[i].removesuffix(b"\r")[:-1].rstrip()
        lines[i] = content + b" " * (width - len(content) + 1) + b"\\" + eol
    return [Edit(start, gate.end, b"\n".join(lines))]


def _left_aligned(directive: bytes) -> bool:
    """Whether every `\\` of the directive stands one space past the longest of its escaped lines (true of one;
    false of none: a directive on one line says nothing of how the file aligns them)."""
    lines = [line.removesuffix(b"\r") for line in directive.split(b"\n")]
    escaped = [line for line in lines if line.endswith(b"\\")]
    if not escaped:
        return False
    width = max(len(line[:-1].rstrip()) for line in escaped)
    return all(len(line) - 1 == width + 1 for line in escaped)


def _conjuncts(node: Node) -> list[Node]:
    """The operands of a top-level `a && b && c` chain, left to right."""
    if isinstance(node, Binary) and node.op == "&&":
        return [*_conjuncts(node.left), node.right]
    return [node]


def _drop_conjuncts(guard: Guard, before: ArchSet, targets: tuple[Arch, ...]) -> list[Edit]:
    """Delete the conjuncts that are false on a target, each with one adjacent `&&`.

    A conjunct after a kept one goes with the operator and whitespace before
    it; a leading conjunct goes with the operator and whitespace after it.
    Parentheses around the whole condition stay.
    """
    top = guard.expression
    while isinstance(top, Group):
        top = top.inner
    if top is None:
        return []
    conjuncts = _conjuncts(top)
    missing = [target for target in targets if not before.admits(target)]
    dropped = {
        index
        for index, conjunct in enumerate(conjuncts)
        if any(truth(conjunct, target.macros()) is False for target in missing)
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
    guard: Guard, condition: bytes, before: ArchSet, targets: tuple[Arch, ...], scope: tuple[Arch, ...]
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
    if top is None:
        return []
    # `a && b || c` is right but reads wrong (gcc -Wparentheses); `a ? b : c || d` is wrong.
    # The parenthesized form is one edit over the whole condition, so that the
    # rewritten gate starts where the old one did (an insertion at its first
    # byte would read as an edit before the gate).
    if isinstance(top, Conditional) or (isinstance(top, Binary) and top.op == "&&"):
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
