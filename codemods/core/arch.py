"""GPU architectures and the sets of them a gate admits.

An `Arch` is one nvcc compile target (`sm_90`, `sm_100a`, `sm_120f`). Its
`macros()` are exactly the device-side macros nvcc 13.0 defines for it
(see shared ARCH_FACTS section 1): plain targets define only `__CUDA_ARCH__`;
`a` targets add `__CUDA_ARCH_FEAT_SM<NN>_ALL`, `__CUDA_ARCH_SPECIFIC__` and
`__CUDA_ARCH_FAMILY_SPECIFIC__`; `f` targets add only
`__CUDA_ARCH_FAMILY_SPECIFIC__`. The last two hold the exact arch (1030 on
sm_103f), not the family base.

An `ArchSet` is the verdict of a gate over a universe of archs: which are
admitted, and which cannot be decided (unknown). Everything else in the
universe is excluded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ARCH_RE = re.compile(
    r"""^\s*
    (?:(?:sm|compute)_?)?          # sm_120, sm120, compute_120 or bare
    (?:
        (?P<major>\d{1,2})\.(?P<minor>\d)      # 12.0
      | (?P<code>\d{2,4})                       # 120, 1200
    )
    (?P<variant>[af]?)
    \s*$""",
    re.VERBOSE | re.IGNORECASE,
)


class ArchParseError(ValueError):
    """A string that does not name a GPU arch."""


# The arch numbers a target may have: what nvcc 13.0 lists (75 ... 121, ARCH_FACTS), 70 and 72 (CUDA 12.x),
# 101 (Thor's number in CUDA 12.8-12.9, sm_110 since 13.0), and two FlashInfer names: 107 (an sm_100f kind, "107a",
# 290c09186) and 122 (beebc6074 sends backend "122" to the SM100 CUTLASS MoE module). A new GPU is one more number.
KNOWN_CODES = (70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 107, 110, 120, 121, 122)


@dataclass(frozen=True, order=True)
class Arch:
    major: int
    minor: int
    variant: str = ""  # "", "a" (arch-specific) or "f" (family-specific)

    @classmethod
    def parse(cls, text: str) -> Arch:
        """Accept `sm_120`, `sm120`, `sm_120a`, `120`, `12.0`, `1200`, `compute_120f`."""
        m = _ARCH_RE.match(text)
        if not m:
            raise ArchParseError(
                f"{text!r} is not an arch name; write it like sm_120, sm_90a, 120 or 12.0"
            )
        if m.group("major") is not None:
            major, minor = int(m.group("major")), int(m.group("minor"))
        else:
            code = int(m.group("code"))
            if code >= 300 and code % 10 == 0:
                code //= 10  # __CUDA_ARCH__ spelling: 900 -> sm_90, 1200 -> sm_120
            major, minor = divmod(code, 10)
        variant = m.group("variant").lower()
        if major < 1 or minor > 9:
            raise ArchParseError(f"{text!r} is not an arch name")
        if variant and major < 9:
            raise ArchParseError(f"{text!r}: only sm_90 and newer have 'a'/'f' variants")
        if variant == "f" and major == 9:
            raise ArchParseError(f"{text!r}: there is no sm_90f (nvcc rejects compute_90f); use sm_90a")
        return cls(major, minor, variant)

    @classmethod
    def parse_target(cls, text: str) -> Arch:
        """`parse` for an arch a user names (a recipe's `arch` and `admits`, `--arch`, `--archs`): its number is
        one of KNOWN_CODES, and after `sm_`/`compute_` it is the target's own (`sm_120`, not `sm_1200`), so a typo
        (`sm_12`, `sm_99`, `sm_1200`) is an error rather than another arch."""
        arch = cls.parse(text)
        m = _ARCH_RE.match(text)
        assert m is not None  # parse matched it
        prefixed = re.match(r"\s*(?:sm|compute)", text, re.IGNORECASE) is not None
        if prefixed and m.group("code") is not None and len(m.group("code")) == 4:
            raise ArchParseError(f"{text!r} spells __CUDA_ARCH__'s number; the target is {arch.name}")
        if arch.code not in KNOWN_CODES:
            known = ", ".join(f"sm_{code}" for code in KNOWN_CODES)
            raise ArchParseError(f"{text!r} is not an arch nvcc knows ({known})")
        return arch

    @property
    def cuda_arch(self) -> int:
        """The value of `__CUDA_ARCH__` on this target (1200 for sm_120)."""
        return self.major * 100 + self.minor * 10

    @property
    def code(self) -> int:
        """The number in the target name (120 for sm_120)."""
        return self.major * 10 + self.minor

    @property
    def name(self) -> str:
        return f"sm_{self.code}{self.variant}"

    @property
    def plain(self) -> Arch:
        return Arch(self.major, self.minor)

    def macros(self) -> dict[str, int]:
        """Device-side macros nvcc defines when compiling for this target."""
        defined = {"__CUDA_ARCH__": self.cuda_arch}
        if self.variant == "a":
            defined[f"__CUDA_ARCH_FEAT_SM{self.code}_ALL"] = 1
            defined["__CUDA_ARCH_SPECIFIC__"] = self.cuda_arch
            defined["__CUDA_ARCH_FAMILY_SPECIFIC__"] = self.cuda_arch
        elif self.variant == "f":
            defined["__CUDA_ARCH_FAMILY_SPECIFIC__"] = self.cuda_arch
        return defined

    def __str__(self) -> str:
        return self.name

DEFAULT_ARCHS: tuple[Arch, ...] = tuple(
    Arch.parse(n)
    for n in ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121")
)

# Macros whose value on every target this module knows exactly. Any other
# identifier in a guard is unknown to the evaluator.
ARCH_MACRO_RE = re.compile(
    r"^(__CUDA_ARCH__|__CUDA_ARCH_SPECIFIC__|__CUDA_ARCH_FAMILY_SPECIFIC__|__CUDA_ARCH_FEAT_SM\d+_ALL)$"
)


def is_arch_macro(name: str) -> bool:
    return bool(ARCH_MACRO_RE.match(name))


def parse_archs(text: str) -> tuple[Arch, ...]:
    """Parse a comma-separated list such as `sm_90,sm_100,120`."""
    archs = [Arch.parse_target(part) for part in text.split(",") if part.strip()]
    if not archs:
        raise ArchParseError("empty arch list")
    return tuple(dict.fromkeys(archs))


def family(arch: Arch, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> tuple[Arch, ...]:
    """Archs of the universe with the same major version (what a major-version gate admits)."""
    return tuple(a for a in universe if a.major == arch.major and a.variant == arch.variant)


def whole_families(archs: tuple[Arch, ...], universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> bool:
    """Whether `archs` hold every member of each one's family in `universe`, as `admit = "family"` asks
    (sm_100 and sm_103 for sm_103): a gate widened to them stands for whole majors."""
    asked = set(archs)
    return bool(asked) and all(asked.issuperset(family(arch, universe)) for arch in asked)


_MAJOR_STEP: dict[object, int] = {"sm": 10, "cuda_arch": 100}  # one major, where a value is a whole capability


def moved_upper_bound(meaning: object, bound: int, inclusive: bool, values: list) -> int | None:
    """Where the excluded upper bound of a range (`< bound`, `<= bound` when `inclusive`) moves to take in
    `values` (the targets' values for `meaning`: "sm", "cuda_arch", a major, sorted), all at or above it; None
    when one lies below. A `<` on a major's first capability moves to the next major's (`< 110` -> `< 120` for
    110, not `< 111`). The caller keeps it only where no other arch lies between the old bound and the new."""
    if not values or not all(isinstance(v, int) and v >= bound for v in values):
        return None
    step = _MAJOR_STEP.get(meaning)
    if inclusive:
        return values[-1]
    return (values[-1] // step + 1) * step if step and bound % step == 0 else values[-1] + 1


@dataclass(frozen=True)
class ArchSet:
    """A gate's verdict over a universe: admitted archs, undecidable archs, the rest excluded."""

    universe: tuple[Arch, ...]
    admitted: frozenset[Arch]
    unknown: frozenset[Arch] = frozenset()

    def admits(self, arch: Arch) -> bool | None:
        if arch in self.unknown:
            return None
        return arch in self.admitted

    def excluded(self) -> frozenset[Arch]:
        return frozenset(self.universe) - self.admitted - self.unknown

    def names(self) -> list[str]:
        return [a.name for a in self.universe if a in self.admitted]

    def unknown_names(self) -> list[str]:
        return [a.name for a in self.universe if a in self.unknown]

    def __str__(self) -> str:
        text = ",".join(self.names()) or "none"
        if self.unknown:
            text += f" (unknown: {','.join(self.unknown_names())})"
        return text
