"""Capability values as real code spells them, for python_capability: arch names held as strings.

    if sm_version != "sm_120":          # "sm_120", "sm_100a", "compute_90": an arch by itself
        raise ValueError(...)
    elif backend in ("100", "110"):     # digits: an arch only where a recipe's `names` says so

A string reads as its arch's number (major * 10 + minor: "sm_120", "120" and
"12.0" are 120), so a string comparison admits what the same comparison of
`get_device_sm()` with ints admits; a new value is written in the spelling
of one already there (quotes, `sm_` prefix, dotted, `a`/`f` suffix).
"""

from __future__ import annotations

import ast
import re

from codemods.core.arch import Arch
from codemods.gates import CannotWiden

# An arch named by a string literal (`"sm_120"`, `'sm_100a'`, `"compute_90"`) next to a comparison: a
# capability value wherever it is compared (`if sm_version != "sm_120": raise`).
_QUOTED_ARCH_RE = re.compile(rb"[\"'](?:sm|compute)_\d{2,3}[af]?[\"']")
_QUOTES = (b'"sm_', b"'sm_", b'"compute_', b"'compute_")
# CuTe DSL's arch enum compared (`arch >= Arch.sm_100 and arch <= Arch.sm_100f`, `arch in (Arch.sm_120a, ...)`)
_MEMBER = b"Arch.sm_"
_MEMBER_COMPARED_RE = re.compile(
    rb"(?:[<>!=]=|[<>]|\bin)\s*[(\[{]?\s*\bArch\.sm_\d{2,3}[af]?\b|\bArch\.sm_\d{2,3}[af]?\s*(?:[<>!=]=|[<>]|\bin\b|\bnot\b)"
)
QUOTED_ARCH_TOKENS = (*_QUOTES, _MEMBER)  # one of them is in every file names_arch accepts (the finder's tokens)
_BEFORE_RE = re.compile(rb"(?:[!=]=|\bin)\s*[(\[{]?\s*\Z")
_AFTER_RE = re.compile(rb"\s*(?:[!=]=|\bin\b|\bnot\b)")
NAMED_ARCH_RE = re.compile(r"(?:sm|compute)_\d{2,3}[af]?")
NAME_RE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?:\(\))?")


def arch_comparisons(data: bytes, first: bool = False) -> list[int]:
    """Where `data` compares something with a string naming an arch (`!= "sm_120"`, `in ("sm_100a", ...)`):
    the offsets of those strings (with `first`, only the first found). A literal search, then a look around
    each hit: a regex that starts with a class is tried at every byte (1 s on FlashInfer's 17 MB of Python)."""
    found = []
    for quote in _QUOTES:
        pos = data.find(quote)
        while pos >= 0:
            string = _QUOTED_ARCH_RE.match(data, pos)
            if string and (_BEFORE_RE.search(data, max(0, pos - 40), pos) or _AFTER_RE.match(data, string.end())):
                found.append(pos)
                if first:
                    return found
            pos = data.find(quote, pos + 1)
    if _MEMBER in data:  # CuTe DSL's `Arch.sm_100f` compared
        for match in _MEMBER_COMPARED_RE.finditer(data):
            found.append(match.start())
            if first:
                return found
    return sorted(found)


def names_arch(data: bytes) -> bool:
    """Whether `data` compares something with a string naming an arch, or with a CuTe DSL `Arch.sm_100f`."""
    return bool(arch_comparisons(data, first=True))


def strings(node: ast.AST) -> list[str] | None:
    """The strings of a string literal or a non-empty collection of them; None for anything else."""
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else None
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts:
        found = [strings(item) for item in node.elts]
        return None if any(f is None or len(f) != 1 for f in found) else [f[0] for f in found if f]
    return None


def named(node: ast.AST) -> bool:
    """A string literal (or a collection of them) whose every string names an arch by itself (`"sm_120"`)."""
    values = strings(node)
    return bool(values) and all(NAMED_ARCH_RE.fullmatch(v) for v in values or ())


_STRING_STYLE_RE = re.compile(r"(?P<prefix>(?:sm|compute)_?)?(?:(?P<major>\d{1,2})\.\d|\d{2,4})(?P<variant>[af]?)", re.IGNORECASE)


def spell(arch: Arch, sample: str) -> str:
    """`arch` as a string literal in the style of `sample`, a literal the comparison holds (`"sm_100a"`, `'12.0'`)."""
    quote = sample.lstrip("rRuU")[:1]
    style = _STRING_STYLE_RE.fullmatch(sample.lstrip("rRuU")[1:-1])
    if style is None:  # find read it as an arch name: only a spelling this does not know
        raise CannotWiden(f"{sample} is an arch name in a spelling codemod does not write; edit it by hand")
    number = f"{arch.major}.{arch.minor}" if style["major"] else str(arch.code)
    variant = style["variant"]
    try:
        Arch.parse(f"sm_{arch.code}{variant}")
    except ValueError:
        variant = ""  # sm_80 has no `a` target: "sm_90a" gains "sm_80"
    return f"{quote}{style['prefix'] or ''}{number}{variant}{quote}"
