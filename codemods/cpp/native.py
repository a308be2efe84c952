"""codemod's compiled lexer (_lex.c, built into _lex.so by the package build, hatch_build.py), loaded with ctypes.

One implementation of what it does: there is no Python copy to fall back
on. A checkout or install without the library (a build that skipped the
hook, a copied tree) is an InstallBroken error naming the fix, raised when
the lexer is first used, not at import.
"""

from __future__ import annotations

import ctypes
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
    library.codemod_mask.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p)
    library.codemod_mask.restype = None
    return library


def mask(source: bytes) -> bytes:
    """`source` with comments and the insides of literals turned into spaces, newlines kept (same offsets): the
    lexemes and the rule are in _lex.c's header."""
    out = ctypes.create_string_buffer(len(source))
    _library().codemod_mask(source, len(source), out)
    return out.raw
