"""python_arch_map's capability tables (vLLM's `FI_ALLREDUCE_FUSION_MAX_SIZE_MB = {90: {...}, 100: {...}}`): integer
keys, tuning values, a row copied only from the one a recipe names (`value_from`), with a note that it was not measured."""

from textwrap import dedent

import pytest

from codemods.core.arch import DEFAULT_ARCHS, Arch, parse_archs
from codemods.gates import CannotWiden, apply_edits
from codemods.gates.python.python_arch_map import check_selector, find, notes, widen

SM12X = parse_archs("sm_120,sm_121")

TABLE = dedent('''\
    FI_ALLREDUCE_FUSION_MAX_SIZE_MB: dict[int, dict[int, float]] = {
        90: {
            2: 64,  # 64MB
            4: 2,  # 2MB
        },
        100: {
            2: 64,  # 64MB
            4: 32,  # 32MB
        },
        103: {2: 64, 4: 64},
    }
    ''')


ROWS = """\
    103: {2: 64, 4: 64},
    120: {
        2: 64,  # 64MB
        4: 32,  # 32MB
    },
    121: {
        2: 64,  # 64MB
        4: 32,  # 32MB
    },
"""


def _widen(source: str, targets=SM12X, **selector) -> str:
    data = source.encode()
    [gate] = find(data, DEFAULT_ARCHS, **selector)
    out = apply_edits(data, widen(data, gate, targets))
    [again] = find(out, DEFAULT_ARCHS, **selector)
    assert widen(out, again, targets) == []  # a second pass changes nothing
    return out.decode()


def test_a_module_constant_keyed_by_capability_is_a_table():
    [gate] = find(TABLE.encode(), DEFAULT_ARCHS)
    assert (gate.line, gate.context, gate.detail["table"]) == (1, "FI_ALLREDUCE_FUSION_MAX_SIZE_MB", True)
    assert gate.admits.names() == ["sm_90", "sm_100", "sm_103"]
    assert gate.detail["adds"] == []  # no value_from: nothing codemod may copy


@pytest.mark.parametrize(
    "before, after",
    [
        pytest.param(
            TABLE,
            TABLE.replace("    103: {2: 64, 4: 64},\n", ROWS),
            id="rows-of-several-lines-copied-as-written-after-the-greatest-key-below",
        ),
        pytest.param("LIMITS = {90: 1, 100: 2}\n", "LIMITS = {90: 1, 100: 2, 120: 2, 121: 2}\n", id="one-line-table"),
        pytest.param(
            "def pick(capability):\n    sizes = {90: 4, 100: 8}\n    return sizes.get(capability.to_int(), 0)\n",
            "def pick(capability):\n    sizes = {90: 4, 100: 8, 120: 8, 121: 8}\n    return sizes.get(capability.to_int(), 0)\n",
            id="a-local-looked-up-by-capability",
        ),
    ],
)
def test_widen_copies_the_named_row(before, after):
    assert _widen(before, value_from=100) == after


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("LIMITS = {90: 1, 100: 2, 120: 3, 121: 3}\n", id="already-has-the-rows"),
        pytest.param("def f(n):\n    sizes = {90: 4, 100: 8}\n    return sizes.get(n, 0)\n", id="a-local-not-looked-up-by-capability"),
        pytest.param("HEADS = {64: 1, 128: 2}\n", id="keys-that-are-no-capability"),
        pytest.param("LIMITS = {90: 1, 'x': 2}\n", id="a-key-that-is-no-number"),
        pytest.param('DOC = """\nT = {90: 1, 100: 2}\n"""\n', id="a-table-in-a-string"),
    ],
)
def test_noop(source):
    for gate in find(source.encode(), DEFAULT_ARCHS, value_from=100):
        assert widen(source.encode(), gate, SM12X) == []


def test_a_table_is_never_widened_without_value_from():
    [gate] = find(TABLE.encode(), DEFAULT_ARCHS)
    with pytest.raises(CannotWiden, match=r"capability table of tuning values and has no row for sm_120.*value_from = 100"):
        widen(TABLE.encode(), gate, SM12X)


def test_value_from_must_name_a_row_the_table_has():
    [gate] = find(TABLE.encode(), DEFAULT_ARCHS, value_from=110)
    assert gate.detail["adds"] == []
    with pytest.raises(CannotWiden, match=r"has no row 110 to copy for sm_120 \(rows: 90, 100, 103\)"):
        widen(TABLE.encode(), gate, SM12X)


def test_notes_say_the_rows_are_copied_not_measured():
    [gate] = find(TABLE.encode(), DEFAULT_ARCHS, value_from=100)
    assert notes(gate, SM12X) == [
        "FI_ALLREDUCE_FUSION_MAX_SIZE_MB: row(s) 120, 121 copied from row 100, not measured: tuning values of another "
        "arch; benchmark on the target GPU and adjust them (or back the change out with `codemod revert`)"
    ]
    assert notes(gate, (Arch.parse("sm_90"),)) == []  # nothing added, nothing to say


def test_check_selector():
    assert check_selector("value_from", 100) == ""
    assert "capability code" in check_selector("value_from", "100")
    assert "capability code" in check_selector("value_from", 99)
    assert check_selector("assigns", "X") == ""
