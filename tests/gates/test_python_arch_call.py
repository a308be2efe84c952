"""python_arch_call: `has_arch(100) or has_arch(103)`, a function given an arch number, widened in its own spelling."""

from __future__ import annotations

from textwrap import dedent

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemods.core.arch import DEFAULT_ARCHS, Arch, parse_archs
from codemods.gates import CannotWiden, SourceError, apply_edits
from codemods.gates.python.python_arch_call import KIND, admits, find, widen

SM107 = Arch.parse("sm_107")
UNIVERSE = DEFAULT_ARCHS + (SM107,)

GENERATOR = dedent('''\
    def generate_gemm_operations(output_dir, architectures):
        arches = architectures.split(";")

        def has_arch(sm):
            return f"{sm}" in arches or f"{sm}-real" in arches

        operations = []
        operations += generate_sm120_operations(has_arch(120) or has_arch(121))
        operations += generate_sm100_operations(has_arch(100) or has_arch(103))
        operations += generate_sm90_operations(has_arch(90))
        return operations
    ''')


def _widen(source: str, archs: str, pick: str, **selector) -> str:
    data = source.encode()
    targets = parse_archs(archs)
    universe = tuple(dict.fromkeys(UNIVERSE + targets))
    [gate] = [g for g in find(data, universe, **selector) if g.text == pick]
    out = apply_edits(data, widen(data, gate, targets, universe))
    # the widened gate: the one holding every number the old one held (a split or parentheses move its start)
    [again] = [g for g in find(out, universe, **selector) if set(gate.detail["numbers"]) <= set(g.detail["numbers"])]
    assert widen(out, again, targets, universe) == []  # a second pass changes nothing
    return out.decode()


def test_find_reads_each_call_and_chain():
    gates = find(GENERATOR.encode(), UNIVERSE, function="generate_gemm_operations")
    assert [(g.kind, g.line, g.text, g.admits.names()) for g in gates] == [
        (KIND, 8, "has_arch(120) or has_arch(121)", ["sm_120", "sm_121"]),
        (KIND, 9, "has_arch(100) or has_arch(103)", ["sm_100", "sm_103"]),
        (KIND, 10, "has_arch(90)", ["sm_90"]),
    ]
    assert find(GENERATOR.encode(), UNIVERSE, function="other") == []
    assert find(GENERATOR.encode(), UNIVERSE, call="has_sm") == []


@pytest.mark.parametrize(
    "pick, archs, line",
    [
        pytest.param("has_arch(100) or has_arch(103)", "sm_107",
                     "    operations += generate_sm100_operations(\n        has_arch(100) or has_arch(103) or has_arch(107)\n    )",
                     id="appended-and-split-as-black-splits-the-call-290c09186"),
        pytest.param("has_arch(90)", "sm_80",
                     "    operations += generate_sm90_operations(has_arch(80) or has_arch(90))",
                     id="before-the-first-where-its-number-sorts"),
        pytest.param("has_arch(120) or has_arch(121)", "sm_120",
                     "    operations += generate_sm120_operations(has_arch(120) or has_arch(121))", id="already-admitted"),
    ],
)  # fmt: skip
def test_widen(pick, archs, line):
    out = _widen(GENERATOR, archs, pick)
    old = next(l for l in GENERATOR.splitlines() if pick in l)
    assert out == GENERATOR.replace(old, line)


def test_an_operand_of_an_and_gets_parentheses():
    source = "def f(flag):\n    if flag and has_arch(90):\n        run()\n"
    assert _widen(source, "sm_100", "has_arch(90)") == "def f(flag):\n    if flag and (has_arch(90) or has_arch(100)):\n        run()\n"


def test_a_call_given_no_literal_is_no_gate():
    assert find(b"def f(sm):\n    return has_arch(sm) or has_arch(100 + 3)\n", UNIVERSE) == []


def test_a_changed_gate_is_refused():
    data = GENERATOR.encode()
    [gate] = [g for g in find(data, UNIVERSE) if g.line == 10]
    with pytest.raises(CannotWiden, match="line 10: the source no longer has this test"):
        widen(data.replace(b"has_arch(90))", b"has_arch(89))"), gate, parse_archs("sm_80"))


@given(
    st.lists(st.sampled_from([80, 86, 89, 90, 100, 103, 107, 110, 120, 121]), min_size=1, max_size=5, unique=True),
    st.lists(st.sampled_from(["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103", "sm_107", "sm_110", "sm_120", "sm_121"]),
             min_size=1, max_size=3, unique=True),
)
def test_widened_admits_exactly_old_plus_targets(numbers, archs):
    text = " or ".join(f"has_arch({n})" for n in numbers)
    data = f"def f():\n    return generate({text})\n".encode()
    targets = tuple(Arch.parse(a) for a in archs)
    [gate] = find(data, UNIVERSE)
    out = apply_edits(data, widen(data, gate, targets, UNIVERSE))
    [after] = find(out, UNIVERSE)
    assert after.admits.admitted == gate.admits.admitted | set(targets)
    assert admits(after.text, UNIVERSE) == after.admits
    got = after.detail["numbers"]
    assert [n for n in got if n in numbers] == numbers  # the old calls stay, in their order
    assert sorted(got) == sorted(set(numbers) | {t.major * 10 + t.minor for t in targets})


def test_numbers_below_20_are_majors_and_a_mix_is_refused():
    majors = "def f():\n    return build(has_major(9) or has_major(10))\n"
    [gate] = find(majors.encode(), UNIVERSE, call="has_major")
    assert gate.admits.names() == ["sm_90", "sm_100", "sm_103", "sm_107"]
    assert _widen(majors, "sm_120", "has_major(9) or has_major(10)", call="has_major") == majors.replace(
        "has_major(10))", "has_major(10) or has_major(12))"
    )
    mixed = b"def f():\n    return build(has_arch(9) or has_arch(100))\n"
    [gate] = find(mixed, UNIVERSE)
    assert gate.admits.unknown == frozenset(UNIVERSE)
    with pytest.raises(CannotWiden, match="line 2: .* mixes majors and capabilities"):
        widen(mixed, gate, parse_archs("sm_120"), UNIVERSE)


def test_scan_lists_has_arch_calls_with_what_a_build_for_the_arch_gets(tmp_path):
    from codemods.audit.scan import scan

    (tmp_path / "generate_kernels.py").write_text(GENERATOR)
    records = [g for g in scan(tmp_path, Arch.parse("sm_120"), jobs=1).gates if g["kind"] == KIND]
    assert [(g["line"], g["text"], g["admits"], g["classification"]) for g in records] == [
        (8, "has_arch(120) or has_arch(121)", ["sm_120", "sm_121"], "admits"),
        (9, "has_arch(100) or has_arch(103)", ["sm_100", "sm_103"], "widenable"),
        (10, "has_arch(90)", ["sm_90"], "widenable"),
    ]
    assert records[1]["reason"] == "`generate_sm100_operations(...)` is given False in a build for sm_120"


def test_a_run_of_calls_in_a_longer_or_is_one_gate():
    """Found by mutating a recipe's case: in `has_arch(100) or other`, widening made `has_arch(100) or has_arch(103)
    or other`, read again as two gates, and `has_arch(100)` alone gained `or has_arch(103)` once more."""
    source = "def f(other):\n    return build(has_arch(100) or other or has_arch(90) or has_arch(89))\n"
    gates = find(source.encode(), UNIVERSE)
    assert [g.text for g in gates] == ["has_arch(100)", "has_arch(90) or has_arch(89)"]
    out = _widen(source, "sm_103", "has_arch(100)")
    assert out == source.replace("has_arch(100) or other", "has_arch(100) or has_arch(103) or other")


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            "# -*- coding: latin-1 -*-\ndef f():\n    s = 'é'; ok = has_arch(100)\n",
            id="latin-1-coding-line-read-as-utf-8-like-every-other-reader",
        ),
    ],
)
def test_a_coding_line_does_not_decide_how_the_file_is_read(source: str) -> None:
    """A `# coding: latin-1` line made Python's parser, given the bytes, read the file as Latin-1 while every span
    is UTF-8: the gate came out a byte off (`as_arch(100)\\n`). Refused, as any file that is not UTF-8 is."""
    with pytest.raises(SourceError, match="^not UTF-8"):
        find(source.encode("latin-1"), DEFAULT_ARCHS, call="has_arch")
