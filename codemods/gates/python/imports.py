"""Adding names to a Python file's `from ... import` statements, each in the statement's own style.

A name is imported from where a sibling of it comes from (`is_sm120_supported`
beside `is_sm100_supported`); the caller says where among the statement's names
it goes. Separators, parentheses and one-name-per-line layouts are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, overload

from codemods.core.lazy import LazyModule
from codemods.gates import CannotWiden, Edit, edit_between
from codemods.gates.python.cst_source import PythonSource
from codemods.gates.python.layout.text import line_length, tidy_insertion

if TYPE_CHECKING:
    import libcst as cst
    from libcst import helpers as cst_helpers

    # Where the added aliases go: (the statement, the aliases made, (new, sibling) names) -> the names in order.
    Place = Callable[[cst.ImportFrom, list[cst.ImportAlias], list[tuple[str, str]]], list[cst.ImportAlias]]
else:  # imported on first use: `codemod list` needs no libcst
    cst = LazyModule("libcst")
    cst_helpers = LazyModule("libcst.helpers")


def import_beside_siblings(
    parsed: PythonSource, needed: list[tuple[str, list[str], cst.CSTNode]], place: Place
) -> tuple[list[Edit], list[str]]:
    """Import each needed name from where a sibling comes from, unless it is bound already.

    `needed` holds (name, its siblings, a node where it is used); the first
    sibling imported by a `from ... import` decides the module.
    """
    by_import: dict[cst.ImportFrom, list[tuple[str, str]]] = {}
    scheduled: set[str] = set()
    for new, siblings, where in needed:
        if new in scheduled or parsed.bound(where, new):
            continue
        found = [(node, old) for old in siblings for node in parsed.importers(where, old)]
        if not found:
            raise CannotWiden(
                f"`{new}` is not defined or imported here, and `{siblings[0]}` is not imported "
                f"from a module it could come from too; add it by hand"
            )
        node, old = found[0]
        by_import.setdefault(node, []).append((new, old))
        scheduled.add(new)
    edits, symbols = [], []
    for node, names in by_import.items():
        edits.append(_extend_import(parsed, node, names, place))
        symbols += [_symbol(node, new) for new, _ in names]
    return edits, symbols


def _extend_import(
    parsed: PythonSource, node: cst.ImportFrom, names: list[tuple[str, str]], place: Place
) -> Edit:
    """Add `names` to the `from ... import` statement `node`.

    Each new name is placed right after its sibling (`place`), with the
    separator the import already uses, so an isort-ed, one-name-per-line
    import stays so.
    """
    # importers() yields no `import *`
    assert not isinstance(node.names, cst.ImportStar)
    present = {alias.evaluated_name for alias in node.names if alias.asname is None}
    # What libcst's AddImportsVisitor would add (new names, sorted, those imported already left out),
    # without its import: libcst.codemod takes a third of a second to import.
    added = [cst.ImportAlias(name=cst.Name(new)) for new in sorted({new for new, _ in names} - present)]
    aliases = place(node, added, names)
    new_text = parsed.module.code_for_node(node.with_changes(names=aliases)).encode()
    start, end = parsed.span(node)
    new_text = _exploded(parsed, node, aliases, new_text)
    edit = edit_between(parsed.source[start:end], new_text)
    assert edit is not None  # names were added, so the text changed
    return tidy_insertion(parsed.source, Edit(start + edit.start, start + edit.end, edit.text))


def _exploded(parsed: PythonSource, node: cst.ImportFrom, aliases: list[cst.ImportAlias], text: bytes) -> bytes:
    """`text`, the import with its names added, split one name a line as black splits an import it makes
    longer than the file's line length: `from m import (`, each name and a comma one level (4 spaces)
    deeper, `)` (SGLang 0.5.16's kvfp4_tensor.py). An import in parentheses already, or sharing its line
    with other code or a comment, is left as it is."""
    if node.lpar is not None:
        return text
    start, end = parsed.span(node)
    source = parsed.source
    line_end = parsed.line_end(end)
    eol = parsed.eol(start)
    indent = parsed.indent(start)
    rest = source[end:line_end]
    if indent is None or rest.strip() or not rest.endswith(b"\n"):
        return text
    if len((indent + text).decode("utf-8")) <= line_length(source):
        return text
    assert not isinstance(node.names, cst.ImportStar)  # importers() yields no `import *`
    head = source[start : parsed.span(node.names[0])[0]]  # `from m import `
    if b"\n" in head or b"\\" in head:
        return text
    names = [parsed.module.code_for_node(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)).encode() for a in aliases]
    inner = indent + b"    "
    return head + b"(" + eol + b"".join(inner + name + b"," + eol for name in names) + indent + b")"


def insert_at(
    node: cst.ImportFrom, aliases: list[cst.ImportAlias], index: int, alias: cst.ImportAlias
) -> list[cst.ImportAlias]:
    """`aliases` with `alias` at `index`, separated the way the import separates its names."""
    if index < len(aliases):
        before = aliases[index - 1].comma if index > 0 else cst.MaybeSentinel.DEFAULT
        comma = (
            _without_comment(before) if isinstance(before, cst.Comma) else _separator(node, aliases)
        )
        return [*aliases[:index], alias.with_changes(comma=comma), *aliases[index:]]
    anchor = aliases[-1]
    separator = _separator(node, aliases)
    trailing = anchor.comma
    if not isinstance(trailing, cst.Comma):
        return [*aliases[:-1], anchor.with_changes(comma=separator), alias]
    # The last name had a trailing comma: it moves to the new name, with any
    # comment lines before the closing parenthesis; the old name keeps its own comment.
    after, between = trailing.whitespace_after, separator.whitespace_after
    if isinstance(after, cst.ParenthesizedWhitespace) and isinstance(
        between, cst.ParenthesizedWhitespace
    ):
        anchor_comma = trailing.with_changes(
            whitespace_after=after.with_changes(
                empty_lines=[], indent=between.indent, last_line=between.last_line
            )
        )
        alias_comma = trailing.with_changes(
            whitespace_after=after.with_changes(
                first_line=cst.TrailingWhitespace(newline=after.first_line.newline)
            )
        )
    else:
        anchor_comma, alias_comma = separator, trailing
    return [
        *aliases[:-1],
        anchor.with_changes(comma=anchor_comma),
        alias.with_changes(comma=alias_comma),
    ]


def _separator(node: cst.ImportFrom, aliases: list[cst.ImportAlias]) -> cst.Comma:
    """The comma (and line break) the import puts between two names."""
    if len(aliases) > 1 and isinstance(aliases[-2].comma, cst.Comma):
        return _without_comment(aliases[-2].comma)
    if node.lpar is not None and isinstance(
        node.lpar.whitespace_after, cst.ParenthesizedWhitespace
    ):
        return _without_comment(cst.Comma(whitespace_after=node.lpar.whitespace_after))
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


@overload
def _without_comment(comma: cst.Comma) -> cst.Comma: ...
@overload
def _without_comment(comma: cst.Comma | cst.MaybeSentinel) -> cst.Comma | cst.MaybeSentinel: ...
def _without_comment(comma: cst.Comma | cst.MaybeSentinel) -> cst.Comma | cst.MaybeSentinel:
    if not isinstance(comma, cst.Comma):
        return comma
    after = comma.whitespace_after
    if isinstance(after, cst.ParenthesizedWhitespace):
        after = after.with_changes(
            first_line=cst.TrailingWhitespace(newline=after.first_line.newline), empty_lines=[]
        )
    return comma.with_changes(whitespace_after=after)


def _symbol(node: cst.ImportFrom, name: str) -> str:
    dots = "." * len(node.relative)
    module = cst_helpers.get_full_name_for_node(node.module) if node.module is not None else ""
    return f"{dots}{module}.{name}" if module else f"{dots}{name}"
