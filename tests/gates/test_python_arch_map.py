"""python_arch_map: a dict keyed by arch strings whose lookup fails for a missing arch; widen copies a sibling's value."""

import ast
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates import CannotWiden, Edit
from codemods.gates.python_arch_map import admits, find, keyed_by, widen
from fixtures.predicates import COMPAT as FLASHINFER_COMPAT

COMPAT = FLASHINFER_COMPAT.encode()


def test_a_map_with_a_raising_membership_test_is_a_gate():
    [gate] = find(COMPAT, DEFAULT_ARCHS)
    assert (gate.line, gate.context, gate.detail["lookup"]) == (4, "_TMEM_MAX_ALLOC_COLUMNS_MAP", 10)
    assert gate.text == '{"sm_100": 512, "sm_103": 512, "sm_120": 512}'
    assert gate.admits.names() == ["sm_100", "sm_103", "sm_120"] and gate.admits.admits(Arch.parse("sm_121")) is False


def test_after_the_upstream_fix_the_map_admits_sm121():
    fixed = COMPAT.replace(b'"sm_120": 512}', b'"sm_120": 512, "sm_121": 512}')  # 5a767523c
    [gate] = find(fixed, DEFAULT_ARCHS)
    assert gate.admits.names() == ["sm_100", "sm_103", "sm_120", "sm_121"]


@pytest.mark.parametrize(
    "lookup",
    [
        pytest.param("    return SMEM[cc]\n", id="a-bare-index-raises-keyerror"),
        pytest.param("    assert cc in SMEM, cc\n    return SMEM[cc]\n", id="assert"),
        pytest.param("    if cc not in SMEM:\n        return None\n    return SMEM[cc]\n", id="early-return"),
    ],
)
def test_lookups_that_fail(lookup):
    source = f'SMEM = {{"sm_90": 1, "sm_100a": 2, "sm_120f": 3}}\n\n\ndef capacity(cc):\n{lookup}'.encode()
    [gate] = find(source, DEFAULT_ARCHS)
    assert gate.admits.names() == ["sm_90", "sm_100", "sm_120", "sm_121"]  # a family key admits its later minors


@pytest.mark.parametrize(
    "source",
    [
        pytest.param('SMEM = {"sm_90": 1, "sm_100": 2}\n\ndef f(cc):\n    return SMEM.get(cc, 48)\n', id="get-with-a-default"),
        pytest.param('SMEM = {"sm_90": 1}\n\ndef f(cc):\n    if cc in SMEM:\n        return SMEM[cc]\n    return 48\n',
                     id="tested-before-the-index"),
        pytest.param('SMEM = {"sm_90": 1}\n\ndef f(cc):\n    try:\n        return SMEM[cc]\n    except KeyError:\n'
                     '        return 48\n', id="in-a-try"),
        pytest.param('SMEM = {"sm_90": 1}\n\ndef f():\n    return SMEM["sm_90"]\n', id="a-literal-key"),
        pytest.param('NAMES = {120: "blackwell", 90: "hopper"}\n\ndef f(cc):\n    return NAMES[cc]\n', id="integer-keys"),
        pytest.param('SMEM = {"sm_90": 1, "default": 2}\n\ndef f(cc):\n    return SMEM[cc]\n', id="a-key-that-is-no-arch"),
        pytest.param('SMEM = {"sm_90": 1}\n\nfor cc in SMEM:\n    print(cc)\n', id="only-iterated"),
    ],
)
def test_noop(source):
    assert find(source.encode(), DEFAULT_ARCHS) == []


def test_admits_reads_the_keys():
    assert admits('{"sm_100": 1, "sm_121": 2}', DEFAULT_ARCHS).names() == ["sm_100", "sm_121"]
    assert admits("SOME_MAP", DEFAULT_ARCHS).unknown


def _apply(source: bytes, edits: list[Edit]) -> bytes:
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        source = source[: edit.start] + edit.text + source[edit.end :]
    return source


def _widen(source: bytes, *targets: str) -> bytes:
    [gate] = find(source, DEFAULT_ARCHS)
    return _apply(source, widen(source, gate, tuple(Arch.parse(t) for t in targets)))


LOOKUP = "\n\ndef capacity(cc):\n    return SMEM[cc]\n"


def test_widen_adds_sm121_with_sm120s_value_and_splits_the_dict_as_black_does():
    # 5a767523c: the one-line dict grows to 89 columns, past black's 88, so it is split one entry a line
    after = _widen(COMPAT, "sm_121")
    assert after == COMPAT.replace(
        b'_TMEM_MAX_ALLOC_COLUMNS_MAP = {"sm_100": 512, "sm_103": 512, "sm_120": 512}\n',
        b'_TMEM_MAX_ALLOC_COLUMNS_MAP = {\n    "sm_100": 512,\n    "sm_103": 512,\n    "sm_120": 512,\n'
        b'    "sm_121": 512,\n}\n',
    )
    [gate] = find(after, DEFAULT_ARCHS)
    assert gate.admits.names() == ["sm_100", "sm_103", "sm_120", "sm_121"]
    assert widen(after, gate, (Arch.parse("sm_121"),)) == []  # a second run finds the key


def test_a_short_dict_stays_on_one_line():
    source = f'SMEM = {{"sm_100": 512, "sm_120": 256}}{LOOKUP}'.encode()
    assert _widen(source, "sm_121") == f'SMEM = {{"sm_100": 512, "sm_120": 256, "sm_121": 256}}{LOOKUP}'.encode()


def test_a_dict_split_one_entry_a_line_gains_a_line_in_arch_order():
    source = f'SMEM = {{\n    "sm_90": (128, 64),\n    "sm_100": (256, 64),  # tcgen05\n    "sm_120": (128, 32)\n}}{LOOKUP}'
    after = _widen(source.encode(), "sm_103", "sm_121", "sm_121")  # each target added once
    assert after.decode() == (
        'SMEM = {\n    "sm_90": (128, 64),\n    "sm_100": (256, 64),  # tcgen05\n    "sm_103": (256, 64),\n'
        f'    "sm_120": (128, 32),\n    "sm_121": (128, 32),\n}}{LOOKUP}'
    )


def test_the_new_key_is_spelled_like_the_others():
    source = f"SMEM = {{'sm100a': 1, 'sm120a': SMEM_120}}{LOOKUP}".encode()
    assert _widen(source, "sm_120", "sm_121") == f"SMEM = {{'sm100a': 1, 'sm120a': SMEM_120, 'sm121a': SMEM_120}}{LOOKUP}".encode()
    source = f'SMEM = {{"sm_120a": -1, "sm_90a": 2}}{LOOKUP}'.encode()  # after the greatest key below it
    assert _widen(source, "sm_121") == f'SMEM = {{"sm_120a": -1, "sm_121a": -1, "sm_90a": 2}}{LOOKUP}'.encode()


def test_assigns_selects_the_map_by_name():
    source = f'OTHER = {{"sm_100": 1}}\nSMEM = {{"sm_120": 2}}{LOOKUP}    return OTHER[cc]\n'.encode()
    assert [g.context for g in find(source, DEFAULT_ARCHS)] == ["OTHER", "SMEM"]
    [gate] = find(source, DEFAULT_ARCHS, assigns="SMEM")
    assert (gate.context, gate.line) == ("SMEM", 2)
    assert find(source, DEFAULT_ARCHS, assigns="NOPE") == []


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        pytest.param('SMEM = {"sm_100": 512, "sm_120": 512}', "sm_110",
                     "line 1: `SMEM` has no sm_11x key below sm_110 to copy a value from; add it by hand",
                     id="no-family-sibling"),
        pytest.param('SMEM = {"sm_100": 512, "sm_121": 512}', "sm_120",
                     "line 1: `SMEM` has no sm_12x key below sm_120 to copy a value from; add it by hand",
                     id="only-a-sibling-above"),
        pytest.param('SMEM = {"sm_100": 512, "sm_120": cols(120)}', "sm_121",
                     "line 1: `SMEM`'s value for \"sm_120\" is not a one-line literal or name to copy for sm_121",
                     id="computed-value"),
        pytest.param('SMEM = {"sm_100": 512, "sm_120": (\n    1,\n    2,\n)}', "sm_121",
                     "line 1: `SMEM`'s value for \"sm_120\" is not a one-line literal or name", id="multi-line-value"),
        pytest.param('SMEM = {\n    "sm_100": 1, "sm_120": 2,\n}', "sm_121",
                     "line 1: `SMEM` spans several lines but not one entry a line", id="two-entries-a-line"),
    ],
)
def test_widen_refuses_rather_than_invent_a_value(source, target, message):
    data = f"{source}{LOOKUP}".encode()
    [gate] = find(data, DEFAULT_ARCHS)
    with pytest.raises(CannotWiden, match=re.escape(message)):
        widen(data, gate, (Arch.parse(target),))


@settings(max_examples=80, deadline=None)
@given(
    codes=st.lists(st.sampled_from([80, 86, 89, 90, 100, 101, 103, 110, 120]), min_size=1, max_size=6, unique=True),
    values=st.lists(st.integers(-5, 4096), min_size=6, max_size=6),
    target=st.sampled_from(["sm_87", "sm_101", "sm_103", "sm_121"]),
    suffix=st.sampled_from(["", "a"]),
    quote=st.sampled_from(['"', "'"]),
    split=st.booleans(),
)
def test_widened_maps_parse_hold_the_siblings_value_and_stay_widened(codes, values, target, suffix, quote, split):
    arch = Arch.parse(target)
    keys = [f"{quote}sm_{code}{suffix if code >= 90 else ''}{quote}" for code in codes]
    entries = [f"{key}: {value}" for key, value in zip(keys, values)]
    body = "{\n" + "".join(f"    {e},\n" for e in entries) + "}" if split else "{" + ", ".join(entries) + "}"
    source = f"SMEM = {body}{LOOKUP}".encode()
    [gate] = find(source, DEFAULT_ARCHS)
    family = [(code, value) for code, value in zip(codes, values) if code // 10 == arch.major and code < arch.code]
    if arch.code in codes or not family:
        if arch.code not in codes:
            with pytest.raises(CannotWiden):
                widen(source, gate, (arch,))
        return
    after = _apply(source, widen(source, gate, (arch,)))
    literal = ast.literal_eval(after.decode().split("SMEM = ", 1)[1].split("\n\ndef", 1)[0])
    new_key = f"sm_{arch.code}{suffix if arch.code >= 90 else ''}"  # sm_8x has no `a`
    assert literal[new_key] == max(family)[1]
    if codes == sorted(codes):  # keys in arch order stay in arch order
        assert list(literal) == sorted(literal, key=lambda key: int(key[3:].rstrip("a")))
    [again] = find(after, DEFAULT_ARCHS)
    assert widen(after, again, (arch,)) == []


def _call(text: str) -> ast.Call:
    node = ast.parse(text, mode="eval").body
    assert isinstance(node, ast.Call)
    return node


def test_keyed_by_names_the_parameter_the_lookups_use():
    keyed = keyed_by(COMPAT, "_TMEM_MAX_ALLOC_COLUMNS_MAP")
    assert keyed is not None
    assert (keyed.function, keyed.parameter, keyed.position, keyed.keyword) == (
        "get_max_tmem_alloc_cols", "compute_capability", 0, True)
    assert keyed.passes(_call('f("sm_100")')) == "sm_100"
    assert keyed.passes(_call('f(compute_capability="sm_100a")')) == "sm_100a"
    for call in ("f(cc)", 'f(f"sm_{cc}")', "f(*args)", "f(**options)", "f()", 'f("hopper")'):
        assert keyed.passes(_call(call)) is None, call


def test_keyed_by_reads_a_default_and_a_keyword_only_parameter():
    source = b'SMEM = {"sm_90": 1}\n\n\ndef f(x, *, cc="sm_90"):\n    return SMEM[cc]\n'
    keyed = keyed_by(source, "SMEM")
    assert keyed is not None and (keyed.parameter, keyed.position) == ("cc", None)
    assert keyed.passes(_call("f(1)")) == "sm_90" and keyed.passes(_call('f(1, cc="sm_120")')) == "sm_120"
    assert keyed.passes(_call('f(1, "sm_120")')) == "sm_90"  # a second positional is not `cc`


@pytest.mark.parametrize(
    "source",
    [
        pytest.param('SMEM = {"sm_90": 1}\n\nclass T:\n    def f(self, cc):\n        return SMEM[cc]\n', id="a-method"),
        pytest.param('SMEM = {"sm_90": 1}\n\ndef f(cc):\n    def g():\n        return SMEM[cc]\n    return g()\n',
                     id="a-nested-function"),
        pytest.param('SMEM = {"sm_90": 1}\n\ndef f(cc):\n    cc = "sm_" + cc\n    return SMEM[cc]\n', id="rebound"),
        pytest.param('SMEM = {"sm_90": 1}\n\ndef f(d):\n    return SMEM[arch_of(d)]\n', id="a-computed-key"),
        pytest.param('SMEM = {"sm_90": 1}\n\ndef f(cc):\n    return SMEM[cc]\n\ndef g(cc):\n    return SMEM[cc]\n',
                     id="two-functions"),
        pytest.param('SMEM = {"sm_90": 1}\n\ncc = read()\nprint(SMEM[cc])\n', id="module-level"),
    ],
)
def test_keyed_by_is_none_when_no_one_parameter_is_the_key(source):
    assert find(source.encode(), DEFAULT_ARCHS) and keyed_by(source.encode(), "SMEM") is None
