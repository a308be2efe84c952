"""python_arch_or: widening is idempotent and exact over generated `or` chains where code writes them.

For a generated chain (nested or parenthesized `or`s, split over lines or not) in a test, an assignment,
a return, an `and` or a `not`, a second pass changes nothing and the widened chain admits exactly what it
admitted plus the targets, by `find` and by the kind's `admits` on its new text. python_arch_test reads
predicates with this kind's code (`operands`, `predicate_of`, `admits_of`, `new_predicates`).
"""

from textwrap import indent

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates import apply_edits
from codemods.gates.python.predicates.reading import read, table
from codemods.gates.python.python_arch_or import admits, find, scoped, widen

UNITS = {80: 8, 90: 9, 100: 10, 110: 11, 120: 12}
KNOWN = table(
    {f"{dot}is_sm{n}{tail}": [f"sm_{n // 10}x"] for n in UNITS for dot, tail in (("", "_supported"), (".", ""), (".", "_supported"))},
    "sglang.toml",
)
SPELLINGS = ["is_sm{n}_supported()", "_is_sm{n}_supported", "get_platform().is_sm{n}", "cls.is_sm{n}_supported(0)"]
# A method called on `cls` means what the class defines (never a table or a module function): its methods.
BASE = "class Base:\n" + "".join(
    f"    @classmethod\n    def is_sm{n}_supported(cls, device):\n        return get_device_capability(device)[0] == {m}\n\n"
    for n, m in UNITS.items()
)
PLACES = {
    "if": "    if {chain}:\n        return 1\n",
    "assign": "    ok = {chain}\n",
    "return": "    return {chain}\n",
    "and": "    return ready and ({chain})\n",
    "not": "    if not ({chain}):\n        raise ValueError('needs the arch')\n",
}


def _archs(numbers) -> frozenset[Arch]:
    return frozenset(a for a in DEFAULT_ARCHS if a.major in {UNITS[n] for n in numbers})


def _grouped(draw, parts: list[str]) -> str:
    """`parts` joined by `or`, with some runs parenthesized (`(P or Q) or R`), split over lines or not."""
    if len(parts) > 2 and draw(st.booleans()):
        cut = draw(st.integers(1, len(parts) - 1))
        left, right = parts[:cut], parts[cut:]
        parts = [f"({' or '.join(left)})" if len(left) > 1 else left[0], *right] if draw(st.booleans()) else [
            *left, f"({' or '.join(right)})" if len(right) > 1 else right[0]
        ]
    if draw(st.booleans()):
        return "(\n        " + "\n        or ".join(parts) + "\n    )"
    return " or ".join(parts)


@st.composite
def cases(draw):
    spelling = draw(st.sampled_from(SPELLINGS))
    chosen = draw(st.lists(st.sampled_from(sorted(UNITS)), min_size=2, max_size=4, unique=True))
    chain = _grouped(draw, [spelling.format(n=n) for n in chosen])
    place = draw(st.sampled_from(sorted(PLACES)))
    if spelling.startswith("_"):  # names defined at module level from the function each stands for
        head = f"from m import {', '.join(f'is_sm{n}_supported' for n in sorted(chosen))}\n\n" + "".join(
            f"_is_sm{n}_supported = _is_cuda and is_sm{n}_supported()\n" for n in sorted(chosen)
        )
    elif spelling.startswith("is_"):
        head = f"from m import {', '.join(f'is_sm{n}_supported' for n in sorted(chosen))}\n"
    elif spelling.startswith("cls."):
        head = BASE
    else:
        head = "from m import get_platform\n"
    if spelling.startswith("cls."):  # a classmethod of a subclass
        body = PLACES[place].format(chain=chain.replace("\n", "\n    "))
        source = f"{head}\nclass Platform(Base):\n    @classmethod\n    def check(cls, ready):\n" + indent(body, "    ")
    else:
        source = f"{head}\n\ndef check(ready, p):\n" + PLACES[place].format(chain=chain)
    picked = draw(st.lists(st.sampled_from(sorted(UNITS)), min_size=1, max_size=2, unique=True))
    return source.encode(), _archs(chosen), tuple(sorted(_archs(picked)))


def _widened(source: bytes, meanings: dict, targets: tuple[Arch, ...]) -> bytes:
    edits = [e for gate in find(source, DEFAULT_ARCHS, meanings) for e in widen(source, gate, targets, DEFAULT_ARCHS, meanings)]
    return apply_edits(source, edits)


@pytest.mark.exhaustive
@settings(deadline=None, max_examples=200)
@given(case=cases())
def test_widen_twice_is_widen_once_and_admits_old_plus_targets(case) -> None:
    source, old, targets = case
    meanings = {**KNOWN, **read(source, "x.py", KNOWN)}
    [gate] = find(source, DEFAULT_ARCHS, meanings)
    assert gate.admits.admitted == old
    widened = _widened(source, meanings, targets)
    meanings_after = {**meanings, **read(widened, "x.py", meanings)}  # a copied `_is_sm120_supported = ...` included
    [after] = find(widened, DEFAULT_ARCHS, meanings_after)
    expected = old | set(targets)
    assert after.admits.admitted == expected, widened.decode()
    # as the registry calls it: in the gate's class, `cls.` calls mean its methods
    assert admits(after.text, DEFAULT_ARCHS, scoped(meanings_after, after.detail.get("class"))).admitted == expected
    assert _widened(widened, meanings_after, targets) == widened
