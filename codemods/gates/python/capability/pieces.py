"""The statements around each capability call (or arch string compared), parsed alone instead of the whole file."""

from __future__ import annotations

import ast
import bisect
import re

from codemods.gates.python.ast_text import PythonText
from codemods.gates.python.capability.blocks import TOKENS, _holds, has_token
from codemods.gates.python.capability.locals import assigned
from codemods.gates.python.capability.values import arch_comparisons


_TOKEN_RE = re.compile(b"|".join(re.escape(token) for token in TOKENS))
_PY_LEXEME_RE = re.compile(rb"""\'\'\'.*?\'\'\'|\"\"\".*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|\#[^\n]*""", re.DOTALL)
_NOT_A_START = (b")", b"]", b"}", b"else", b"elif", b"except", b"finally", b"#")


def blocks(data: bytes) -> tuple[PythonText, list[ast.stmt]] | None:
    """The statements around each `get_device_capability` (or arch string compared), parsed alone: the innermost function (or the
    top-level statement) holding it, at its own line numbers and columns.

    None when that cannot be done safely: a block does not parse alone, or a name is bound from the call
    outside any function (its comparisons may be anywhere); the caller then parses the whole file.
    A whole-module parse of a 5000-line SGLang file costs more than all the rest of its scan.
    """
    text = PythonText(data)
    lines = data.split(b"\n")
    # multi-line strings (and comments): no statement starts inside one
    hidden: list[tuple[int, int]] = []
    for match in _PY_LEXEME_RE.finditer(data):
        if match.group().startswith(b"#"):
            if _holds(match.group()):
                hidden.append((match.start(), match.end()))
        elif b"\n" in match.group() or has_token(match.group()):
            hidden.append((match.start(), match.end()))
    hidden_starts = [span[0] for span in hidden]

    def in_hidden(offset: int) -> bool:
        i = bisect.bisect_right(hidden_starts, offset) - 1
        return i >= 0 and offset < hidden[i][1]

    def indent(number: int) -> int | None:
        """The indentation of line `number` (1-based) when a statement may start there."""
        line = lines[number - 1]
        body = line.lstrip(b" \t")
        if not body.strip() or body.startswith(_NOT_A_START) or in_hidden(text.starts[number - 1]):
            return None
        if number > 1 and lines[number - 2].rstrip(b"\r").endswith(b"\\"):
            return None
        return len(line) - len(body)

    blocks: dict[int, tuple[int, int, int]] = {}  # first line -> (first line, last line, indentation)
    for at in [match.start() for match in _TOKEN_RE.finditer(data)] + arch_comparisons(data):
        if in_hidden(at):
            continue
        number = text.line(at)
        limit = indent(number)
        limit = len(lines[number - 1]) if limit is None else limit + 1
        start = None
        for candidate in range(number, 0, -1):
            level = indent(candidate)
            if level is None or level >= limit:
                continue
            limit = level
            head = lines[candidate - 1].lstrip()
            if head.startswith((b"def ", b"async def ")) or level == 0:
                start = candidate
                break
        if start is None:
            return None
        while start > 1 and lines[start - 2].lstrip().startswith(b"@"):
            start -= 1  # its decorators
        level = len(lines[start - 1]) - len(lines[start - 1].lstrip(b" \t"))
        decorated = lines[start - 1].lstrip().startswith(b"@")
        end = len(lines)
        for candidate in range(number + 1, len(lines) + 1):
            found = indent(candidate)
            if found is not None and found <= level:
                head = lines[candidate - 1].lstrip()
                if decorated and head.startswith((b"@", b"def ", b"async def ", b"class ")):
                    decorated = head.startswith(b"@")  # the decorated definition itself belongs to the block
                    continue
                end = candidate - 1
                break
        if start not in blocks or blocks[start][1] < end:
            blocks[start] = (start, end, level)
    body: list[ast.stmt] = []
    covered = -1
    for start, end, level in sorted(blocks.values()):
        if start <= covered:
            if end > covered:
                return None  # overlapping blocks: let the whole file decide
            continue
        covered = end
        piece = b"\n".join(lines[start - 1 : end])
        prefix = b"\n" * (start - 1) if level == 0 else b"\n" * (start - 2) + b"if 1:\n"
        try:
            parsed = ast.parse((prefix + piece).decode("utf-8"))  # as UTF-8, never as a `# coding:` line says
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if level == 0:
            statements = parsed.body
        else:
            wrapper = parsed.body[0]
            assert isinstance(wrapper, ast.If)  # the `if 1:` put around the indented piece
            statements = wrapper.body
        if level == 0 and not isinstance(statements[0], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if any(
                side != "" for node in ast.walk(parsed) if isinstance(node, ast.Assign)
                for target in node.targets for _, side in assigned(target, node.value, lambda name: "")
            ):  # fmt: skip
                return None  # a name bound at module level: compared anywhere
        body += statements
    return text, body
