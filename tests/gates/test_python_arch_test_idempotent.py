"""python_arch_test: widening is idempotent and exact over generated tests in every shape the kind handles.

For a generated `if`/`elif`/`while`/`assert` test (a predicate, an `or` chain, `not P`, `not (P or Q)`,
`not P and not Q`, with other operands before and after, parenthesized or not): a second pass changes
nothing, and the widened gate admits exactly what it admitted plus the targets, read both by `find` on the
widened file and by the kind's `admits` on the gate's text after the edits (what the planner checks).
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates import Edit, Gate, apply_edits
from codemods.gates.python.predicates.reading import read, table
from codemods.gates.python.python_arch_test import admits, find, widen

# (table, how a predicate of number N is spelled, the numbers and the archs each admits)
SGLANG_UNITS = {80: (8,), 90: (9,), 100: (10,), 110: (11,), 120: (12,)}
FLASHINFER_UNITS = {100: (10,), 110: (11,), 120: ((12, 0),), 121: ((12, 1),)}


def _archs(unit: tuple) -> frozenset[Arch]:
    return frozenset(a for a in DEFAULT_ARCHS for u in unit if (a.major == u if isinstance(u, int) else (a.major, a.minor) == u))


PROJECTS = {
    "sglang": (
        table({f"is_sm{n}_supported": [f"sm_{n // 10}x"] for n in SGLANG_UNITS}, "sglang.toml"),
        "is_sm{n}_supported()",
        SGLANG_UNITS,
    ),
    "flashinfer": (
        table(
            {"is_sm100a_supported": ["sm_10x"], "is_sm110a_supported": ["sm_11x"],
             "is_sm120a_supported": ["sm_120"], "is_sm121a_supported": ["sm_121"]},
            "flashinfer.toml",
        ),  # fmt: skip
        "is_sm{n}a_supported(d)",
        FLASHINFER_UNITS,
    ),
    # SGLang's module-level names (`_is_sm100_supported = _is_cuda and is_sm100_supported()`), copied to widen
    "sglang-names": (
        table({f"is_sm{n}_supported": [f"sm_{n // 10}x"] for n in SGLANG_UNITS}, "sglang.toml"),
        "_is_sm{n}_supported",
        SGLANG_UNITS,
    ),
    # FlashInfer aot.py's build flags, each what its `has_sm("compute_NNN", ...)` entry builds for
    "flashinfer-aot": ({}, "has_sm{n}", {100: ((10, 0),), 103: ((10, 3),), 120: ((12, 0),), 121: ((12, 1),)}),
}
FLAGS = """\
def detect_sm_capabilities():
    return {{
{entries}    }}
"""
EXTRAS = ["ready", "not ready", "(ready or x.is_cpu)", "self.fp4", "x.is_cuda", "enabled(1)", "self.enable_nsa_prefill_context_parallel_fp4_for_the_indexer"]
# another function of the file that shows how it negates several predicates (or does not)
STYLES = {
    "none": "",
    "grouped": "\n\ndef other():\n    if not ({a} or {b}):\n        return None\n",
    "spread": "\n\ndef other():\n    if not {a} and not {b}:\n        return None\n",
}


@st.composite
def cases(draw):
    project = draw(st.sampled_from(sorted(PROJECTS)))
    known, spelling, units = PROJECTS[project]
    numbers = sorted(units)
    shape = draw(st.sampled_from(["single", "or", "not", "not_or", "and_not"]))
    count = 1 if shape in ("single", "not") else draw(st.integers(2, 3))
    chosen = draw(st.lists(st.sampled_from(numbers), min_size=count, max_size=count, unique=True))
    predicates = [spelling.format(n=n) for n in chosen]
    core = {
        "single": predicates[0],
        "or": " or ".join(predicates),
        "not": "not " + predicates[0],
        "not_or": "not (" + " or ".join(predicates) + ")",
        "and_not": " and ".join("not " + p for p in predicates),
    }[shape]
    before = draw(st.lists(st.sampled_from(EXTRAS), max_size=2, unique=True))
    after = draw(st.lists(st.sampled_from([e for e in EXTRAS if e not in before]), max_size=2, unique=True))
    if draw(st.booleans()) or (shape == "or" and (before or after)):
        core = f"({core})"
    test = " and ".join([*before, core, *after])
    if draw(st.booleans()):
        test = f"({test})"
    statement = draw(st.sampled_from(["if", "elif", "while", "assert"]))
    if statement == "assert":
        body = f"    assert {test}, 'needs the arch'\n"
    elif statement == "elif":
        body = f"    if x.is_cpu:\n        pass\n    elif {test}:\n        raise ValueError('needs the arch')\n"
    else:
        body = f"    {statement} {test}:\n        raise ValueError('needs the arch')\n"
    a, b = (spelling.format(n=n) for n in numbers[:2])
    style = STYLES[draw(st.sampled_from(sorted(STYLES)))].format(a=a, b=b)
    used = sorted({n for n in chosen} | (set(numbers[:2]) if style else set()))
    if spelling.startswith("_"):  # each name defined from the function it stands for
        head = f"from m import {', '.join(f'is_sm{n}_supported' for n in used)}\n\n" + "".join(
            f"_is_sm{n}_supported = _is_cuda and is_sm{n}_supported()\n" for n in used
        )
    elif spelling.startswith("has_"):  # flags bound in the function, what each builds for said below
        body = "".join(f'    has_sm{n} = sm_capabilities.get("sm{n}", False)\n' for n in numbers) + body
        head = FLAGS.format(entries="".join(f'        "sm{n}": has_sm("compute_{n}", "12.9"),\n' for n in numbers))
    else:
        head = f"from m import {', '.join(spelling.format(n=n).split('(')[0] for n in used)}\n"
    source = f"{head}\n\ndef check(self, x, d):\n{body}{style}"
    old = frozenset().union(*(_archs(units[n]) for n in chosen))
    picked = draw(st.lists(st.sampled_from(numbers), min_size=1, max_size=2, unique=True))
    targets = frozenset().union(*(_archs(units[n]) for n in picked))
    return source.encode(), {**known, **read(source.encode(), "x.py", known)}, old, tuple(sorted(targets))


def _widened(source: bytes, meanings: dict, targets: tuple[Arch, ...]) -> tuple[bytes, list[tuple[Gate, list[Edit]]]]:
    planned = [(gate, widen(source, gate, targets, DEFAULT_ARCHS, meanings)) for gate in find(source, DEFAULT_ARCHS, meanings, function="check")]
    return apply_edits(source, [e for _, edits in planned for e in edits]), planned


def _span_after(gate: Gate, edits: list[Edit]) -> tuple[int, int]:
    """Where the gate's text is after `edits`, the planner's way: pure insertions at its edges belong to it."""
    unique = set(edits)
    shift = sum(len(e.text) - (e.end - e.start) for e in unique if e.end <= gate.start and not e.start == e.end == gate.start)
    grow = sum(len(e.text) - (e.end - e.start) for e in unique if e.end <= gate.end)
    return gate.start + shift, gate.end + grow


@pytest.mark.exhaustive
@settings(deadline=None, max_examples=300)
@given(case=cases())
def test_widen_twice_is_widen_once_and_admits_old_plus_targets(case) -> None:
    source, meanings, old, targets = case
    [gate] = find(source, DEFAULT_ARCHS, meanings, function="check")
    assert gate.admits.admitted == old
    widened, planned = _widened(source, meanings, targets)
    expected = old | set(targets)
    all_edits = [e for _, edits in planned for e in edits]
    meanings_after = {**meanings, **read(widened, "x.py", meanings)}  # a copied `_is_sm120_supported = ...` included
    start, end = _span_after(gate, all_edits)
    assert admits(widened[start:end].decode(), DEFAULT_ARCHS, meanings_after).admitted == expected, widened.decode()
    [after] = find(widened, DEFAULT_ARCHS, meanings_after, function="check")
    assert after.admits.admitted == expected, widened.decode()
    again, _ = _widened(widened, meanings_after, targets)
    assert again == widened


def test_admits_reads_a_test_split_before_its_parenthesis() -> None:
    # `if (P(d) and enabled(1) and not ready):` widened past the line: the planner's text of the gate
    # starts with the line break black puts before `(P(d) or Q(d))`
    source = b"from m import is_sm100a_supported\n\n\ndef check(self, x, d):\n    if (is_sm100a_supported(d) and enabled(1) and not ready):\n        raise ValueError('needs the arch')\n"
    known = PROJECTS["flashinfer"][0]
    [gate] = find(source, DEFAULT_ARCHS, known)
    edits = widen(source, gate, tuple(_archs(((12, 0),))), DEFAULT_ARCHS, known)
    widened = apply_edits(source, edits)
    start, end = _span_after(gate, edits)
    assert widened[start:end] == b"\n        (is_sm100a_supported(d) or is_sm120a_supported(d))"
    assert admits(widened[start:end].decode(), DEFAULT_ARCHS, known).names() == ["sm_100", "sm_103", "sm_120"]
