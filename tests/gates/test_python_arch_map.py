"""python_arch_map: a dict keyed by arch strings whose lookup fails for a missing arch; widen copies a sibling's value."""

import ast
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates import CannotWiden, Edit, SourceError, apply_edits
from codemods.gates.python.python_arch_map import admits, find, keyed_by, widen
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
                     "line 1: `SMEM`'s value for \"sm_120\" is not a one-line literal or name, or a call of names, to copy for sm_121",
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


# FlashInfer's benchmark table (a5ff03391's parent, benchmarks/routines/flashinfer_benchmark_utils.py), cut short:
# routine name -> a map keyed by compute capability strings, read with `.get(cc, [])` through the outer dict.
BENCH = '''routine_cc_to_supported_backends = {
    # ATTENTION
    "BatchDecodeWithPagedKVCacheWrapper": {
        "7.5": ["fa2"],
        "10.0": ["fa2", "fa2_tc", "cudnn", "trtllm-gen", "trtllm-gen-native"],
        "12.0": ["fa2", "fa2_tc", "cudnn"],
    },
    "mm_fp4": {
        "7.5": [],
        "8.0": [],
        "10.0": ["cudnn", "trtllm", "cutlass"],
        "10.3": ["cudnn", "trtllm", "cutlass"],
        "12.0": ["cudnn", "cutlass"],
    },
}


def filter_backends_by_compute_capability(backends, routine, device):
    major, minor = get_compute_capability(device)
    cc_to_supported_backends = routine_cc_to_supported_backends[routine]
    return cc_to_supported_backends.get(f"{major}.{minor}", [])
'''

# FlashInfer's deep_gemm.py (4d4e8c057's parent): a table looked up where it is written, keyed by get_device_arch()
DEEP_GEMM = '''def must_be_k_major() -> bool:
    return {
        "90a": True,
        "100a": False,
    }[get_device_arch()]
'''


@pytest.mark.parametrize(
    ("before", "targets", "after"),
    [
        pytest.param('SMEM = {"9.0": 1, "10.0": 2, "12.0": 3}', ("sm_121",), 'SMEM = {"9.0": 1, "10.0": 2, "12.0": 3, "12.1": 3}',
                     id="compute-capability-strings"),
        pytest.param("SMEM = {'10.0': (1, 2), '12.0': 3}", ("sm_103",), "SMEM = {'10.0': (1, 2), '10.3': (1, 2), '12.0': 3}",
                     id="compute-capability-strings-placed-where-the-number-sorts"),
        pytest.param('K_MAJOR = {"90a": True, "100a": False}', ("sm_103",), 'K_MAJOR = {"90a": True, "100a": False, "103a": False}',
                     id="arch-specific-strings"),
        pytest.param('K_MAJOR = {"90a": True, "100a": False, "103a": False}', ("sm_107",),
                     'K_MAJOR = {"90a": True, "100a": False, "103a": False, "107a": False}',
                     id="sm107-as-deep-gemm-keys-it-290c09186"),
        pytest.param('K_MAJOR = {"90": True, "100": False}', ("sm_103",),
                     'K_MAJOR = {"90": True, "100": False, "103": False}', id="bare-numbers"),
        pytest.param('K_MAJOR = {"100f": 1, "120f": 2}', ("sm_103", "sm_121"), 'K_MAJOR = {"100f": 1, "120f": 2}',
                     id="family-keys-already-admit-the-later-minors"),
    ],
)
def test_widen_other_key_spellings(before, targets, after):
    lookup = LOOKUP.replace("SMEM", before.split(" = ")[0])
    widened = _widen(f"{before}{lookup}".encode(), *targets)
    assert widened == f"{after}{lookup}".encode()
    [gate] = find(widened, DEFAULT_ARCHS)
    assert widen(widened, gate, tuple(Arch.parse(t) for t in targets)) == []  # a second pass changes nothing


def test_what_the_new_spellings_admit():
    assert admits('{"12.0": 1, "10.3": 2}', DEFAULT_ARCHS).names() == ["sm_103", "sm_120"]
    assert admits('{"90a": 1, "100a": 2}', DEFAULT_ARCHS).names() == ["sm_90", "sm_100"]  # 100a: sm_100 only
    assert admits('{"100f": 1}', DEFAULT_ARCHS).names() == ["sm_100", "sm_103"]  # a family key: its later minors
    assert admits('{"120": 1, "121": 2}', DEFAULT_ARCHS).names() == ["sm_120", "sm_121"]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param('CUDA = {"12.8": 1, "12.9": 2}\n\ndef f(v):\n    return CUDA[v]\n', id="cuda-version-strings"),
        pytest.param('TILES = {"64": 1, "128": 2}\n\ndef f(n):\n    return TILES[n]\n', id="numbers-that-name-no-arch"),
        pytest.param('CC = {"12.0": 1, "default": 2}\n\ndef f(cc):\n    return CC[cc]\n', id="a-key-that-is-no-arch"),
        pytest.param('CC = {"10.0": 1, "12.0": 2}\n\ndef f(cc):\n    return CC.get(cc, 0)\n', id="get-with-a-default"),
        pytest.param('def f():\n    return {"90a": True, "100a": False}["90a"]\n', id="unbound-with-a-literal-key"),
        pytest.param('def f(a):\n    try:\n        return {"90a": True}[a]\n    except KeyError:\n        return False\n',
                     id="unbound-in-a-try"),
    ],
)
def test_noop_other_spellings(source):
    assert find(source.encode(), DEFAULT_ARCHS) == []


def test_key_selects_the_map_under_a_key_of_a_named_dict():
    source = BENCH.encode()
    assert find(source, DEFAULT_ARCHS) == []  # looked up through the outer dict, with a default: no gate for scan
    [gate] = find(source, DEFAULT_ARCHS, assigns="routine_cc_to_supported_backends", key="mm_fp4")
    assert (gate.context, gate.line) == ('routine_cc_to_supported_backends["mm_fp4"]', 8)
    assert gate.admits.names() == ["sm_80", "sm_100", "sm_103", "sm_120"]
    assert find(source, DEFAULT_ARCHS, key="mm_fp4") == [gate]  # `assigns` may be left out
    assert find(source, DEFAULT_ARCHS, assigns="routine_cc_to_supported_backends", key="bmm_fp8") == []
    assert find(source, DEFAULT_ARCHS, assigns="other", key="mm_fp4") == []
    after = _apply(source, widen(source, gate, (Arch.parse("sm_121"),)))
    # a5ff03391: only the mm_fp4 map gains 12.1, with 12.0's backends, after 12.0
    assert after == source.replace(
        b'        "12.0": ["cudnn", "cutlass"],\n', b'        "12.0": ["cudnn", "cutlass"],\n        "12.1": ["cudnn", "cutlass"],\n'
    )
    [again] = find(after, DEFAULT_ARCHS, key="mm_fp4")
    assert again.admits.admits(Arch.parse("sm_121")) and widen(after, again, (Arch.parse("sm_121"),)) == []


def test_function_selects_a_map_looked_up_where_it_is_written():
    source = DEEP_GEMM.encode()
    [gate] = find(source, DEFAULT_ARCHS)
    assert (gate.context, gate.line, gate.detail["map"]) == ("must_be_k_major", 2, None)
    assert gate.admits.names() == ["sm_90", "sm_100"]
    assert find(source, DEFAULT_ARCHS, function="must_be_k_major") == [gate]
    assert find(source, DEFAULT_ARCHS, function="other") == [] and find(source, DEFAULT_ARCHS, assigns="K") == []
    after = _apply(source, widen(source, gate, (Arch.parse("sm_103"),)))
    # 4d4e8c057: "103a" after "100a", with its value
    assert after == source.replace(b'        "100a": False,\n', b'        "100a": False,\n        "103a": False,\n')
    [again] = find(after, DEFAULT_ARCHS)
    assert widen(after, again, (Arch.parse("sm_103"),)) == []


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        pytest.param('SMEM = {"10.0": 1, "12.0": 2}', "sm_110",
                     "line 1: `SMEM` has no sm_11x key below sm_110 to copy a value from", id="no-sibling-cc-strings"),
        pytest.param('SMEM = {"100a": 1, "120a": f(2)}', "sm_121",
                     "line 1: `SMEM`'s value for \"120a\" is not a one-line literal or name", id="computed-value-arch-strings"),
        pytest.param('def g(cc):\n    return {"100a": 1, "103a": 2}[cc]', "sm_110",
                     "line 2: the dict looked up in `g` has no sm_11x key below sm_110", id="unbound"),
        pytest.param('SMEM = {"100": 1, "103": 2}', "sm_105",
                     'line 1: `SMEM` would gain "105", a key codemod does not read as sm_105', id="a-key-that-would-not-read-back"),
    ],
)
def test_widen_refuses_other_spellings(source, target, message):
    data = (source if source.startswith("def") else f"{source}{LOOKUP}").encode()
    [gate] = find(data, DEFAULT_ARCHS)
    with pytest.raises(CannotWiden, match=re.escape(message)):
        widen(data, gate, (Arch.parse(target),))


def _spelled(code: int, style: str, suffix: str) -> str:
    number = f"{code // 10}.{code % 10}" if style == "cc" else str(code)
    return f"{number}{suffix if code >= 90 else ''}"


@settings(max_examples=60, deadline=None)
@given(
    codes=st.lists(st.sampled_from([80, 86, 89, 90, 100, 103, 110, 120]), min_size=1, max_size=6, unique=True),
    values=st.lists(st.integers(-5, 4096), min_size=6, max_size=6),
    target=st.sampled_from(["sm_87", "sm_103", "sm_121"]),
    style=st.sampled_from(["cc", "bare"]),
    suffix=st.sampled_from(["", "a"]),
)
def test_maps_keyed_without_sm_widen_to_the_siblings_value_in_their_own_spelling(codes, values, target, style, suffix):
    arch = Arch.parse(target)
    entries = ", ".join(f'"{_spelled(code, style, suffix)}": {value}' for code, value in zip(codes, values))
    source = f"SMEM = {{{entries}}}{LOOKUP}".encode()
    [gate] = find(source, DEFAULT_ARCHS)
    assert gate.admits.names() == sorted((f"sm_{code}" for code in codes), key=lambda name: Arch.parse(name))
    family = [(code, value) for code, value in zip(codes, values) if code // 10 == arch.major and code < arch.code]
    if arch.code in codes or not family:
        return
    after = _apply(source, widen(source, gate, (arch,)))
    literal = ast.literal_eval(after.decode().split("SMEM = ", 1)[1].split("\n\ndef", 1)[0])
    assert literal[_spelled(arch.code, style, suffix)] == max(family)[1]
    [again] = find(after, DEFAULT_ARCHS)
    assert widen(after, again, (arch,)) == []  # the new key reads back as the arch


IMPL = '''\
def m_grouped_fp8_gemm_nt_contiguous(a, b, major_a, major_b, compiled_dims):
    impl = {
        "100a": functools.partial(
            m_grouped_fp8_gemm_nt_contiguous_sm10x,
            major_a=major_a,
            compiled_dims=compiled_dims,
        ),
        "103a": functools.partial(
            m_grouped_fp8_gemm_nt_contiguous_sm10x,
            major_a=major_a,
            compiled_dims=compiled_dims,
        ),
    }[get_device_arch()]
    impl(a, b)
'''


def test_a_value_of_several_lines_that_calls_names_is_copied_as_written():
    """FlashInfer 0.6.16's deep_gemm.py (290c09186): `"107a"` takes `"103a"`'s `functools.partial(` ... `),` as
    written, on lines of its own after it; a second pass changes nothing."""
    source = IMPL.encode()
    [gate] = find(source, DEFAULT_ARCHS + (Arch.parse("sm_107"),), function="m_grouped_fp8_gemm_nt_contiguous")
    widened = apply_edits(source, widen(source, gate, (Arch.parse("sm_107"),)))
    copy = IMPL.split('        "103a"')[1].split("    }[")[0]
    assert widened.decode() == IMPL.replace("    }[", '        "107a"' + copy + "    }[")
    [again] = find(widened, DEFAULT_ARCHS + (Arch.parse("sm_107"),), function="m_grouped_fp8_gemm_nt_contiguous")
    assert widen(widened, again, (Arch.parse("sm_107"),)) == []


def test_a_call_with_a_number_is_not_copied():
    """`cols(120)`, on one line or several: the number may name the arch, so the value is not copied."""
    source = IMPL.replace("major_a=major_a,\n            compiled_dims", "major_a=120,\n            compiled_dims").encode()
    [gate] = find(source, DEFAULT_ARCHS + (Arch.parse("sm_107"),), function="m_grouped_fp8_gemm_nt_contiguous")
    with pytest.raises(CannotWiden, match="is not a one-line literal or name, or a call of names"):
        widen(source, gate, (Arch.parse("sm_107"),))


RECIPE = '''\
def get_default_recipe(sfa_dtype, sfb_dtype):
    return {
        ("90a", torch.float): (1, 128, 128),
        ("100a", torch.float): (1, 128, 128),
        ("100a", torch.int): (1, 1, 128),
        ("103a", torch.float): (1, 128, 128),
        ("103a", torch.int): (1, 1, 128),
    }[(get_device_arch(), sfb_dtype)]
'''


def test_tuple_keys_gain_a_row_per_row_of_the_nearest_arch():
    """FlashInfer 0.6.16's deep_gemm.py (290c09186): a dict keyed by (arch, dtype), looked up with
    `(get_device_arch(), sfb_dtype)`: sm_107 gains a copy of each "103a" row, after them, in their order."""
    universe = DEFAULT_ARCHS + (Arch.parse("sm_107"),)
    source = RECIPE.encode()
    [gate] = find(source, universe, function="get_default_recipe")
    assert gate.admits.names() == ["sm_90", "sm_100", "sm_103"]
    widened = apply_edits(source, widen(source, gate, (Arch.parse("sm_107"),)))
    assert widened.decode() == RECIPE.replace(
        "    }[", '        ("107a", torch.float): (1, 128, 128),\n        ("107a", torch.int): (1, 1, 128),\n    }['
    )
    [again] = find(widened, universe, function="get_default_recipe")
    assert again.admits.admits(Arch.parse("sm_107")) and widen(widened, again, (Arch.parse("sm_107"),)) == []


@pytest.mark.parametrize(
    "source",
    [
        pytest.param('def f(d):\n    return {("100a", 1): 2, (3, "103a"): 4}[(d, 1)]\n', id="the-arch-at-different-places"),
        pytest.param('def f(d):\n    return {("100a", 1): 2, ("103a",): 4}[(d, 1)]\n', id="tuples-of-different-lengths"),
        pytest.param('def f(d):\n    return {("x", 1): 2, ("y", 1): 4}[(d, 1)]\n', id="no-arch-in-the-tuples"),
    ],
)
def test_tuple_keys_that_are_no_arch_table(source):
    assert find(source.encode(), DEFAULT_ARCHS) == []


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            '# -*- coding: latin-1 -*-\nS = "é"; SMEM = {"sm_90": 1, "sm_100a": 2}\n\n\ndef capacity(cc):\n    return SMEM[cc]\n',
            id="latin-1-coding-line-read-as-utf-8-like-every-other-reader",
        ),
    ],
)
def test_a_coding_line_does_not_decide_how_the_file_is_read(source: str) -> None:
    """A `# coding: latin-1` line made Python's parser, given the bytes, read the file as Latin-1 while every span
    is UTF-8: the gate came out a byte off (`"sm_90": 1, "sm_100a": 2}\\n`). Refused, as any file that is not UTF-8 is."""
    with pytest.raises(SourceError, match="^not UTF-8"):
        find(source.encode("latin-1"), DEFAULT_ARCHS)
