"""Black's split of an `if`/`elif`/`while` line, an assignment or a bracketed expression that widening makes too long.

One implementation for the kinds that widen in place (python_arch_test,
python_arch_or, python_arch_list, python_capability): `wrapped` takes the edits of one widening and returns them
with the line breaks black (and ruff format) would put in the line they make,
given the file's line length (`python.layout.text.line_length`). Pure: text in, edits out.
"""

from __future__ import annotations

import io
import keyword
import re
import tokenize
from collections.abc import Callable
from typing import cast

from codemods.gates import Edit, apply_edits
from codemods.gates.python.layout.text import BLACK_LINE_LENGTH, eol as line_eol, line_end, line_length, line_start


def wrapped(source: bytes, edits: list[Edit], rejoined: bool = False) -> list[Edit]:
    """`edits`, split over lines the way black splits the `if`/`elif`/`while` line they make too long.

    The shapes real code has (SGLang 0.5.17's server_args.py, FlashInfer
    9e5ec6a0c's test, 4d4e8c057's deep_gemm.py), each checked against `ruff
    format` (tests/gates/test_wrap.py):

    - one top-level `and`/`or` at most, the line's last brackets parentheses
      around a condition (`if cond and not (P or Q):`) or a call of one
      argument: black's right-hand split puts what they hold on a line of its
      own, one level (4 spaces) deeper, and `):` on the next; what is still
      too long there is split before each `or`, one operand a line;
    - the same with a collection last (`... and arch in ("100a", "103a"):`):
      exploded, one item a line, a trailing comma added;
    - several top-level `and`/`or`s (one priority to black, mixed or not):
      the test goes in parentheses, `if (` ... `):`, one level deeper, on one
      line when it fits, else one operand a line, each operator leading it.

    Any other shape (a conditional expression or a comment in the test, a
    call of several arguments last), or a head that would stay too long, is
    left on one line.

    An assignment whose value is one bracketed call or display (`X =
    frozenset({...})`, `X: tuple[str, ...] = (...)`) is split at that
    value's brackets (`_assignment_cuts`); one whose value holds a
    conditional expression or an `and`/`or` gets parentheses around it, `X =
    (` / the value / `)` (`_parenthesized_value_cuts`); a conditional
    expression that is all its brackets hold, before its `if`, `and`/`or`s
    and `else` (`_enclosed_cuts`).

    With `rejoined`, an edit may replace lines black split with one line (`joined`): the test is laid out anew.
    """

    def cuts(line: str, eol: str, first: int, last: int) -> list[tuple[int, int, str]]:
        if len(line) <= BLACK_LINE_LENGTH or len(line) <= (limit := line_length(source)):
            return []
        # the line is all a pair of brackets holds (`group = (` / the line / `)`): black splits it as their body
        enclosed = source[:first].rstrip().endswith((b"(", b"[", b"{")) and source[last:].lstrip().startswith((b")", b"]", b"}"))
        return _black_cuts(line, limit, eol, enclosed)

    return split_line(source, edits, cuts, rejoined)


def split_line(
    source: bytes, edits: list[Edit], cuts_of: Callable[[str, str, int, int], list[tuple[int, int, str]]],
    rejoined: bool = False,
) -> list[Edit]:
    """`edits`, with the cuts `cuts_of(line, eol, first, last)` makes in the one line they change (the line as
    they leave it, its line ending, and where it starts and ends in `source`) placed back into them (`_placed`):
    the one way a widened line is broken, black's here, clang-format's in `cpp.wrap`. Edits spanning lines, or
    cuts `_placed` cannot place, leave the line as it is."""
    if not edits:
        return edits
    start, end = min(e.start for e in edits), max(e.end for e in edits)
    first, last = line_start(source, start), line_end(source, end)
    eol = line_eol(source, start)
    last -= len(eol) if source[first:last].endswith(eol) else 0
    kept = [source[first:start], source[end:last]] + [source[a.end : b.start] for a, b in zip(sorted(edits), sorted(edits)[1:])]
    if any(b"\n" in piece for piece in (kept if rejoined else [source[first:last]])) or any(b"\n" in e.text for e in edits):
        return edits  # the test spans lines (the edits keep), or they write lines of their own: it is laid out
    # each character of the widened line: (the character, its source offset or None, the edit and the place in
    # its text it comes from when inserted)
    chars: list[tuple[str, int | None, tuple[int, int] | None]] = []
    ordered = sorted(edits)
    at = first
    for index, edit in enumerate(ordered):
        chars += _located(source[at : edit.start], at)
        chars += [(c, None, (index, k)) for k, c in enumerate(edit.text.decode("utf-8"))]
        at = edit.end
    chars += _located(source[at:last], at)
    cuts = cuts_of("".join(c for c, _, _ in chars), eol.decode(), first, last)
    if not cuts:
        return edits
    placed = _placed(chars, ordered, cuts, source[last : last + len(eol)] if source[last:].startswith(eol) else b"")
    return edits if placed is None else placed


def _placed(
    chars: list[tuple[str, int | None, tuple[int, int] | None]], ordered: list[Edit], cuts: list[tuple[int, int, str]],
    ending: bytes,
) -> list[Edit] | None:
    """The widening's edits with the cuts (columns of the widened line) made: a cut of source characters (the
    spaces before an `and`, a colon) is an edit of its own; one inside an edit's text (the space before an
    inserted `or`) changes that text. So every edit keeps its span, and a gate its edges (plan/widen.py reads a
    gate's text after the edits by their spans). A cut at the end of the line (the `)` closing an assignment's
    value) is written over the line's `ending`: plan/widen.py counts what is inserted at a gate's end as the
    gate's own text. None when a cut takes both kinds of character, or none of either next to it, or closes a
    line that has no ending (the file's last); then the line is left as it is."""
    changes: list[list[tuple[int, int, str]]] = [[] for _ in ordered]  # per edit: (from, to, text) in its text
    added: list[Edit] = []
    for cut_start, cut_end, text in cuts:
        span = chars[cut_start:cut_end]
        origins = [origin for _, origin, _ in span]
        if span and None not in origins:
            ends = [o + len(c.encode("utf-8")) for (c, _, _), o in zip(span, origins) if o is not None]
            if any(ends[i] != origins[i + 1] for i in range(len(span) - 1)):
                return None  # not one run of the source: an edit removed bytes inside it
            added.append(Edit(cast(int, origins[0]), ends[-1], text.encode("utf-8")))
            continue
        if span and all(origin is None for _, origin, _ in span):
            edits_of = {where[0] for _, _, where in span if where is not None}
            if len(edits_of) != 1:
                return None
            index = edits_of.pop()
            ks = [where[1] for _, _, where in span if where is not None]
            changes[index].append((ks[0], ks[-1] + 1, text))
            continue
        if span:
            return None
        # a pure insertion between two characters: into the edit text beside it, else at the source offset
        right = chars[cut_start] if cut_start < len(chars) else None
        left = chars[cut_start - 1] if cut_start > 0 else None
        if right is None and left is not None and ending:  # at the end of the line (`)` closing it)
            at = cast(int, left[1]) + len(left[0].encode("utf-8")) if left[2] is None else ordered[left[2][0]].end
            added.append(Edit(at, at + len(ending), text.encode("utf-8") + ending))
        elif right is None:
            return None
        elif right[2] is not None:
            changes[right[2][0]].append((right[2][1], right[2][1], text))
        elif left is not None and left[2] is not None:
            changes[left[2][0]].append((left[2][1] + 1, left[2][1] + 1, text))
        elif right[1] is not None:
            added.append(Edit(right[1], right[1], text.encode("utf-8")))
        else:
            return None
    out = []
    for index, edit in enumerate(ordered):
        text = edit.text.decode("utf-8")
        for a, b, piece in sorted(changes[index], reverse=True):
            text = text[:a] + piece + text[b:]
        out.append(Edit(edit.start, edit.end, text.encode("utf-8")))
    return out + added


def _located(data: bytes, offset: int) -> list[tuple[str, int | None, tuple[int, int] | None]]:
    located: list[tuple[str, int | None, tuple[int, int] | None]] = []
    for char in data.decode("utf-8"):
        located.append((char, offset, None))
        offset += len(char.encode("utf-8"))
    return located


def _black_cuts(line: str, limit: int, eol: str, enclosed: bool = False) -> list[tuple[int, int, str]]:
    """(start, end, text) replacements of `line` (columns) that split it as black would; [] for another shape."""
    closing = line.lstrip().startswith(")")  # `) or (...)`: tokenized with a name in the bracket's column
    tokens = _tokens(line.replace(")", "_", 1) if closing else line)
    if not tokens:
        return []
    if enclosed:
        return _enclosed_cuts(line, tokens, limit, eol)
    if closing:
        return _closing_group_cuts(line, tokens, limit, eol)
    if tokens[0].string not in ("if", "elif", "while"):
        return _assignment_cuts(line, tokens, limit, eol)
    depth, opened, last = 0, [], None
    operators = []  # (depth, column) of every `and`/`or`
    commas = []  # (depth, column) of every comma
    for index, token in enumerate(tokens):
        if token.type == tokenize.OP and token.string in "([{":
            opened.append(index)
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
            last = (opened.pop(), index)
        elif token.type == tokenize.NAME and token.string in ("and", "or"):
            operators.append((depth, token.start[1]))
        elif token.type == tokenize.OP and token.string == ",":
            commas.append((depth, token.start[1]))
    top = [column for d, column in operators if d == 0]
    if len(top) > 1:  # `and` and `or` are one priority to black: it splits before each, whatever the mix
        return _invisible_parentheses_cuts(line, tokens, top, limit, eol)
    if last is None or [t.string for t in tokens[last[1] + 1 :]] != [":"]:
        # the test ends in no brackets (`if arch in (...) and not use_tma:`): black keeps its parentheses around
        # the test, unless the test starts with one (`if (P or Q) and cond:`, split at that group: not written here)
        starts_bracketed = len(tokens) > 1 and tokens[1].string in "([{"
        return _invisible_parentheses_cuts(line, tokens, top, limit, eol) if top and not starts_bracketed else []
    open_index, close_index = last
    before = tokens[open_index - 1]
    if tokens[open_index].string != "(" and not (tokens[open_index].string == "[" and before.type == tokenize.NAME
                                                 and keyword.iskeyword(before.string)):
        return []  # a subscript, or a display after another operator: not a shape this writes
    open_col, close_col = tokens[open_index].end[1], tokens[close_index].start[1]
    one_argument = not any(d == 1 and open_col < column < close_col for d, column in commas)
    if before.type in (tokenize.STRING, tokenize.NUMBER) or before.string in ")]}" or (
        before.type == tokenize.NAME and not keyword.iskeyword(before.string) and not one_argument
    ):
        return []  # a call of several arguments: black splits it one argument a line, with a trailing comma
    # a call of one argument (FlashInfer 2cf8f4cc7's `elif cutlass.const_expr(` ... `):`) splits as parentheses do
    if open_col > limit:
        return []  # the head itself too long: black lays the test out otherwise
    indent = line[: len(line) - len(line.lstrip())]
    inner = indent + "    "
    body = line[open_col:close_col]
    lead, trail = len(body) - len(body.lstrip()), len(body) - len(body.rstrip())
    items = [column for d, column in commas if d == 1 and open_col < column < close_col]
    if items and not (before.type == tokenize.NAME and not keyword.iskeyword(before.string)):
        # a collection (`x in ("100a", "103a")`): black explodes it, one item a line, a trailing comma added
        return _exploded(line, open_col, open_col + lead, close_col - trail, close_col, items, indent, limit, eol)
    cuts = [(open_col, open_col + lead, eol + inner)]
    if len(inner + body.strip()) > limit:
        split = [column for d, column in operators if d == 1 and open_col < column < close_col]
        words = {line[column : column + 3].strip() for column in split}
        if not split or words != {"or"}:
            return []
        pieces = [open_col + lead, *split, close_col - trail]
        calls = []
        for a, b in zip(pieces, pieces[1:]):
            if len(inner + line[a:b].strip()) > limit:  # still too long: its own call split at its brackets
                call = _call_cuts(line, a, b, inner, limit, eol)
                if not call:
                    return []
                calls += call
        cuts += sorted(_breaks_before(line, split, eol + inner) + calls)
    cuts.append((close_col - trail, close_col, eol + indent))
    return cuts


def _call_cuts(line: str, start: int, end: int, indent: str, limit: int, eol: str) -> list[tuple[int, int, str]]:
    """Black's right-hand split of one operand on its own line (`or is_sm121a_supported(device or ...)`): a call
    of one argument ending it gets `name(` / the argument one level deeper than `indent` / `)`; [] otherwise."""
    piece = line[start:end].rstrip()
    tokens = _tokens(piece.strip())
    if len(tokens) < 3 or tokens[-1].string != ")":
        return []
    shift = start + len(piece) - len(piece.lstrip())
    depth, opening = 0, None
    for index in range(len(tokens) - 1, -1, -1):
        depth += tokens[index].string in ")]}"
        depth -= tokens[index].string in "([{"
        if depth == 0:
            opening = index
            break
    if opening is None or opening == 0 or tokens[opening].string != "(" or tokens[opening - 1].type != tokenize.NAME:
        return []
    open_col, close_col = shift + tokens[opening].end[1], shift + tokens[-1].start[1]
    inside = line[open_col:close_col]
    if not inside.strip() or _commas_at_top(inside) or len(indent + "    " + inside.strip()) > limit:
        return []  # several arguments: black puts one a line with a trailing comma; or the argument too long
    lead, trail = len(inside) - len(inside.lstrip()), len(inside) - len(inside.rstrip())
    return [(open_col, open_col + lead, eol + indent + "    "), (close_col - trail, close_col, eol + indent)]


def _commas_at_top(text: str) -> bool:
    depth = 0
    for token in _tokens(text):
        depth += token.string in "([{"
        depth -= token.string in ")]}"
        if depth == 0 and token.string == ",":
            return True
    return False


def relaid(source: bytes, edit: Edit) -> list[Edit] | None:
    """`edit`, which writes on one line what black split over lines (`joined`), laid out as black lays out the
    test it makes; None where a line stays longer than the file's limit (a layout `wrapped` does not write)."""
    laid = wrapped(source, [edit], rejoined=True)
    first = line_start(source, edit.start)
    after = apply_edits(source, laid)[first:]
    last = line_end(after, edit.end - first + sum(len(e.text) - (e.end - e.start) for e in laid))
    limit = line_length(source)
    return laid if all(len(line) <= limit for line in after[:last].decode("utf-8").splitlines()) else None


def joined(text: str) -> str | None:
    """An expression black split over lines (`is_sm120a_supported(` / `    device or ...` / `)`), on one line as it
    was before (so a widening lays out the test it grows anew); None when a comment, a string over lines, a
    backslash or a magic trailing comma (black keeps that split) makes it not one line's worth."""
    if "\n" not in text:
        return text
    if "#" in text or '"""' in text or "'''" in text or "\\" in text or re.search(r",\s*[)\]}]", text):
        return None
    text = re.sub(r"([(\[{])[ \t]*\r?\n\s*", r"\1", text)
    text = re.sub(r"\s*\r?\n\s*([)\]}])", r"\1", text)
    return re.sub(r"[ \t]*\r?\n\s*", " ", text)


def _exploded(
    line: str, opening: int, first: int, last: int, close: int, items: list[int], indent: str, limit: int, eol: str
) -> list[tuple[int, int, str]]:
    """Cuts that put each item of a collection (opened just before `opening`, its body `line[first:last]`, its
    item commas at `items`) on a line one level deeper than `indent`, with a trailing comma, and its closing
    bracket (at `close`) on a line of its own; [] when an item stays too long. A comma before the closing
    bracket already is kept, not doubled."""
    inner = indent + "    "
    trailing = not line[items[-1] + 1 : last].strip()
    ends = items if trailing else [*items, last]
    starts = [first] + [column + 1 for column in items]
    pieces = [line[a:b].strip() for a, b in zip(starts, ends)]
    if not all(pieces) or any(len(inner + piece + ",") > limit for piece in pieces):
        return []
    cuts = [(opening, first, eol + inner)]
    for column in items[:-1] if trailing else items:
        after = column + 1
        space = len(line[after:]) - len(line[after:].lstrip())
        cuts.append((after, after + space, eol + inner))
    cuts.append((last, close, ("" if trailing else ",") + eol + indent))
    return cuts


def _invisible_parentheses_cuts(line: str, tokens: list, top: list[int], limit: int, eol: str) -> list[tuple[int, int, str]]:
    """Black's split of a test with several top-level `and`/`or`s (SGLang 0.5.17's mxfp4.py): it puts the test in
    parentheses, `if (` ... `):`, one level (4 spaces) deeper, on one line when it fits, else one operand a
    line, each operator leading its line. [] when a piece stays too long or the line is no `... :` test."""
    colon = next((t for t in reversed(tokens) if t.type == tokenize.OP), None)
    if colon is None or colon.string != ":" or len(tokens) < 2:
        return []
    depth = 0
    for token in tokens[1:]:
        depth += token.type == tokenize.OP and token.string in "([{"
        depth -= token.type == tokenize.OP and token.string in ")]}"
        if depth == 0 and (token.type == tokenize.COMMENT or token.string in ("if", "else", "lambda")):
            return []  # a conditional expression or a lambda splits first; a comment stays where it is
    start, end = tokens[1].start[1], colon.start[1]
    indent = line[: len(line) - len(line.lstrip())]
    inner = indent + "    "
    if len(indent + tokens[0].string + " (") > limit:
        return []
    # The parentheses replace the space before the test and the colon after it, so that they are no insertion at
    # the edge of a gate that starts or ends the test (an insertion there belongs to the gate: plan/widen.py).
    opening = start - 1 if line[start - 1 : start] == " " else start
    cuts = [(opening, start, line[opening:start] + "(" + eol + inner)]
    if len(inner + line[start:end].strip()) > limit:
        pieces = [start, *top, end]
        if any(len(inner + line[a:b].strip()) > limit for a, b in zip(pieces, pieces[1:])):
            return []
        cuts += _breaks_before(line, top, eol + inner)
    cuts.append((end, end + 1, eol + indent + "):"))
    return cuts


# `=` and the augmented assignments (`operations += generate_sm100_operations(...)`, FlashInfer 290c09186)
_ASSIGNMENTS = frozenset({"=", "+=", "-=", "*=", "/=", "//=", "%=", "@=", "&=", "|=", "^=", ">>=", "<<=", "**="})


def _assignment_cuts(line: str, tokens: list, limit: int, eol: str) -> list[tuple[int, int, str]]:
    """Black's right-hand split of `name[: annotation] = value` where the value is one call of a plain name or
    one display, its brackets closing the line (FlashInfer 0.7.2's cutile_backend.py): black drops the invisible
    parentheses around such a value (it has no operator of its own) and splits at its last brackets.

    - A call, `X = frozenset({...})`: `X = frozenset(` / the argument on a line one level deeper / `)`; when the
      argument is still too long and holds commas, one argument a line, a trailing comma added.
    - A display, `X = [a, b]`, `X = (a, b)`: one item a line, a trailing comma added (black always explodes a
      collection it splits), `]` on a line of its own.

    [] for any other shape (a subscript, a comment on the line, an operator in the value), or when a piece
    stays too long."""
    if any(t.type == tokenize.COMMENT for t in tokens) or not tokens or tokens[0].type != tokenize.NAME:
        return []
    depth, equal = 0, None
    for index, token in enumerate(tokens):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif depth == 0 and token.type == tokenize.OP and token.string in _ASSIGNMENTS:
            if equal is not None:
                return []  # `a = b = [...]`
            equal = index
    if equal is None or equal + 1 >= len(tokens) or keyword.iskeyword(tokens[0].string):
        return []
    value = tokens[equal + 1 :]
    if _operator_value(value):
        return _leading_group_cuts(line, value, limit, eol) or _parenthesized_value_cuts(line, value, limit, eol)
    if value[0].type == tokenize.NAME and len(value) > 1 and value[1].string == "(" and not keyword.iskeyword(value[0].string):
        opening, display = 1, False  # a call of a plain name
    elif value[0].string in "([{":
        opening, display = 0, True
    else:
        return []
    depth, close = 0, None
    items: list[int] = []  # the columns of the commas between the bracket's items
    for index in range(opening, len(value)):
        token = value[index]
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
            if depth == 0:
                close = index
                break
        elif depth == 1 and token.type == tokenize.OP and token.string == ",":
            items.append(index)
    if close != len(value) - 1:
        return []  # the brackets do not close the line: `X = f(a)[0]`, `X = f(a) + b`
    open_col, close_col = value[opening].end[1], value[close].start[1]
    if open_col > limit:
        return []
    indent = line[: len(line) - len(line.lstrip())]
    inner = indent + "    "
    body = line[open_col:close_col]
    lead, trail = len(body) - len(body.lstrip()), len(body) - len(body.rstrip())
    if not body.strip():
        return []
    first, last = open_col + lead, close_col - trail  # the body without the spaces around it
    explode = display and bool(items) or len(inner + body.strip()) > limit
    if not explode:
        return [(open_col, first, eol + inner), (last, close_col, eol + indent)]
    if not items:
        return []
    commas = [value[i].start[1] for i in items]
    return _exploded(line, open_col, first, last, close_col, commas, indent, limit, eol)


def _operator_value(value: list) -> bool:
    """Whether an assignment's value has a conditional expression or an `and`/`or` at its top level (what black
    wraps in parentheses of its own when the line is too long)."""
    depth = 0
    for token in value:
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif depth == 0 and token.type == tokenize.NAME and token.string in ("if", "and", "or"):
            return True
    return False


def _leading_group_cuts(line: str, value: list, limit: int, eol: str) -> list[tuple[int, int, str]]:
    """Black's split of `name = (P or Q) and cond`, a value that opens with a parenthesized group and has one
    `and`/`or` after it, with no brackets in the rest (SGLang's `self.enable_x = (is_sm90_supported() or ...) and
    ...`): black omits its own parentheses there, `name = (` / the group's body one level deeper, split before
    each `and`/`or` when still too long / `) and cond`. [] for any other shape, or when a piece stays too long."""
    if value[0].string != "(" or any(t.type == tokenize.COMMENT for t in value):
        return []
    depth, close = 0, None
    for index, token in enumerate(value):
        depth += token.type == tokenize.OP and token.string in "([{"
        depth -= token.type == tokenize.OP and token.string in ")]}"
        if depth == 0:
            close = index
            break
    tail = value[close + 1 :] if close is not None else []
    operators = [t.string for t in tail if t.type == tokenize.NAME and t.string in ("and", "or", "if", "else", "lambda")]
    if not tail or tail[0].string not in ("and", "or") or len(operators) != 1:
        return []
    if any(t.type == tokenize.OP and t.string in "()[]{}," for t in tail):
        return []
    assert close is not None
    indent = line[: len(line) - len(line.lstrip())]
    open_col, close_col = value[0].end[1], value[close].start[1]
    if len(indent + line[close_col:].rstrip()) > limit:
        return []
    return _group_cuts(line, open_col, close_col, indent, limit, eol)


def _parenthesized_value_cuts(line: str, value: list, limit: int, eol: str) -> list[tuple[int, int, str]]:
    """Black's right-hand split of `name = a if P or Q else b` (SGLang 0.5.21's inkling.py shape): the value in
    parentheses, `name = (` / the value one level deeper / `)`; still too long there, split as `_enclosed_cuts`
    splits a conditional expression or a test. [] when a piece stays too long or a comment is on the line."""
    if any(t.type == tokenize.COMMENT for t in value):
        return []
    indent = line[: len(line) - len(line.lstrip())]
    inner = indent + "    "
    start, end = value[0].start[1], len(line.rstrip())
    body = line[start:end]
    cuts = [(start, start, "(" + eol + inner)]
    if len(inner + body) > limit:
        enclosed = inner + body
        more = _enclosed_cuts(enclosed, _tokens(enclosed), limit, eol)
        if not more:
            return []
        shift = start - len(inner)
        cuts += [(a + shift, b + shift, text) for a, b, text in more]
    cuts.append((end, end, eol + indent + ")"))
    return cuts


def _enclosed_cuts(line: str, tokens: list, limit: int, eol: str) -> list[tuple[int, int, str]]:
    """Black's split of a line that is all a pair of brackets holds: a conditional expression (FlashInfer 0.7.4's
    cake_bgmv_moe.py, `group_shrink_mixed = (` / `1 if ... and ... else 0` / `)`), `if` and `else` starting a
    line at the same indent, and the condition's top-level `and`/`or`s too when it is still too long; or a test (4d4e8c057's
    `should_skip_transform = (` / `a and b and c` / `) or (...)`), each top-level `and`/`or` starting a line.
    [] for any other shape."""
    depth, parts = 0, []  # the columns of the top-level `if`, `and`/`or` (after it, before `else`) and `else`
    seen_if = seen_else = False
    for token in tokens:
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif depth == 0 and token.type == tokenize.NAME and token.string in ("if", "else", "and", "or", "lambda", "for"):
            if token.string in ("lambda", "for") or (token.string == "if" and seen_if) or (token.string == "else" and (not seen_if or seen_else)):
                return []  # a lambda, a comprehension, nested conditionals: another split
            if token.string in ("and", "or") and seen_else:
                return []  # an operator after `else`: black splits it otherwise
            seen_if |= token.string == "if"
            seen_else |= token.string == "else"
            parts.append(token.start[1])
        elif token.type == tokenize.COMMENT or depth == 0 and token.string == ",":
            return []  # a comment stays where it is; a comma splits first (a tuple, a call's arguments)
    if seen_if != seen_else or not parts:
        return []  # half a conditional expression, or no operator to split before
    indent = line[: len(line) - len(line.lstrip())]
    if seen_if:  # black splits a conditional expression before `if` and `else` first, its condition only if still long
        ternary = [column for column in parts if line[column : column + 2] == "if" or line[column : column + 4] == "else"]
        condition = line[ternary[0] : ternary[1]].strip()
        if len(indent + condition) <= limit:
            parts = ternary
    pieces = [len(indent), *parts, len(line.rstrip())]
    if any(len(indent + line[a:b].strip()) > limit for a, b in zip(pieces, pieces[1:])):
        return []
    return _breaks_before(line, parts, eol + indent)


def _closing_group_cuts(line: str, tokens: list, limit: int, eol: str) -> list[tuple[int, int, str]]:
    """Black's split of a line that closes one parenthesized group and opens the last one, `) or (a and b)`
    (4d4e8c057's `should_skip_transform = (` / ... / `) or (...)`): `) or (` / the group's body one level deeper,
    one operand a line when still too long / `)`. [] for any other shape. `tokens` are the line's with its
    first `)` read as a name (`_`), which a line alone cannot close."""
    if len(tokens) < 5 or tokens[1].string not in ("and", "or") or tokens[2].string != "(" or tokens[-1].string != ")":
        return []
    depth = 0
    for index, token in enumerate(tokens[2:], start=2):
        depth += token.type == tokenize.OP and token.string in "([{"
        depth -= token.type == tokenize.OP and token.string in ")]}"
        if depth == 0 and index != len(tokens) - 1 or token.type == tokenize.COMMENT:
            return []  # the group closes before the line ends, or a comment
    open_col, close_col = tokens[2].end[1], tokens[-1].start[1]
    indent = line[: len(line) - len(line.lstrip())]
    return _group_cuts(line, open_col, close_col, indent, limit, eol)


def _group_cuts(line: str, open_col: int, close_col: int, indent: str, limit: int, eol: str) -> list[tuple[int, int, str]]:
    """The cuts that put a bracketed group's body on lines of its own, one level deeper than `indent`, and its
    closing bracket back at `indent`; a body still too long there is split as `_enclosed_cuts` splits it ([]: it
    cannot be)."""
    inner = indent + "    "
    body = line[open_col:close_col]
    lead, trail = len(body) - len(body.lstrip()), len(body) - len(body.rstrip())
    cuts = [(open_col, open_col + lead, eol + inner)]
    if len(inner + body.strip()) > limit:
        inside = _enclosed_cuts(inner + body.strip(), _tokens(inner + body.strip()), limit, eol)
        if not inside:
            return []
        shift = open_col + lead - len(inner)  # columns of the body alone -> columns of the line
        cuts += [(a + shift, b + shift, text) for a, b, text in inside]
    cuts.append((close_col - trail, close_col, eol + indent))
    return cuts


def _tokens(line: str) -> list:
    """The tokens of one line (comments kept, no indent or line-end tokens); [] for a line that does not tokenize."""
    layout = (tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER)
    try:
        return [t for t in tokenize.generate_tokens(io.StringIO(line + "\n").readline) if t.type not in layout]
    except (tokenize.TokenError, SyntaxError):
        return []


def _breaks_before(line: str, columns: list[int], head: str) -> list[tuple[int, int, str]]:
    """Cuts that start a new line (`head`: the line ending and the indent) at each column, the spaces before it dropped."""
    return [(column - (len(line[:column]) - len(line[:column].rstrip())), column, head) for column in columns]
