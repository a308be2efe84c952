"""python_capability: capability comparisons in Python, read once (scan and recipes) and widened in their own style."""

import ast
from textwrap import dedent

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.core.arch import DEFAULT_ARCHS, Arch, parse_archs
from codemods.gates import CannotWiden, apply_edits
from codemods.gates.python_capability import admits, find, widen

# SGLang's shape: a helper returning major * 10 + minor, compared with an int.
SGLANG_SM = '''\
def get_device_sm():
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return major * 10 + minor
    return 0


def _use_fp4_kernel():
    if get_device_sm() == 120:
        return True
    return False
'''

# FlashInfer-style test helpers: the major checked against one value, raising otherwise.
HOPPER_ONLY = '''\
def test_fp8_groupwise(dtype):
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("needs SM90")
    run(dtype)
'''


def _rewrite(source: str, archs: str, **selector) -> str:
    data = source.encode()
    edits = []
    for gate in find(data, DEFAULT_ARCHS, **selector):
        edits += widen(data, gate, parse_archs(archs), DEFAULT_ARCHS)
    return apply_edits(data, edits).decode()


def test_sm_equality_becomes_a_membership():
    after = _rewrite(SGLANG_SM, "sm_121", function="_use_fp4_kernel")
    assert after == SGLANG_SM.replace("get_device_sm() == 120", "get_device_sm() in (120, 121)")
    # and again: nothing more to do
    assert _rewrite(after, "sm_121", function="_use_fp4_kernel") == after


def test_negated_major_becomes_not_in():
    after = _rewrite(HOPPER_ONLY, "sm_120")
    assert after == HOPPER_ONLY.replace("[0] != 9:", "[0] not in (9, 12):")
    assert _rewrite(after, "sm_120,sm_121") == after  # 12 names both


def test_major_and_minor_comparisons_each_widen():
    source = dedent('''\
        def supported():
            major, minor = torch.cuda.get_device_capability()
            return major == 12 and minor == 0
        ''')
    after = _rewrite(source, "sm_121", function="supported")
    assert after == source.replace("minor == 0", "minor in (0, 1)")


def test_membership_lists_grow_in_their_brackets():
    source = "def f():\n    if get_device_sm() in [100, 103]:\n        pass\n    if get_device_sm() in (90,):\n        pass\n"
    after = _rewrite(source, "sm_120")
    assert after == "def f():\n    if get_device_sm() in [100, 103, 120]:\n        pass\n    if get_device_sm() in (90, 120):\n        pass\n"


def test_pairs_keep_their_style():
    source = "def f():\n    return torch.cuda.get_device_capability() == (12, 0)\n"
    assert _rewrite(source, "sm_121") == "def f():\n    return torch.cuda.get_device_capability() in ((12, 0), (12, 1))\n"


def test_no_op_when_admitted():
    source = "def f():\n    if torch.cuda.get_device_capability()[0] >= 9:\n        pass\n"
    assert _rewrite(source, "sm_120") == source
    assert _rewrite(SGLANG_SM, "sm_120") == SGLANG_SM


def test_selectors_pick_the_comparison():
    source = dedent('''\
        def pick(x):
            if get_device_sm() == 100:
                x.backend = "cutlass"
            if get_device_sm() == 90:
                x.kernel = gen_fa3_module()
        ''')
    assert [g.line for g in find(source.encode(), function="pick")] == [2, 4]
    assert [g.line for g in find(source.encode(), function="other")] == []
    assert [g.line for g in find(source.encode(), assigns="x.backend")] == [2]
    assert [g.line for g in find(source.encode(), calls="gen_fa3_module")] == [4]
    assert [g.line for g in find(source.encode(), calls=["nothing", "gen_fa3_module"])] == [4]
    after = _rewrite(source, "sm_103", assigns="x.backend")
    assert after == source.replace("== 100", "in (100, 103)")


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("def f():\n    if get_device_sm() == SM_VERSION:\n        pass\n", "computed"),
        ("def f():\n    if get_device_sm() < 100:\n        pass\n", "bound"),
        ("def f():\n    if 120 == get_device_sm():\n        pass\n", "left"),
    ],
)
def test_refusals_name_the_line_and_the_reason(source, reason):
    data = source.encode()
    gates = find(data)
    assert [g.line for g in gates] == [2]
    with pytest.raises(CannotWiden, match=rf"^line 2: .*{reason}"):
        widen(data, gates[0], (Arch.parse("sm_121"),))


def test_scan_reads_the_same_comparisons(tmp_path):
    from codemods.audit.scan import scan

    (tmp_path / "m.py").write_text(SGLANG_SM + HOPPER_ONLY)
    gates = scan(tmp_path, Arch.parse("sm_121")).gates
    assert [(g["kind"], g["line"], g["text"], g["admits"]) for g in gates] == [
        ("python_capability", 9, "get_device_sm() == 120", ["sm_120"]),
        # scan says what the guarded path admits: the test runs after `if cap != 9: pytest.skip()` on 9 only
        ("python_capability", 13, "torch.cuda.get_device_capability()[0] != 9", ["sm_90"]),
    ]  # fmt: skip


RECIPE = """\
id = "fp4-sm121"
summary = "FP4 kernels on SM121 (SGLang)"
arch = "sm_121"

[[change]]
id = "sglang.fp4-sm-test"
project = "sglang"
file = "{python}/srt/layers/quantization/fp4_utils.py"
kind = "python_capability"
function = "_use_fp4_kernel"

[[test]]
change = "sglang.fp4-sm-test"
before = '''
def _use_fp4_kernel():
    if get_device_sm() == 120:
        return True
    return False
'''
after = '''
def _use_fp4_kernel():
    if get_device_sm() in (120, 121):
        return True
    return False
'''

[[test]]
change = "sglang.fp4-sm-test"
before = '''
def _use_fp4_kernel():
    return get_device_sm() == SM_FP4
'''
outcome = "failed"
"""


def test_recipe_test_runs_the_kind(tmp_path, cli):
    from codemods.recipes import cases, load

    path = tmp_path / "fp4-sm121.toml"
    path.write_text(RECIPE)
    results = cases.run_cases(load.load_recipe(path))
    assert [(r.ok, r.message) for r in results] == [(True, "changed"), (True, "failed")]
    result = cli("recipe", "test", path)
    assert result.exit_code == 0, result.output


# ---------------------------------------------------------------- the rule, for any values and targets

_SIDES = {
    "get_device_sm()": lambda a: a.major * 10 + a.minor,
    "torch.cuda.get_device_capability()[0]": lambda a: a.major,
}


@settings(max_examples=60, deadline=None)
@given(
    side=st.sampled_from(sorted(_SIDES)),
    op=st.sampled_from(["==", "!=", "in", "not in"]),
    chosen=st.lists(st.sampled_from(DEFAULT_ARCHS), min_size=1, max_size=3, unique=True),
    targets=st.lists(st.sampled_from(DEFAULT_ARCHS), min_size=1, max_size=3, unique=True),
)
def test_widening_admits_exactly_the_old_values_and_the_targets(side, op, chosen, targets):
    value_of = _SIDES[side]
    values = sorted({value_of(a) for a in chosen})
    literal = repr(values[0]) if op in ("==", "!=") else "(" + ", ".join(map(str, values)) + ("," if len(values) == 1 else "") + ")"
    if op in ("==", "!="):
        values = values[:1]
    source = f"def f():\n    if {side} {op} {literal}:\n        pass\n"
    data = source.encode()
    (gate,) = find(data)
    after = apply_edits(data, widen(data, gate, tuple(targets)))
    ast.parse(after)  # still Python
    (again,) = find(after)
    wanted = {a for a in DEFAULT_ARCHS if value_of(a) in set(values) | {value_of(t) for t in targets}}
    assert set(again.admits.admitted) == wanted  # nothing else admitted
    assert admits(again.text, DEFAULT_ARCHS, again.detail) == again.admits
    assert widen(after, again, tuple(targets)) == []  # idempotent
    negated = op in ("!=", "not in")
    assert (" not in " in after.decode()) == negated or not set(targets) - set(gate.admits.admitted)


def test_assigns_also_picks_the_value_of_an_assignment():
    source = dedent('''\
        def _compute():
            sm_version = get_device_sm()
            return sm_version == 120

        SCALE_UE8M0 = ENABLED and (
            get_platform().is_sm100 or get_device_sm() == 120
        )
        OTHER = get_device_sm() == 90
        ''')
    assert [g.line for g in find(source.encode())] == [3, 6, 8]
    assert [g.line for g in find(source.encode(), assigns="SCALE_UE8M0")] == [6]
    after = _rewrite(source, "sm_121", assigns="SCALE_UE8M0")
    assert after == source.replace("or get_device_sm() == 120", "or get_device_sm() in (120, 121)")
