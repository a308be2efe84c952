"""In one C++/CUDA function, replace an expression with another: an edit kind, not a gate.

A recipe names the function and the expressions:

    function = "trtllm_custom_all_reduce"
    within = "lamport_peer_comm_buffer_ptrs"     # optional
    replace = [{from = "i + tp_size", to = "i + MAX_RANKS_PER_NODE"}]

The lexer finds every definition of the function (codemods.cpp.functions; a
qualified name matches by its last part too), tree-sitter the expressions in it. An expression matches a node of the function whose
tokens are the `from` tokens, whitespace and comments aside, so `i + tp_size`
matches in `a[i + tp_size]` and in `(i + tp_size) * 2`, but not in
`i + tp_size * 2`, in a comment, in a string, or in another function. With
`within`, only expressions inside the subscript of an array of that name
count (`params.ptrs[...]` for `within = "ptrs"`).

The edit touches only the tokens that differ between `from` and `to`
(`i + tp_size` -> `i + MAX_RANKS_PER_NODE` rewrites `tp_size` alone), so the
author's spacing, line breaks and comments stay byte for byte. A function that
has every `to` and no `from` is left alone (already replaced); a `from` found
in neither form, or a missing function, raises `NotFound`. `#define` and
`#undef` lines are blanked (same offsets) before parsing, because tree-sitter
mis-reads macro bodies with comments on continuation lines, and what a macro
body holds is not in a function anyway.

It admits no arch: the edit is the same on every arch.
"""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter

from codemods.cpp import functions, syntax
from codemods.gates import Edit, NotFound, SourceError, decode

KIND = "cpp_replace"
EDIT_KIND = True

_WRAP_HEAD = b"void __codemod_expression__() { "
_WRAP_TAIL = b"; }\n"


@dataclass(frozen=True)
class _Token:
    text: bytes
    start: int
    end: int


def rewrite(
    source: bytes,
    language: str = "cuda",
    *,
    function: str,
    replace: list[dict],
    within: str = "",
) -> list[Edit]:
    """The edits that replace each `from` with its `to` inside `function`; [] when already replaced."""
    decode(source)
    tree = syntax.parse_code(source, language)
    bodies = syntax.bodies(tree, functions.named(source, function))
    if not bodies:
        raise NotFound(f"function {function}() not found")
    edits: list[Edit] = []
    missing = []
    for pair in replace:
        old, new = _expression(pair["from"], language), _expression(pair["to"], language)
        news = _matches(bodies, new, within)
        # a `from` inside a `to` (n * 2 -> n * 2 + 1) is the replacement already made
        olds = [m for m in _matches(bodies, old, within) if not any(_inside(m, n) for n in news)]
        if olds:
            edits += [_edit(leaves, old, new, pair["to"].encode()) for leaves in olds]
        elif not news:
            missing.append(pair)
    if missing:
        where = f" in a subscript of {within}" if within else ""
        raise NotFound("; ".join(
            f"neither `{pair['from']}` nor `{pair['to']}` in function {function}(){where}" for pair in missing
        ))
    return sorted(set(edits))


def check_selector(name: str, value) -> str:
    """Why a recipe's selector value is unusable, or ""."""
    if name != "replace":
        return "" if isinstance(value, str) and value else f"{name!r} must be a non-empty string"
    if not isinstance(value, list) or not value:
        return "'replace' must be a non-empty list of {from = \"...\", to = \"...\"} tables"
    for n, pair in enumerate(value, 1):
        if not isinstance(pair, dict) or set(pair) != {"from", "to"}:
            return f"replace #{n} must be a table with exactly `from` and `to`"
        for key in ("from", "to"):
            if not isinstance(pair[key], str) or not pair[key].strip():
                return f"replace #{n}: `{key}` must be a non-empty string"
            try:
                _expression(pair[key], "cpp")
            except SourceError as exc:
                return f"replace #{n}: {exc}"
        if _texts(_expression(pair["from"], "cpp")) == _texts(_expression(pair["to"], "cpp")):
            return f"replace #{n}: `from` and `to` are the same expression"
    return ""


# ------------------------------------------------------------------ parsing


def _leaves(node: tree_sitter.Node) -> list[_Token]:
    """The tokens of `node`: its leaves in order, without comments and zero-width (missing) nodes."""
    out: list[_Token] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "comment" or current.start_byte == current.end_byte:
            continue
        if current.child_count == 0:
            out.append(_Token(current.text or b"", current.start_byte, current.end_byte))
            continue
        stack.extend(reversed(current.children))
    return out


def _texts(tokens: list[_Token]) -> list[bytes]:
    return [t.text for t in tokens]


def _expression(text: str, language: str) -> list[_Token]:
    """The tokens of one expression written in a recipe, with offsets into its own text."""
    data = text.encode("utf-8")
    tree = syntax.parser(language).parse(_WRAP_HEAD + data + _WRAP_TAIL)
    if tree.root_node.has_error:
        raise SourceError(f"`{text}` is not a C++ expression")
    shift = len(_WRAP_HEAD)
    tokens = [
        _Token(t.text, t.start - shift, t.end - shift)
        for t in _leaves(tree.root_node)
        if t.start >= shift and t.end <= shift + len(data)
    ]
    if not tokens:
        raise SourceError(f"`{text}` is not a C++ expression")
    return tokens


# ------------------------------------------------------------------ matching


def _matches(bodies, wanted: list[_Token], within: str) -> list[list[_Token]]:
    """The token lists of the nodes (one per span) whose tokens are `wanted`."""
    texts = _texts(wanted)
    found: dict[tuple[int, int], list[_Token]] = {}
    for definition, body in bodies:
        stack = [body]
        while stack:
            node = stack.pop()
            if node.type == "comment":
                continue
            inside = definition.body_start <= node.start_byte and node.end_byte <= definition.body_end
            if inside and node.is_named and (node.start_byte, node.end_byte) not in found:
                leaves = _leaves(node)
                if _texts(leaves) == texts and (not within or _in_subscript_of(node, within)):
                    found[(node.start_byte, node.end_byte)] = leaves
                    continue
            stack.extend(node.children)
    return [found[span] for span in sorted(found)]


def _inside(tokens: list[_Token], outer: list[_Token]) -> bool:
    return outer[0].start <= tokens[0].start and tokens[-1].end <= outer[-1].end


def _in_subscript_of(node: tree_sitter.Node, array: str) -> bool:
    """Whether the nearest subscript around `node` indexes an array named `array`."""
    child, parent = node, node.parent
    while parent is not None and parent.type != "function_definition":
        if parent.type == "subscript_expression":
            argument = parent.child_by_field_name("argument")
            if argument is not None and child.start_byte >= argument.end_byte:
                names = [t for t in _leaves(argument)]
                return bool(names) and names[-1].text.decode("utf-8", "replace") == array
        child, parent = parent, parent.parent
    return False


def _edit(found: list[_Token], old: list[_Token], new: list[_Token], new_text: bytes) -> Edit:
    """The edit turning the matched tokens into `new`, over only the tokens that differ."""
    a, b = _texts(old), _texts(new)
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(a), len(b)) - prefix and a[-1 - suffix] == b[-1 - suffix]:
        suffix += 1
    cut = found[prefix : len(found) - suffix]  # source tokens that go
    put = new[prefix : len(new) - suffix]  # recipe tokens that come
    if cut and put:
        return Edit(cut[0].start, cut[-1].end, new_text[put[0].start : put[-1].end])
    if put:  # pure insertion: carry the spacing written before (or after) the new tokens
        if prefix:
            at = found[prefix - 1].end
            return Edit(at, at, new_text[new[prefix - 1].end : put[-1].end])
        at = found[0].start
        return Edit(at, at, new_text[put[0].start : new[len(put)].start])
    if prefix:  # pure deletion: with the spacing before the tokens
        return Edit(found[prefix - 1].end, cut[-1].end, b"")
    return Edit(cut[0].start, found[len(cut)].start, b"")
