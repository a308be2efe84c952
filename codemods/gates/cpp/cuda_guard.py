"""CUDA preprocessor guards: `#if` conditions that name an arch macro.

A gate of this kind is the condition of an `#if` or `#elif` (or the name after
`#ifdef`, `#ifndef`, `#elifdef`, `#elifndef`) that names `__CUDA_ARCH__`,
`__CUDA_ARCH_SPECIFIC__`, `__CUDA_ARCH_FAMILY_SPECIFIC__` or a
`__CUDA_ARCH_FEAT_SM<NN>_ALL` macro. The lexer finds the directives (byte
searches, cpp.lexer), as `codemod scan` does: a guard inside a block comment is not a gate. Each condition is
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
from dataclasses import replace
from functools import lru_cache


from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet, is_arch_macro
from codemods.cpp import functions, lexer, syntax
from codemods.cpp.evaluate import (
    CONDITION_DIRECTIVES,
    Guard,
    admits,
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
from codemods.cpp.lexer import one_line
from codemods.gates import CannotWiden, Edit, Gate, apply_edits, decode
from codemods.gates.cpp.if_layout import Lines, aligned, in_parentheses, inserted, laid_out

KIND = "cuda_guard"

__all__ = ["KIND", "admits", "directive_admits", "find", "guards", "widen"]  # admits: what a guard given as text admits, the evaluator's answer


def find(
    source: bytes, universe: tuple[Arch, ...] = DEFAULT_ARCHS, language: str = "cuda", *, function: str | None = None
) -> list[Gate]:
    """Every `#if`/`#elif`/`#ifdef`-style directive that names an arch macro, with what it admits; with
    `function`, those inside the function of that name (cpp.functions, the namer scan uses too).

    `Gate.start`/`end` span the condition (the macro name for `#ifdef`);
    `Gate.line` is the directive's line; `Gate.context` the function around it.
    A condition that names any macro besides the arch macros is unknown where
    the answer depends on it. Found by the lexer (`guards`), as `codemod scan`
    finds them: one implementation, so scan and run see the same guards.
    Raises SourceError when the source is not UTF-8 or its conditionals do not pair up.
    """
    decode(source)
    syntax.parser(language)  # an unknown language is an error whatever the source holds
    if lexer.ARCH_TOKEN not in source:
        return []
    comments = lexer.Comments(source)
    lexer.check_balanced(lexer.find_directives(source, comments))
    gates = guards(source, comments, universe, language)
    names = functions.enclosing_functions(source, [gate.start for gate in gates])
    found = [replace(gate, context=name) if name else gate for gate, name in zip(gates, names)]
    return found if function is None else [gate for gate in found if gate.context == function]


_GUARD_LINE_RE = re.compile(rb"[ \t\f\v]*#[ \t]*(ifdef|ifndef|if|elifdef|elifndef|elif)\b")


def guards(data: bytes, comments: lexer.Comments, universe: tuple[Arch, ...], language: str) -> list[Gate]:
    """The guard gates of `data` without their functions: each `#if`-style line naming an arch macro, continued
    lines included, outside block comments (`comments`), evaluated from its text."""
    lines = lexer.Lines(data)
    gates = []
    for sharp, directive, start, end in _guard_lines(data, comments):
        text = data[start:end].decode("utf-8")
        gates.append(
            Gate(
                kind=KIND,
                start=start,
                end=end,
                line=lines.at(sharp),
                text=text,
                admits=directive_admits(directive, text, universe),
                detail={"directive": directive, "language": language},
            )
        )
    return gates


def _guard_lines(data: bytes, comments: lexer.Comments) -> list[tuple[int, str, int, int]]:
    """(offset of `#`, directive, condition start and end) of each `#if`-style line that names an arch macro."""
    found = []
    seen = -1
    pos = data.find(lexer.ARCH_TOKEN)
    while pos >= 0:
        start = lexer.spliced_start(data, pos)
        if start != seen:
            seen = start
            at = start + 3 if start == 0 and data.startswith(lexer.BOM) else start
            match = _GUARD_LINE_RE.match(data, at)
            if match is not None:
                sharp = data.index(b"#", at)
                if comments.block_end(sharp) < 0 and not comments.in_raw_string(sharp):
                    span = _condition_span(data, match.end())
                    if span is not None:
                        found.append((sharp, "#" + match.group(1).decode(), *span))
        pos = data.find(lexer.ARCH_TOKEN, pos + len(lexer.ARCH_TOKEN))
    return found


def _condition_span(data: bytes, pos: int) -> tuple[int, int] | None:
    """Where the condition from `pos` starts and ends (its tokens), or None when it names no arch macro.

    Guard lines repeat (a macro test copied over a library), so they are
    tokenized once per distinct line.
    """
    end = lexer.spliced_end(data, pos)
    if data.find(b"/*", pos, end) >= 0:
        tokens, _ = lexer.scan_line(data, pos)  # a comment may run past the line
        if any(t.kind == "ident" and is_arch_macro(t.text) for t in tokens):
            return tokens[0].start, tokens[-1].end
        return None
    relative = _line_span(data[pos:end])
    return None if relative is None else (relative[0] + pos, relative[1] + pos)


@lru_cache(maxsize=8192)
def _line_span(line: bytes) -> tuple[int, int] | None:
    tokens, _ = lexer.scan_line(line, 0)
    if any(t.kind == "ident" and is_arch_macro(t.text) for t in tokens):
        return tokens[0].start, tokens[-1].end
    return None


@lru_cache(maxsize=8192)
def directive_admits(directive: str, text: str, universe: tuple[Arch, ...]) -> ArchSet:
    """What one guard condition after `directive` admits (conditions repeat: cached)."""
    if directive in ("#if", "#elif"):
        return admits(text, universe)
    if not re.fullmatch(r"[A-Za-z_]\w*", text):
        return ArchSet(universe, frozenset(), frozenset(universe))
    test = f"defined({text})" if directive in ("#ifdef", "#elifdef") else f"!defined({text})"
    return admits(test, universe)


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
    lines = Lines(source, gate.start - head)
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
            return aligned(source, gate, [Edit(e.start + gate.start, e.end + gate.start, e.text) for e in in_condition])
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


def _extend_chain(guard: Guard, before: ArchSet, targets: tuple[Arch, ...], lines: Lines) -> list[Edit]:
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
        return inserted(guard, lines, terms, values, wanted, respell)
    return laid_out(guard, lines, group, lambda lines, indent: inserted(guard, lines, terms, values, wanted, respell, indent))


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


def _extend_features(guard: Guard, before: ArchSet, targets: tuple[Arch, ...], lines: Lines) -> list[Edit]:
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
        return inserted(guard, lines, terms, codes, wanted, respell, lines.indent)
    if group is not None:
        return laid_out(guard, lines, group, lambda lines, indent: inserted(guard, lines, terms, codes, wanted, respell, indent))
    [term] = terms  # a lone `defined` behind `&&`: it becomes a list in parentheses
    return laid_out(
        guard, lines, term, lambda lines, indent: in_parentheses(term, inserted(guard, lines, terms, codes, wanted, respell, indent))
    )


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
