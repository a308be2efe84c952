"""core.pytrees: trees kept within a budget of source bytes, parsed again after they are let go."""

from __future__ import annotations

import ast

import pytest

from codemods.core.pytrees import ParsedFiles, parse_or_none


def counting():
    parsed: list[bytes] = []

    def parse(data: bytes) -> ast.Module | None:
        parsed.append(data)
        return parse_or_none(data)

    return parsed, parse


def test_a_held_tree_is_not_parsed_again_and_other_bytes_are():
    parsed, parse = counting()
    files = ParsedFiles(1000, parse)
    first = files.tree("a.py", b"x = 1\n")
    assert files.tree("a.py", b"x = 1\n") is first
    assert files.held("a.py") == (b"x = 1\n", first)
    changed = files.tree("a.py", b"x = 2\n")  # a plan changed the file: its new bytes are parsed
    assert changed is not first and ast.unparse(changed) == "x = 2"
    assert parsed == [b"x = 1\n", b"x = 2\n"]


def test_the_least_recently_used_go_first_once_the_budget_is_passed():
    parsed, parse = counting()
    files = ParsedFiles(20, parse)
    a, b, c = b"a = 1\n", b"b = 22\n", b"c = 333\n"  # 6 + 7 + 8 bytes: the three do not fit in 20
    files.tree("a", a)
    files.tree("b", b)
    files.held("a")  # a is now used more recently than b
    files.tree("c", c)
    assert files.held("b") is None and files.held("a") is not None and files.held("c") is not None
    files.tree("b", b)
    assert parsed == [a, b, c, b]


def test_the_last_tree_stays_however_large():
    files = ParsedFiles(4)
    big = b"value = 'a long line'\n"
    assert files.tree("big", big) is not None
    assert files.held("big") is not None
    files.tree("next", b"y = 1\n")
    assert files.held("big") is None and files.held("next") is not None


def test_what_does_not_parse_is_none_and_an_error_of_the_parse_given_reaches_the_caller():
    files = ParsedFiles()
    assert files.tree("bad.py", b"def (:\n") is None
    assert files.held("bad.py") == (b"def (:\n", None)

    def strict(data: bytes) -> ast.Module:
        return ast.parse(data.decode("utf-8"))

    keyed = ParsedFiles(100, strict)
    with pytest.raises(UnicodeDecodeError):
        keyed.tree(b"\xff", b"\xff")
    assert keyed.held(b"\xff") is None  # nothing kept for a source that raised


def test_a_file_is_read_only_when_its_tree_is_not_held_and_no_bytes_is_no_tree():
    parsed, parse = counting()
    files = ParsedFiles(100, parse)
    reads: list[str] = []

    def reading(data: bytes | None):
        def read() -> bytes | None:
            reads.append("read")
            return data

        return read

    first = files.file("a.py", reading(b"x = 1\n"))
    assert files.file("a.py", reading(b"changed = 1\n")) is first  # held: not read again
    assert reads == ["read"] and parsed == [b"x = 1\n"]
    assert files.file("gone.py", reading(None)) is None and files.held("gone.py") is None
