"""python_arch_map: a dict keyed by arch strings whose lookup fails for a missing arch (scan only)."""

import ast

import pytest

from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates import CannotWiden
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


def test_admits_reads_the_keys_and_widen_is_refused():
    assert admits('{"sm_100": 1, "sm_121": 2}', DEFAULT_ARCHS).names() == ["sm_100", "sm_121"]
    assert admits("SOME_MAP", DEFAULT_ARCHS).unknown
    [gate] = find(COMPAT, DEFAULT_ARCHS)
    with pytest.raises(CannotWiden, match="line 4: `_TMEM_MAX_ALLOC_COLUMNS_MAP` needs a value for the new arch's key"):
        widen(COMPAT, gate, (Arch.parse("sm_121"),))


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
