"""codemod's compiled lexer (_lex.c, built into _lex.so by the package build, hatch_build.py), loaded with ctypes.

One implementation of what it does: there is no Python copy to fall back
on. A checkout or install without the library (a build that skipped the
hook, a copied tree) is an InstallBroken error naming the fix, raised when
the lexer is first used, not at import.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache
from pathlib import Path

from codemods.core.errors import InstallBroken

LIBRARY = Path(__file__).with_name("_lex.so")


@cache
def _library() -> ctypes.CDLL:
    try:
        library = ctypes.CDLL(str(LIBRARY))
    except OSError as exc:
        raise InstallBroken(
            f"codemod's compiled lexer {LIBRARY} is missing or unloadable ({exc}); the package build compiles it with gcc"
        ) from None
    for masker in (library.codemod_mask, library.codemod_mask_comments):
        masker.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p)
        masker.restype = None
    return library


def _masked(masker: str, source: bytes) -> bytes:
    """What the library's `masker` writes for `source`: the same number of bytes."""
    out = ctypes.create_string_buffer(len(source))
    getattr(_library(), masker)(source, len(source), out)
    return out.raw


def mask(source: bytes) -> bytes:
    """`source` with comments and the insides of literals turned into spaces, newlines kept (same offsets): the
    lexemes and the rule are in _lex.c's header."""
    return _masked("codemod_mask", source)


def mask_comments(source: bytes) -> bytes:
    """`source` with its closed comments turned into spaces, newlines kept, every literal as it is (_lex.c's
    codemod_mask_comments says which lexemes)."""
    return _masked("codemod_mask_comments", source)


CLASSIFY = ctypes.CFUNCTYPE(ctypes.c_longlong, ctypes.c_longlong, ctypes.c_longlong)
LOCAL_CLASS = ctypes.CFUNCTYPE(ctypes.c_longlong, ctypes.c_longlong)
DEFINE = ctypes.CFUNCTYPE(None, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_longlong)


@cache
def _walker() -> Callable[..., int]:
    walk = _library().codemod_walk
    walk.argtypes = (
        ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_longlong), ctypes.c_size_t, ctypes.c_size_t,
        CLASSIFY, LOCAL_CLASS, DEFINE, ctypes.POINTER(ctypes.c_longlong),
    )
    walk.restype = ctypes.c_int
    return walk


def walk(
    code: bytes,
    offsets: list[int],
    until: int,
    classify: Callable[[int, int], int],
    local_class: Callable[[int], bool],
    define: Callable[[int, int, int, int], None],
) -> list[int]:
    """The brace walk of a masked source (_lex.c's codemod_walk): for each of `offsets` (ascending), the number
    `classify` gave the innermost function around it (0: none). `classify(head, brace)` says what a `{` at a
    scope or class level opens (kind | name number << 2), `local_class(brace)` whether a `{` in a body opens a
    class, `define(name, start, body, end)` is told of each function body as it closes. What a callback
    raises is raised here, after the walk."""
    failures: list[BaseException] = []

    def guarded(function: Callable, fallback):
        def call(*args):
            try:
                return function(*args)
            except BaseException as exc:  # noqa: BLE001 - carried across the C frames, raised below
                failures.append(exc)
                return fallback

        return call

    count = len(offsets)
    sorted_offsets = (ctypes.c_longlong * max(count, 1))(*offsets)
    names = (ctypes.c_longlong * max(count, 1))()
    status = _walker()(
        code, len(code), sorted_offsets, count, min(until, len(code)),
        CLASSIFY(guarded(classify, -1)), LOCAL_CLASS(guarded(lambda brace: int(local_class(brace)), 0)),
        DEFINE(guarded(define, None)), names,
    )
    if failures:
        raise failures[0]
    if status == -1:
        raise MemoryError("codemod's compiled lexer ran out of memory")
    return list(names[:count])
