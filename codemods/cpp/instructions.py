"""Instructions only some archs have: the token families ptxas rejects elsewhere, and the JIT target of an arch.

`TOKEN_FAMILIES` is the table of instructions and wrapper names that ptxas
rejects on some archs (shared ARCH_FACTS section 3 A, and the reverse
direction of section 3 B). Each family says which majors have it; on every
other major its tokens are *blockers*: widening a guard over them to that
arch breaks the build. A `Hit` is one such token found in a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from codemods.core.arch import Arch


@dataclass(frozen=True)
class TokenFamily:
    """Instructions (and the wrapper names that emit them) only some majors have."""

    name: str
    majors: frozenset[int]  # the arch majors that have them; every other major lacks them
    instructions: tuple[str, ...]  # regexes for what ptxas rejects; group `token` (or all) is reported
    wrappers: tuple[str, ...]  # regexes for CuTe/CUTLASS names that emit them (may compile to a trap instead)
    reason: str

    def lacked_by(self, arch: Arch) -> bool:
        return arch.major not in self.majors


# ARCH_FACTS section 3 A: fails on every SM120/121 variant; section 2: wgmma needs exactly
# sm_90a, tcgen05 and 2-SM TMA exist on sm_100/103/110 only, block-scaled mma.sync on
# sm_120/121 only. Section 3 C: the CuTe wrappers compile to CUTE_INVALID_CONTROL_PATH
# (a trap at run time) where the instruction is missing, cuda::ptx::tcgen05_* fails in ptxas.
TOKEN_FAMILIES: tuple[TokenFamily, ...] = (
    TokenFamily(
        "wgmma",
        frozenset({9}),
        (r"\bwgmma\.[a-z_]+",),
        (r"\bSM90::GMMA\b", r"\bwarpgroup_(?:arrive|wait|commit_batch)\b", r"\bMMA_64x\d+"),
        "wgmma exists only on sm_90a; ptxas rejects it on every other target (ARCH_FACTS §2, §3A)",
    ),
    TokenFamily(
        "tcgen05",
        frozenset({10, 11}),
        (r"\btcgen05\.[a-z_]+", r"\bcuda::ptx::tcgen05_\w+"),
        (r"\bTMEM(?:::\w+)?\b", r"\btmem_\w+", r"\bUMMA\b", r"\bSM100_(?:MMA|TMEM|UTCCP)_\w*"),
        "tcgen05/TMEM exists only on sm_100/103/110 (a/f targets); ptxas rejects it elsewhere (ARCH_FACTS §2, §3A)",
    ),
    TokenFamily(
        "cta_group",
        frozenset({10, 11}),
        (r"\.cta_group::[12]",),
        (r"\bSM100_TMA_2SM_\w*",),
        "2-SM TMA (.cta_group::N) exists only on sm_100/103/110 (a/f targets) (ARCH_FACTS §2, §3A)",
    ),
    TokenFamily(
        "block-scaled mma.sync",
        frozenset({12}),
        (
            r"\bmma\.sync[^;]{0,200}?(?P<token>kind::(?:mxf8f6f4|mxf4nvf4|mxf4|f8f6f4))",
            r"\bmma\.sync[^;]{0,200}?(?P<token>\.block_scale)\b",
        ),
        (),
        "mma.sync kind::*/block_scale exists only on sm_120/121 (a/f targets); sm_100/103/110 do "
        "block-scaled MMA through tcgen05 (ARCH_FACTS §2, §3B)",
    ),
)

# (family, whether a wrapper name, compiled pattern) for every pattern of the table
TOKEN_PATTERNS = tuple(
    (family, wrapper, re.compile(pattern.encode()))
    for family in TOKEN_FAMILIES
    for wrapper, patterns in ((False, family.instructions), (True, family.wrappers))
    for pattern in patterns
)
_FAMILY = {family.name: family for family in TOKEN_FAMILIES}


def literal_prefix(pattern: bytes) -> bytes:
    """The literal bytes a regex starts with (after `\\b`), for a cheap search before the regex."""
    out = bytearray()
    i = 2 if pattern.startswith(rb"\b") else 0
    while i < len(pattern):
        c = pattern[i : i + 1]
        if c == b"\\" and i + 1 < len(pattern) and pattern[i + 1 : i + 2] in b".:-_":
            out += pattern[i + 1 : i + 2]
            i += 2
        elif c.isalnum() or c in b"_:":
            out += c
            i += 1
        else:
            break
    # a quantifier after the last literal makes it optional
    if i < len(pattern) and pattern[i : i + 1] in b"?*{" and out:
        out = out[:-1]
    return bytes(out)


PREFIXED_PATTERNS = tuple(
    (family, wrapper, pattern, literal_prefix(pattern.pattern)) for family, wrapper, pattern in TOKEN_PATTERNS
)


def may_hold(data: bytes, families: tuple[TokenFamily, ...], *, instructions: bool = False) -> bool:
    """Whether `data` may hold a token of `families` (a byte search for each pattern's literal start).

    With `instructions`, wrapper names do not count.
    """
    names = {family.name for family in families}
    return any(
        family.name in names and prefix in data and not (instructions and wrapper)
        for family, wrapper, _, prefix in PREFIXED_PATTERNS
    )


def family_reason(name: str) -> str:
    """Why the family's tokens break a build (its row of TOKEN_FAMILIES, or the ArchTag rule)."""
    return ARCH_TAG_REASON if name == ARCH_TAG else _FAMILY[name].reason


# A CUTLASS 3.x kernel's ArchTag picks its collectives: Sm90 ones use wgmma, Sm100/103/110 ones tcgen05/UMMA,
# Sm120/121 ones block-scaled mma.sync (ARCH_FACTS: it breaks when an SM120-only region is widened to SM100/103/110).
# Only the tokens are in the CUTLASS headers, which count as definitions; the tag is in the project's own file.
ARCH_TAG = "cutlass ArchTag"
ARCH_TAG_REASON = (
    "a CUTLASS ArchTag picks the collectives of its arch (Sm90: wgmma, Sm100/103/110: tcgen05, Sm120/121: "
    "block-scaled mma.sync), whose instructions other majors lack"
)
_ARCH_TAG_RE = re.compile(rb"\bcutlass::arch::Sm(90|100|101|103|110|120|121)\b")


def arch_tag(data: bytes, arch: Arch) -> Hit | None:
    """The first CUTLASS ArchTag in `data`, when it names another major than `arch`'s: the kernel it picks is
    built from collectives `arch` lacks. None when the first tag is of `arch`'s major, or there is none."""
    match = _ARCH_TAG_RE.search(data) if b"cutlass::arch::Sm" in data else None
    if match is None or int(match.group(1)) // 10 == arch.major:
        return None
    return Hit(ARCH_TAG, match.group().decode(), data.count(b"\n", 0, match.start()) + 1)


def lacked(hit: Hit, arch: Arch) -> bool:
    """Whether `arch` lacks what the hit needs: its family's instructions, or its ArchTag's major."""
    if hit.family == ARCH_TAG:
        return int(hit.token.rsplit("Sm", 1)[1]) // 10 != arch.major
    return _FAMILY[hit.family].lacked_by(arch)


def lacking(arch: Arch) -> tuple[TokenFamily, ...]:
    """The token families `arch` lacks."""
    return tuple(family for family in TOKEN_FAMILIES if family.lacked_by(arch))


_FIRST_MAJOR_WITH_ANY = min(major for family in TOKEN_FAMILIES for major in family.majors)


def kin(one: Arch, other: Arch) -> bool:
    """Whether two archs are of one kind: they have the same arch-specific instruction families of the table
    (sm_90; sm_100, sm_103 and sm_110; sm_120 and sm_121), or both come before the first major that has any (the
    GPUs before Hopper). Code written for one runs on its kin's instructions; a gate that admits only archs of
    another kind selects code written for those (a wgmma, tcgen05 or block-scaled kernel, a per-arch default)."""
    def kind(arch: Arch) -> frozenset[str] | int:
        if arch.major < _FIRST_MAJOR_WITH_ANY:
            return 0
        return frozenset(family.name for family in TOKEN_FAMILIES if not family.lacked_by(arch)) or arch.major

    return one.major == other.major or kind(one) == kind(other)


def jit_target(arch: Arch, *, all_specific: bool = False) -> Arch:
    """The target FlashInfer's JIT compiles for a GPU of `arch` (ARCH_FACTS section 1).

    Newer FlashInfer: 9.x -> `a`, 10.x and 11.x -> `a`, 12.0 -> `120f`,
    12.1 -> `121a`. FlashInfer up to 0.6.x appends `a` to every major >= 9
    (`all_specific`). Older archs build plain.
    """
    if arch.major < 9:
        return arch.plain
    if all_specific or arch.major in (9, 10, 11) or arch.minor != 0:
        return Arch(arch.major, arch.minor, "a")
    return Arch(arch.major, arch.minor, "f")


@dataclass(frozen=True)
class Hit:
    """One token of a family in a file, at its 1-based line."""

    family: str
    token: str
    line: int
    wrapper: bool = False  # a CuTe/CUTLASS name, not the instruction itself


def describe(hits: list[Hit], arch: Arch) -> list[str]:
    """One message per distinct token, at its first line."""
    seen: dict[str, Hit] = {}
    for hit in hits:
        seen.setdefault(hit.token, hit)
    return [f"{hit.token} (line {hit.line}): {family_reason(hit.family)}; not on {arch.name}" for hit in seen.values()]


def tokens(hits: list[Hit]) -> list[str]:
    """The distinct tokens of `hits`, in order of first appearance."""
    return list(dict.fromkeys(hit.token for hit in hits))
