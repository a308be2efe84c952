"""python_capability: capability comparisons in Python, read once (scan and recipes) and widened in their own style."""

import ast
from dataclasses import replace
from textwrap import dedent

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from codemods.core.arch import DEFAULT_ARCHS, Arch, parse_archs
from codemods.gates import CannotWiden, SourceError, apply_edits
from codemods.gates.python.python_capability import admits, find, widen
from codemods.gates.python.python_arch_map import find as find_map
from codemods.gates.registry import KINDS
from codemods.plan.widen import _shifts, _span_after

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


def _rewrite(source: str, archs: str, picks: str = "", **selector) -> str:
    """Widen every gate the selectors pick; with `picks`, only those admitting these archs (a change's `admits`)."""
    data = source.encode()
    edits = []
    universe = tuple(dict.fromkeys(DEFAULT_ARCHS + parse_archs(archs)))  # sm_107 is not among the defaults
    for gate in find(data, universe, **selector):
        if picks and not all(gate.admits.admits(a) for a in parse_archs(picks)):
            continue
        edits += widen(data, gate, parse_archs(archs), universe)
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


@pytest.mark.parametrize(
    ("name", "arch", "old", "new"),
    [
        # a family target (`f`) is written over the major alone: the minor test is dropped (ec0178acd)
        pytest.param("is_sm120f_supported", "sm_121", "minor == 0", "", id="family-target-drops-the-minor"),
        # an arch-specific or plain name enumerates its minors (nvfp4-attention-sm121's style)
        pytest.param("is_sm120a_supported", "sm_121", "minor == 0", "minor in (0, 1)", id="arch-specific-extends"),
        pytest.param("is_sm120_supported", "sm_121", "minor == 0", "minor in (0, 1)", id="plain-name-extends"),
        # a family name that does not cover the target (sm_110 is not a 12.x) keeps the usual order
        pytest.param("is_sm120f_supported", "sm_110", "major == 12", "major in (11, 12)", id="family-not-covering"),
    ],
)
def test_a_predicate_named_for_a_family_drops_its_minor_test(name, arch, old, new):
    source = dedent(f'''\
        def {name}(device):
            major, minor = get_compute_capability(device)
            return major == 12 and minor == 0 and version_at_least(torch.version.cuda, "12.9")
        ''')
    after = _rewrite(source, arch, function=name)
    if new:
        assert after == source.replace(old, new)
    else:
        assert after == source.replace("major == 12 and minor == 0 and", "major == 12 and")
    assert _rewrite(after, arch, function=name) == after  # no-op once it admits the arch


@pytest.mark.parametrize(
    ("tests", "brackets"),
    [
        pytest.param([], "()", id="none-tuple"),
        pytest.param(["x in [1, 2]", "x in (3, 4)"], "()", id="a-tie-tuple"),
        pytest.param(["x in [1, 2]", "y not in ['a']", "z in (3,)"], "[]", id="more-lists"),
        pytest.param(["x in [\n    1,\n    2,\n]", "y in [\n    'a',\n]"], "()", id="exploded-lists-not-counted"),
        pytest.param(["x in [a, b]", "x in [f(1)]", "x == [1]"], "()", id="collections-of-non-constants-and-equalities-not-counted"),
        pytest.param(["x in [-1, 0]"], "[]", id="negative-numbers-are-constants"),
    ],
)
def test_membership_brackets(tests: list[str], brackets: str) -> None:
    import ast

    from codemods.gates.python.capability.membership import membership_brackets

    source = "".join(f"if {test}:\n    pass\n" for test in tests)
    assert "".join(membership_brackets(ast.parse(source))) == brackets


def test_membership_lists_grow_in_their_brackets():
    source = "def f():\n    if get_device_sm() in [100, 103]:\n        pass\n    if get_device_sm() in (90,):\n        pass\n"
    after = _rewrite(source, "sm_120")
    assert after == "def f():\n    if get_device_sm() in [100, 103, 120]:\n        pass\n    if get_device_sm() in (90, 120):\n        pass\n"


def test_pairs_keep_their_style():
    source = "def f():\n    return torch.cuda.get_device_capability() == (12, 0)\n"
    assert _rewrite(source, "sm_121") == "def f():\n    return torch.cuda.get_device_capability() in ((12, 0), (12, 1))\n"


def test_a_pair_rebuilt_from_its_halves_reads_as_the_pair():
    # FlashInfer 0.7.1's MLA backends: major, minor unpacked from the helper, tested as `(major, minor)`
    source = dedent('''\
        def check(device):
            major, minor = get_compute_capability(device)
            if (major, minor) not in ((10, 0), (10, 3)):
                raise ValueError("SM100/SM103 only")
            if (minor, major) == (0, 12):
                pass
    ''')
    gates = find(source.encode())
    assert [(g.line, g.text, sorted(a.name for a in g.admits.admitted)) for g in gates] == [
        (3, "(major, minor) not in ((10, 0), (10, 3))", ["sm_100", "sm_103"]),
    ]  # the halves the other way round are no pair it reads
    after = _rewrite(source, "sm_107")
    assert "    if (major, minor) not in ((10, 0), (10, 3), (10, 7)):\n" in after
    assert after.replace(", (10, 7)", "") == source
    assert _rewrite(source, "sm_103") == source


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
        # no rewrite admits sm_121 without sm_120: dropping or moving `< 120` admits both
        ("def f():\n    if get_device_sm() >= 100 and get_device_sm() < 120:\n        pass\n", "exactly"),
        ("def f():\n    major, minor = get_device_capability()\n    return major == 10 and minor == SM_MINOR\n", "computed"),
        ("def f():\n    if 120 == get_device_sm():\n        pass\n", "left"),
        # `(13)` is the number 13, not a pair: no place among the pairs to add (12, 0) to (it used to raise TypeError)
        ("def f(a):\n    major, minor = get_compute_capability(a)\n    if (major, minor) not in ((10, 0), (13)):\n"
         "        raise E()\n", "exactly"),
        ("def f(q):\n    cc = torch.cuda.get_device_capability(q)\n    if cc not in ((10), (10, 3)):\n        raise E()\n", "exactly"),
    ],
)
def test_refusals_name_the_line_and_the_reason(source, reason):
    data = source.encode()
    gates = find(data)
    line = gates[0].line
    assert [g.line for g in gates] == [line]
    with pytest.raises(CannotWiden, match=rf"^line {line}: .*{reason}"):
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


NESTED = """\
import torch

IS_HOPPER = torch.cuda.get_device_capability()[0] == 9


class Runner:
    def select(self):
        def pick():
            if torch.cuda.get_device_capability()[0] == 10:
                return "sm100"
            return ""

        if torch.cuda.get_device_capability()[0] != 12:
            raise RuntimeError("needs SM12x")
        return pick()
"""


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param("", id="capability-only-file-read-by-blocks"),
        pytest.param("\nFLAGS = supported_major_versions=[9]\n", id="file-read-whole-with-other-kinds"),
    ],
)
def test_scan_gives_each_comparison_its_enclosing_function(tmp_path, extra):
    # as the other Python kinds do (gate.context): the innermost function or method, "" at module level
    from codemods.audit.scan import scan

    (tmp_path / "m.py").write_text(NESTED + extra)
    gates = scan(tmp_path, Arch.parse("sm_121")).gates
    assert [(g["line"], g["symbol"]) for g in gates if g["kind"] == "python_capability"] == [
        (3, ""), (9, "pick"), (13, "select"),
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
    "cap.major": lambda a: a.major,  # with `cap.minor` declared too: the pair is written where the major says too much
}
_CAP_NAMES = {"cap.major": "major", "cap.minor": "minor"}


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
    names = _CAP_NAMES if side == "cap.major" else None
    (gate,) = find(data, names=names)
    after = apply_edits(data, widen(data, gate, tuple(targets)))
    ast.parse(after)  # still Python
    (again,) = find(after, names=names)
    wanted = {a for a in DEFAULT_ARCHS if value_of(a) in set(values) | {value_of(t) for t in targets}}
    if names:  # exactly the old archs and the targets: where the majors would admit more, the pair says which
        wanted = {a for a in DEFAULT_ARCHS if value_of(a) in set(values)} | set(targets)
    assert set(again.admits.admitted) == wanted  # nothing else admitted
    assert admits(again.text, DEFAULT_ARCHS, again.detail) == again.admits
    assert widen(after, again, tuple(targets)) == []  # idempotent
    negated = op in ("!=", "not in")
    if names and wanted != {a for a in DEFAULT_ARCHS if value_of(a) in set(values) | {value_of(t) for t in targets}}:
        assert "cap.minor" in after.decode()  # the pair was written, negated where the comparison was
        return
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


# ---------------------------------------------------------------- conditions: comparisons joined by and / or / not

# SGLang's vision backend choice: the FA4 branch excludes SM103 by its minor.
VISION_BACKEND = '''\
def _pick_backend(passed):
    major, minor = get_device_capability()
    if major == 9:
        backend = "fa3"
    elif major == 10 and minor != 3:
        backend = "fa4"
    else:
        backend = "triton"
    return backend
'''


def test_a_condition_admits_exactly_what_it_says():
    gates = find(VISION_BACKEND.encode())
    assert [(g.line, g.text, sorted(a.name for a in g.admits.admitted)) for g in gates] == [
        (3, "major == 9", ["sm_90"]),
        (5, "major == 10 and minor != 3", ["sm_100"]),  # not sm_103: `minor != 3` rules it out
    ]


_SKIP_UNLESS = "def test_mm(m):\n    major, minor = torch.cuda.get_device_capability()\n    if {}:\n        pytest.skip('SM100')\n"

CONDITION_WIDENINGS = [
    # issue 38 item 4: a negated conjunction before a skip widens what it negates, not the chain or a refusal
    pytest.param(
        _SKIP_UNLESS.format("not (major == 10 and minor == 0)"), "sm_103",
        _SKIP_UNLESS.format("not (major == 10 and minor in (0, 3))"), id="negated-conjunction-gains-the-minor",
    ),
    pytest.param(
        _SKIP_UNLESS.format("not (minor == 0 and major == 10)"), "sm_110",
        _SKIP_UNLESS.format("not (minor == 0 and major in (10, 11))"), id="negated-conjunction-gains-the-major",
    ),
    pytest.param(
        _SKIP_UNLESS.format("not (major == 10 and minor == 0)"), "sm_121",
        _SKIP_UNLESS.format("not ((major == 10 and minor == 0) or (major == 12 and minor == 1))"),
        id="negated-conjunction-gains-a-conjunction-for-another-major-and-minor",
    ),
    pytest.param(
        "def plan(n):\n    device_sm = get_device_sm()\n    return (\n"
        "        device_sm == 90 or (device_sm >= 100 and device_sm < 110)\n    ) and n < 8\n", "sm_110",
        "def plan(n):\n    device_sm = get_device_sm()\n    return (\n"
        "        device_sm == 90 or (device_sm >= 100 and device_sm < 120)\n    ) and n < 8\n",
        id="a-target-adjoining-a-range-moves-its-bound-not-into-the-equality-round12-bug6",
    ),
    pytest.param(
        "def f():\n    return 90 <= get_device_sm() < 110\n", "sm_110",
        "def f():\n    return 90 <= get_device_sm() < 120\n",
        id="a-chained-range-moves-its-bound-to-the-next-major-not-past-the-target",
    ),
    pytest.param(
        "def f():\n    major, minor = torch.cuda.get_device_capability()\n    return major == 8 or (major >= 9 and major < 11)\n",
        "sm_110",
        "def f():\n    major, minor = torch.cuda.get_device_capability()\n    return major == 8 or (major >= 9 and major < 12)\n",
        id="a-major-range-moves-its-bound-by-one",
    ),
    pytest.param(
        "def f():\n    device_sm = get_device_sm()\n    return device_sm == 90 or (device_sm >= 100 and device_sm < 110)\n",
        "sm_120",
        "def f():\n    device_sm = get_device_sm()\n    return device_sm in (90, 120) or (device_sm >= 100 and device_sm < 110)\n",
        id="a-target-not-adjoining-the-range-goes-into-the-equality",
    ),
    pytest.param(
        "def jit_module():\n    major, minor = torch.cuda.get_device_capability()\n    return major < 10\n", "sm_120,sm_121",
        "def jit_module():\n    major, minor = torch.cuda.get_device_capability()\n    return major < 10 or major == 12\n",
        id="bound-kept-and-an-equality-added-when-moving-it-admits-majors-between",
    ),
    pytest.param(
        "def f():\n    sm_version = get_device_sm()\n    if sm_version != 90:\n        return False\n    return True\n",
        "sm_100,sm_103,sm_110,sm_120,sm_121",
        "def f():\n    sm_version = get_device_sm()\n    if sm_version < 90:\n        return False\n    return True\n",
        id="a-check-before-an-exit-becomes-a-lower-bound-when-every-arch-above-comes-through-sglang-0.5.1.post1",
    ),
    pytest.param(
        "def f():\n    major, minor = torch.cuda.get_device_capability()\n    if major < 9 or major == 11:\n"
        "        raise RuntimeError('x')\n", "sm_110",
        "def f():\n    major, minor = torch.cuda.get_device_capability()\n    if major < 9:\n"
        "        raise RuntimeError('x')\n",
        id="before-an-exit-the-comparison-refusing-the-target-is-dropped",
    ),
    pytest.param(
        "def f():\n    if get_device_sm() < 100:\n        pytest.skip('needs SM100')\n", "sm_90",
        "def f():\n    if get_device_sm() < 90:\n        pytest.skip('needs SM100')\n",
        id="before-an-exit-a-bound-moves-past-the-target",
    ),
    pytest.param(
        "def f(x):\n    major, _ = torch.cuda.get_device_capability()\n    return x.is_cuda and major < 10\n", "sm_120",
        "def f(x):\n    major, _ = torch.cuda.get_device_capability()\n    return x.is_cuda and (major < 10 or major == 12)\n",
        id="added-equality-parenthesized-inside-an-and",
    ),
    pytest.param(
        "def try_fused(q):\n    if not (\n        torch.version.cuda is not None\n"
        "        and torch.cuda.get_device_capability(q.device)[0] >= 10\n    ):\n        return None\n", "sm_90",
        "def try_fused(q):\n    if not (\n        torch.version.cuda is not None\n"
        "        and torch.cuda.get_device_capability(q.device)[0] >= 9\n    ):\n        return None\n",
        id="lower-bound-moved-when-no-major-lies-between",
    ),
    pytest.param(
        "def f():\n    major, _ = torch.cuda.get_device_capability()\n    return check(major < 10)\n", "sm_120",
        "def f():\n    major, _ = torch.cuda.get_device_capability()\n    return check(major < 10 or major == 12)\n",
        id="added-equality-bare-as-a-call-argument",
    ),
    pytest.param(
        "def f():\n    major, _ = torch.cuda.get_device_capability()\n    return 10 <= major\n", "sm_90",
        "def f():\n    major, _ = torch.cuda.get_device_capability()\n    return 9 <= major\n",
        id="bound-with-its-value-on-the-left-moved",
    ),
    pytest.param(
        "def f():\n    return get_device_sm() >= 100\n", "sm_90",
        "def f():\n    return get_device_sm() >= 90\n",
        id="sm-bound-moved-to-the-target",
    ),
    pytest.param(
        "def f():\n    return torch.cuda.get_device_capability() >= (10, 0)\n", "sm_90",
        "def f():\n    return torch.cuda.get_device_capability() >= (9, 0)\n",
        id="pair-bound-moved-element-by-element",
    ),
    pytest.param(
        "def f():\n    major, minor = torch.cuda.get_device_capability()\n    return major >= 9 and major < 12\n",
        "sm_120,sm_121",
        "def f():\n    major, minor = torch.cuda.get_device_capability()\n    return major >= 9\n",
        id="upper-bound-dropped",
    ),
    pytest.param(
        "def f():\n    major, minor = torch.cuda.get_device_capability()\n    return major < 10 or major == 12\n", "sm_110",
        "def f():\n    major, minor = torch.cuda.get_device_capability()\n    return major < 10 or major in (11, 12)\n",
        id="equality-in-an-or-gains-the-value-in-order",
    ),
    pytest.param(
        "def f(w):\n    major, minor = torch.cuda.get_device_capability()\n    return major == 12 and w.ok and minor == 0\n",
        "sm_121",
        "def f(w):\n    major, minor = torch.cuda.get_device_capability()\n    return major == 12 and w.ok and minor in (0, 1)\n",
        id="comparisons-of-an-and-read-together-around-another-operand",
    ),
    pytest.param(
        "def f(block):\n    if block in [64, 128]:\n        pass\n    return get_device_sm() == 100\n", "sm_103",
        "def f(block):\n    if block in [64, 128]:\n        pass\n    return get_device_sm() in [100, 103]\n",
        id="a-file-that-lists-numbers-in-brackets-gets-brackets",
    ),
    pytest.param(
        "def f(act):\n    assert act in [\n        'silu',\n        'gelu',\n    ]\n    return get_device_sm() == 100\n", "sm_103",
        "def f(act):\n    assert act in [\n        'silu',\n        'gelu',\n    ]\n    return get_device_sm() in (100, 103)\n",
        id="an-exploded-string-list-says-nothing-about-the-style-sglang-0.5.15-unquant",
    ),
    pytest.param(
        "def f(q, name):\n    if q in (\n        'fp8',\n        'quark',\n    ):\n        pass\n"
        "    if name not in ['correction_bias']:\n        pass\n    return get_device_sm() == 100\n", "sm_103",
        "def f(q, name):\n    if q in (\n        'fp8',\n        'quark',\n    ):\n        pass\n"
        "    if name not in ['correction_bias']:\n        pass\n    return get_device_sm() in [100, 103]\n",
        id="a-one-line-string-list-gives-brackets-sglang-0.5.10-deepseek-v2",
    ),
    pytest.param(
        "def f(x):\n    return x and 90 <= get_device_sm() < 120\n", "sm_120,sm_121",
        "def f(x):\n    return x and get_device_sm() >= 90\n",
        id="a-chained-comparison-drops-its-upper-bound-capability-first-sglang-0.5.15-deepseek-v2",
    ),
    pytest.param(
        "def f():\n    return 100 <= get_device_sm() < 120\n", "sm_90",
        "def f():\n    return 90 <= get_device_sm() < 120\n",
        id="a-chained-comparison-moves-a-bound-in-place",
    ),
]  # fmt: skip


SHARED_EXPERTS = """\
class DeepseekV2ForCausalLM(nn.Module):
    def determine_num_fused_shared_experts(self, architecture="DeepseekV3ForCausalLM"):
        disable_reason = None
        if (
            not _is_cuda
            or torch.cuda.get_device_capability("cuda") < (9, 0)
            or self.config.architectures[0] != architecture
        ):
            disable_reason = "Only Deepseek V3/R1 on NV-platform with capability >= 90 can use it."
        elif get_moe_expert_parallel_world_size() > 1:
            disable_reason = "Deepseek V3/R1 can not use it under expert parallelism."
        if disable_reason is not None:
            self.num_fused_shared_experts = 0
            return
        self.num_fused_shared_experts = self.config.n_shared_experts
"""


def test_an_exit_reached_through_a_flag_is_read_and_narrowed():
    """SGLang 0.4.8 (round 8): the `if` only records why the fusion is off; `if disable_reason is not None:
    return` after it is the exit, so the code after runs on sm_90 and up, and widening for sm_80 moves the bound
    (it used to read `already admits sm_80`, and on a tree with `< (8, 0)` made the condition hold on SM8x)."""
    [gate] = find(SHARED_EXPERTS.encode())
    assert gate.detail["runs_where"] == "false"
    assert gate.admits.names() == ["sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"]
    after = SHARED_EXPERTS.replace("< (9, 0)", "< (8, 0)")
    assert _rewrite(SHARED_EXPERTS, "sm_80,sm_86,sm_89") == after  # the SM8x family (a recipe's admit = "family")
    assert _rewrite(after, "sm_80,sm_86,sm_89") == after


NUNCHAKU = """\
class NunchakuSVDQuantArgs:
    def _validate(self) -> None:
        unsupported: list[str] = []
        for i in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(i)
            if major == 9:
                unsupported.append(f"cuda:{i} (SM{major}{minor}, Hopper)")
            elif major not in (8, 12):
                unsupported.append(f"cuda:{i} (SM{major}{minor})")

        if unsupported:
            raise ValueError(f"Unsupported devices: {', '.join(unsupported)}.")
"""


def test_an_exit_reached_through_a_list_after_the_loop_is_read():
    """SGLang 0.5.15 nunchaku (round 12 bug 1): each `if` only appends the device to `unsupported`, and `if
    unsupported: raise` after the loop is the exit. `if major == 9:` excludes Hopper: widening it for SM10x made
    the condition hold there (`if major in (9, 10):`, SM10x labelled Hopper and refused); the `elif` is a check
    for 8 and 12, which gains 10."""
    first, second = find(NUNCHAKU.encode(), function="_validate")
    assert first.detail["runs_where"] == "false" and not first.admits.admits(Arch.parse("sm_90"))
    assert first.admits.admits(Arch.parse("sm_100"))
    after = NUNCHAKU.replace("not in (8, 12)", "not in (8, 10, 12)")
    assert _rewrite(NUNCHAKU, "sm_100,sm_103", function="_validate") == after
    assert _rewrite(after, "sm_100,sm_103", function="_validate") == after


@pytest.mark.parametrize(("before", "archs", "after"), CONDITION_WIDENINGS)
def test_widen_condition(before, archs, after):
    assert _rewrite(before, archs) == after
    assert _rewrite(after, archs) == after  # a second pass changes nothing


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(
            "class A:\n    def __init__(self):\n        self.use_min_latency_fused_a_gemm = self.has_fused_proj and _device_sm == 90\n",
            "class A:\n    def __init__(self):\n        self.use_min_latency_fused_a_gemm = (\n"
            "            self.has_fused_proj and _device_sm in (90, 120, 121)\n        )\n",
            id="black-closes-the-assignment-after-the-gate-and-the-gate-keeps-its-own-text",
        ),
    ],
)
def test_a_wrap_that_closes_after_the_gate_leaves_the_gate_its_text(before, after):
    """Black's `)` closing an assigned value that ends with the gate was inserted at the gate's end, which the
    planner reads as the gate's own text (`_device_sm in (90, 120, 121)\\n        )`, admitting nothing): every
    such widening failed as 'the rewritten gate does not admit the target (internal check)'."""
    source = before.encode()
    [gate] = find(source, names={"_device_sm": "sm"})
    edits = widen(source, gate, parse_archs("sm_120,sm_121"), DEFAULT_ARCHS)
    assert apply_edits(source, edits).decode() == after
    start, end = _span_after(gate, _shifts(edits))
    assert apply_edits(source, edits)[start:end] == b"_device_sm in (90, 120, 121)"


def test_admits_picks_one_branch_of_an_if_elif():
    """A change's `admits = ["sm_100"]` picks the branch for SM100, not the `if major == 9:` before it."""
    after = VISION_BACKEND.replace("major == 10 and minor != 3", "major == 10")
    assert _rewrite(VISION_BACKEND, "sm_103", picks="sm_100") == after
    assert _rewrite(after, "sm_103", picks="sm_100") == after
    # without it both branches are widened: `major == 9` gains 10 (and so sm_103)
    assert "if major in (9, 10):" in _rewrite(VISION_BACKEND, "sm_103")


@pytest.mark.parametrize(
    ("source", "archs"),
    [
        pytest.param("def f():\n    major, minor = get_device_capability()\n    if major == 10 and minor != 3:\n        go()\n",
                     "sm_100", id="exclusion-does-not-touch-sm100"),
        pytest.param("def f():\n    major, _ = get_device_capability()\n    return major < 10 or major == 12\n", "sm_121",
                     id="equality-in-the-or-admits-the-family"),
        pytest.param("def f():\n    return get_device_capability()[0] >= 9 and get_device_capability()[1] != 3\n", "sm_120",
                     id="exclusion-rules-out-another-minor"),
        pytest.param("def f():\n    # if get_device_sm() == 100:\n    return 'get_device_sm() == 100'\n", "sm_103",
                     id="comment-and-string-are-no-gates"),
        pytest.param("def f():\n    return 90 <= get_device_sm() < 130\n", "sm_120",
                     id="chained-comparison-already-admitting"),
        pytest.param("def jit_module():\n    major, minor = torch.cuda.get_device_capability()\n    if major < 10:\n"
                     "        raise RuntimeError('needs SM100+')\n", "sm_120,sm_121",
                     id="the-code-after-an-exit-runs-on-the-target-already-the-condition-is-not-made-to-hold-there"),
        pytest.param("def f():\n    sm_version = get_device_sm()\n    if sm_version < 90:\n        return False\n", "sm_120",
                     id="a-lower-bound-before-return-false-admits-every-arch-above-sglang-0.5.1.post1"),
        pytest.param("def validate():\n    bad = []\n    major, minor = torch.cuda.get_device_capability(0)\n"
                     "    if major == 9:\n        bad.append('Hopper')\n    if bad:\n        raise ValueError(bad)\n",
                     "sm_100,sm_103", id="an-exclusion-recorded-in-a-list-raised-on-later-is-not-made-to-hold-round12-bug1"),
    ],
)  # fmt: skip
def test_condition_noop(source, archs):
    assert _rewrite(source, archs) == source


def test_a_chained_comparison_is_read_as_its_two_bounds():
    (gate,) = find(b"def f():\n    return 90 <= get_device_sm() < 120\n")
    assert sorted(a.name for a in gate.admits.admitted) == ["sm_100", "sm_103", "sm_110", "sm_90"]
    (computed,) = find(b"def f():\n    return 90 <= get_device_sm() < LIMIT\n")
    assert computed.detail["unknown"] == "the value compared is computed, not a literal"
    (members,) = find(b"def f(arch):\n    return Arch.sm_100 <= arch <= Arch.sm_100f\n")  # CuTe DSL, chained
    assert str(members.admits) == "sm_100"
    with pytest.raises(CannotWiden, match="line 2: no rewrite of `90 <= get_device_sm\\(\\) < 110` admits exactly"):
        _rewrite("def f():\n    return 90 <= get_device_sm() < 110\n", "sm_120")  # dropping `< 110` admits sm_121 too


def test_an_and_of_negations_is_a_check():
    """`if major != 9 and major != 10: raise` lets 9 and 10 through: a check for them, as a lone `!=` is (it was
    read as admitting everything else, so widening it for 12 said "already admitted")."""
    source = "def f():\n    major, minor = get_device_capability()\n    if major != 9 and major != 10:\n        raise E()\n"
    (gate,) = find(source.encode())
    assert sorted(a.name for a in gate.admits.admitted) == ["sm_100", "sm_103", "sm_90"]
    assert _rewrite(source, "sm_120,sm_121") == source.replace("major != 10:", "major != 10 and major != 12:")


PAIR_WIDENINGS = [
    pytest.param(
        "def commit(state):\n    target = device_target(state.device)\n    if target.major != 10:\n        raise E()\n",
        {"target.major": "major", "target.minor": "minor"}, "sm_120",
        "    if target.major != 10 and (target.major, target.minor) != (12, 0):\n",
        id="a-check-gains-the-pair-it-lets-through-flashinfer-0.7.4-replayssm",
    ),
    pytest.param(
        "def f(x, cap):\n    return x and cap.major in (9, 10)\n", {"cap.major": "major", "cap.minor": "minor"},
        "sm_110,sm_120",
        "    return x and (cap.major in (9, 10) or (cap.major, cap.minor) in ((11, 0), (12, 0)))\n",
        id="an-or-added-inside-an-and-is-parenthesized",
    ),
    pytest.param(
        "def f(cap):\n    if cap.major != 9 and cap.major != 10:\n        raise E()\n",
        {"cap.major": "major", "cap.minor": "minor"}, "sm_120",
        "    if cap.major != 9 and cap.major != 10 and (cap.major, cap.minor) != (12, 0):\n",
        id="a-chain-of-negations-gains-the-negated-pair",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("before", "names", "archs", "line"), PAIR_WIDENINGS)
def test_exactly_one_minor_of_a_major_read_alone_adds_the_pair(before, names, archs, line):
    """admit = "exact" for sm_120 where the condition reads the major alone: `major in (10, 12)` would admit sm_121
    too, so where the code can write the (major, minor) pair, the pair is added instead."""
    after = _rewrite(before, archs, **({"names": names} if names else {}))
    assert line in after.splitlines(keepends=True)
    assert _rewrite(after, archs, **({"names": names} if names else {})) == after  # a second pass changes nothing


def test_the_whole_major_when_the_targets_are_all_of_it_or_no_minor_is_declared():
    names = {"cap.major": "major", "cap.minor": "minor"}
    declared = "def f(cap):\n    if cap.major == 10:\n        return True\n"
    assert "if cap.major in (10, 12):" in _rewrite(declared, "sm_120,sm_121", names=names)  # the family: the major says it
    assert "if cap.major in (10, 12):" in _rewrite(declared, "sm_120", names={"cap.major": "major"})  # no minor declared
    capability = "def f():\n    if torch.cuda.get_device_capability()[0] != 9:\n        skip()\n"
    assert "[0] not in (9, 12):" in _rewrite(capability, "sm_120")  # no declared minor: the majors, as upstream writes


def test_a_lone_negation_is_a_check_but_inside_a_chain_an_exclusion():
    lone = find(b"def f():\n    major, minor = get_device_capability()\n    if minor != 3:\n        skip()\n")
    chained = find(b"def f():\n    major, minor = get_device_capability()\n    if major == 10 and minor != 3:\n        go()\n")
    assert sorted(a.name for a in lone[0].admits.admitted) == ["sm_103"]  # `if minor != 3: skip()` checks for 3
    assert sorted(a.name for a in chained[0].admits.admitted) == ["sm_100"]


# the property: a comparison, or any and/or/not of them, admits exactly the archs where it holds

_OPS = ["==", "!=", "<", "<=", ">", ">=", "in", "not in"]
_comparison = st.tuples(
    st.sampled_from(["major", "minor"]),
    st.sampled_from(_OPS),
    st.lists(st.integers(0, 13), min_size=1, max_size=3, unique=True),
)


def _spell(comparison) -> str:
    name, op, values = comparison
    if op in ("<", "<=") and len(values) == 3:  # a chained comparison: `values[1] <= major < values[2]`
        return f"{values[1]} <= {name} {op} {values[2]}"
    if op in ("in", "not in"):
        return f"{name} {op} ({', '.join(map(str, values))},)"
    return f"{name} {op} {values[0]}"


@st.composite
def _conditions(draw):
    terms = [_spell(c) for c in draw(st.lists(_comparison, min_size=1, max_size=4))]
    text = terms[0]
    for term in terms[1:]:
        text = f"{text} {draw(st.sampled_from(['and', 'or']))} {term}"
        if draw(st.booleans()):
            text = f"({text})"
        if draw(st.integers(0, 5)) == 0:
            text = f"not {text}" if text.startswith("(") else f"not ({text})"
    return text


def _holds(condition: str) -> set:
    return {a for a in DEFAULT_ARCHS if eval(condition, {}, {"major": a.major, "minor": a.minor})}


@settings(max_examples=150, deadline=None)
@given(condition=_conditions(), targets=st.lists(st.sampled_from(DEFAULT_ARCHS), min_size=1, max_size=2, unique=True))
def test_conditions_admit_exactly_where_they_hold_and_widen_to_exactly_the_targets(condition, targets):
    source = f"def f():\n    major, minor = torch.cuda.get_device_capability()\n    return {condition}\n"
    data = source.encode()
    lone = ast.parse(condition, mode="eval").body
    if isinstance(lone, ast.Compare) and isinstance(lone.ops[0], (ast.NotEq, ast.NotIn)):
        return  # alone, a recipe reads it as a check for its values (test_negated_major_becomes_not_in)
    (gate,) = find(data)
    if isinstance(lone, ast.BoolOp) and isinstance(lone.op, ast.And) and all(
        isinstance(v, ast.Compare) and isinstance(v.ops[0], (ast.NotEq, ast.NotIn)) for v in lone.values
    ):  # an `and` of negations only: a check for what any of them names (test_an_and_of_negations_is_a_check)
        assert set(gate.admits.admitted) == set(DEFAULT_ARCHS) - _holds(gate.text) and not gate.admits.unknown
        return
    assert ast.dump(ast.parse(gate.text, mode="eval")) == ast.dump(ast.parse(condition, mode="eval"))  # one gate: all of it
    assert set(gate.admits.admitted) == _holds(gate.text) and not gate.admits.unknown
    try:
        edits = widen(data, gate, tuple(targets))
    except CannotWiden as exc:
        assert str(exc).startswith("line 3: no rewrite of ")
        return
    after = apply_edits(data, edits)
    (again,) = find(after)
    # and what the condition cannot tell from a target: one that reads only the major admits sm_121 with sm_120
    sides = [side for side in ("major", "minor") if side in gate.text]
    told = {tuple(getattr(t, side) for side in sides) for t in targets}
    cannot_tell = {a for a in DEFAULT_ARCHS if tuple(getattr(a, side) for side in sides) in told}
    assert _holds(again.text) == _holds(gate.text) | cannot_tell
    assert set(again.admits.admitted) == _holds(again.text)
    assert widen(after, again, tuple(targets)) == []


# ---------------------------------------------------------------- capability values as real code holds them

# FlashInfer's b12x launch shape: the arch held as a string, checked before a raise.
B12X_LAUNCH = '''\
class _DenseLaunch:
    def __init__(self, sm_version: str):
        if sm_version != "sm_120":
            raise ValueError(f"dense launch supports sm_120 only, got {sm_version}")
        self.sm_version = sm_version
'''

# FlashInfer's CUTLASS MoE loader shape: a backend string of major and minor digits.
MOE_BACKEND = '''\
def get_moe_module(backend: str = "100"):
    if backend in ("120", "121"):
        return gen_moe_sm120_module()
    elif backend in ("100", "110"):
        return gen_moe_sm100_module()
    raise ValueError(backend)
'''

# SGLang's platform shape: a capability object with to_int() and its fields.
PLATFORM_CAPABILITY = '''\
class Config:
    def validate(self, args):
        capability = current_platform.get_device_capability()
        if capability is None or capability.to_int() != 90:
            raise ValueError("needs SM90")
        if capability.major == 9:
            args.fast = True
'''

# SGLang's imported flag shape: a module-level name bound in another module (= get_device_sm()).
IMPORTED_SM = '''\
from sglang.srt.models.common.utils import _device_sm


def route(x, w):
    if _device_sm == 100 and w.shape[0] == 256:
        return fast_router_gemm(x, w)
    return slow_router_gemm(x, w)
'''


@pytest.mark.parametrize(
    ("source", "archs", "selector", "before", "after"),
    [
        pytest.param(B12X_LAUNCH, "sm_120,sm_121", {}, 'sm_version != "sm_120"', 'sm_version not in ("sm_120", "sm_121")',
                     id="arch-string-negated-becomes-not-in"),
        pytest.param("def f(arch):\n    if arch in ('sm_100a', 'sm_103a'):\n        go()\n", "sm_110", {},
                     "('sm_100a', 'sm_103a')", "('sm_100a', 'sm_103a', 'sm_110a')", id="arch-strings-keep-quote-and-variant"),
        pytest.param("def f(arch):\n    if arch == 'compute_90':\n        go()\n", "sm_100", {},
                     "arch == 'compute_90'", "arch in ('compute_90', 'compute_100')", id="compute-prefix"),
        pytest.param(MOE_BACKEND, "sm_107", {"names": {"backend": "sm"}, "calls": "gen_moe_sm100_module"},
                     '("100", "110")', '("100", "107", "110")', id="declared-digit-strings-in-order"),
        pytest.param("def f(cc):\n    if cc == \"12.0\":\n        go()\n", "sm_121", {"names": {"cc": "sm"}},
                     'cc == "12.0"', 'cc in ("12.0", "12.1")', id="declared-dotted-string"),
        pytest.param(PLATFORM_CAPABILITY, "sm_120", {"calls": "ValueError"}, "capability.to_int() != 90",
                     "capability.to_int() not in (90, 120)", id="platform-to-int"),
        pytest.param(PLATFORM_CAPABILITY, "sm_100", {"assigns": "args.fast"}, "capability.major == 9",
                     "capability.major in (9, 10)", id="platform-major-field"),
        pytest.param(IMPORTED_SM, "sm_103", {"names": {"_device_sm": "sm"}}, "_device_sm == 100",
                     "_device_sm in (100, 103)", id="declared-imported-int"),
        pytest.param("def f(props):\n    if props.cc_major == 9:\n        go()\n", "sm_120", {"names": {"props.cc_major": "major"}},
                     "props.cc_major == 9", "props.cc_major in (9, 12)", id="declared-major"),
        pytest.param("def f(cap):\n    if cap.sm in (120, 100):\n        go()\n", "sm_110", {"names": {"cap.sm": "sm"}},
                     "(120, 100)", "(120, 100, 110)", id="unordered-values-gain-at-the-end"),
    ],
)
def test_capability_values_widen_in_their_own_style(source, archs, selector, before, after):
    assert before in source
    widened = _rewrite(source, archs, **selector)
    assert widened == source.replace(before, after, 1)
    assert _rewrite(widened, archs, **selector) == widened  # a second pass changes nothing


@pytest.mark.parametrize(
    ("source", "selector"),
    [
        pytest.param(MOE_BACKEND, {}, id="digit-strings-say-nothing-undeclared"),
        pytest.param("def f(arch):\n    if arch[:5] == 'sm_90':\n        go()\n", {}, id="a-slice-is-not-the-arch"),
        pytest.param("def f(dtype):\n    if dtype != 'fp8_e4m3':\n        raise ValueError\n", {}, id="not-an-arch-string"),
        pytest.param('def f():\n    """if sm_version != "sm_120": raise"""\n    # if sm != "sm_120": raise\n', {},
                     id="docstring-and-comment"),
        pytest.param(IMPORTED_SM, {"names": {"other": "sm"}}, id="undeclared-imported-name"),
    ],
)
def test_capability_values_that_are_not_read(source, selector):
    assert find(source.encode(), **selector) == []
    assert _rewrite(source, "sm_121", **selector) == source


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(B12X_LAUNCH.replace('!= "sm_120"', 'not in ("sm_120", "sm_121")'), id="both-already-named"),
        pytest.param(PLATFORM_CAPABILITY.replace("!= 90", "not in (90, 120, 121)"), id="to-int-already-admits"),
    ],
)
def test_capability_values_already_admitted(source):
    assert find(source.encode(), function=None)
    assert _rewrite(source, "sm_120,sm_121", calls="ValueError") == source


@pytest.mark.parametrize(
    ("source", "names", "reason"),
    [
        ("def f(backend):\n    if backend >= \"100\":\n        pass\n", {"backend": "sm"}, "by order"),
        ("def f(backend):\n    if backend == BACKEND_SM100:\n        pass\n", {"backend": "sm"}, "computed"),
        ("def f(backend):\n    if backend == \"sm100_fast\":\n        pass\n", {"backend": "sm"}, "not an arch name"),
        ("def f(major):\n    if major == \"12\":\n        pass\n", {"major": "major"}, "not an arch name"),
    ],
)
def test_unreadable_values_are_refused_with_the_line_and_reason(source, names, reason):
    data = source.encode()
    [gate] = find(data, names=names)
    assert gate.admits.unknown and not gate.admits.admitted
    with pytest.raises(CannotWiden, match=rf"^line 2: .*{reason}"):
        widen(data, gate, (Arch.parse("sm_121"),))


def test_names_selector_is_checked():
    from codemods.gates.python.python_capability import check_selector
    from codemods.gates.registry import KINDS

    assert "names" in KINDS["python_capability"].selector_names
    assert check_selector("names", {"_device_sm": "sm", "self.backend": "sm", "cap.to_int()": "sm"}) == ""
    assert "meaning is one of" in check_selector("names", {"backend": "string"})
    assert "table" in check_selector("names", ["backend"])
    assert "not a name" in check_selector("names", {"backend[0]": "sm"})


def test_scan_reports_an_arch_string_check_by_what_runs_after_it(tmp_path):
    from codemods.audit.scan import scan

    (tmp_path / "launch.py").write_text(B12X_LAUNCH + "\n\ndef pick(arch):\n    if arch == 'sm_100a':\n        use_tcgen05()\n")
    gates = scan(tmp_path, Arch.parse("sm_121"), cache=None).gates
    assert [(g["kind"], g["line"], g["text"], g["admits"], g["excludes_arch"]) for g in gates] == [
        # `if ... != "sm_120": raise`: what follows runs on sm_120 only
        ("python_capability", 3, 'sm_version != "sm_120"', ["sm_120"], True),
        ("python_capability", 9, "arch == 'sm_100a'", ["sm_100"], True),
    ]
    (tmp_path / "launch.py").write_text(B12X_LAUNCH.replace('!= "sm_120"', 'not in ("sm_120", "sm_121")'))
    [gate] = scan(tmp_path, Arch.parse("sm_121"), cache=None).gates
    assert gate["admits"] == ["sm_120", "sm_121"] and not gate["excludes_arch"]


_STYLES = {
    "sm": lambda a: f'"sm_{a.code}"',
    "bare": lambda a: f'"{a.code}"',
    "dotted": lambda a: f'"{a.major}.{a.minor}"',
    "variant": lambda a: f"'sm_{a.code}a'",
}


@settings(max_examples=60, deadline=None)
@given(
    style=st.sampled_from(sorted(_STYLES)),
    op=st.sampled_from(["==", "!=", "in", "not in"]),
    chosen=st.lists(st.sampled_from(DEFAULT_ARCHS), min_size=1, max_size=3, unique=True),
    targets=st.lists(st.sampled_from(DEFAULT_ARCHS), min_size=1, max_size=3, unique=True),
)
def test_string_values_read_as_their_numbers(style, op, chosen, targets):
    """A capability held as a string admits what the same comparison with get_device_sm()'s ints admits,
    before and after widening (the spelling is the only difference)."""
    chosen = sorted(a for a in chosen if style != "variant" or a.major >= 9)  # sm_80a is no target
    assume(chosen)
    chosen = chosen[:1] if op in ("==", "!=") else chosen
    spell = _STYLES[style]

    def literal(items):
        return items[0] if op in ("==", "!=") else "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    as_text = f"def f(held):\n    if held {op} {literal([spell(a) for a in chosen])}:\n        pass\n".encode()
    as_int = f"def f():\n    if get_device_sm() {op} {literal([str(a.code) for a in chosen])}:\n        pass\n".encode()
    names = {"held": "sm"}
    (text_gate,), (int_gate,) = find(as_text, names=names), find(as_int)
    assert text_gate.admits == int_gate.admits
    assert admits(text_gate.text, DEFAULT_ARCHS, text_gate.detail) == text_gate.admits
    wide_text = apply_edits(as_text, widen(as_text, text_gate, tuple(targets)))
    wide_int = apply_edits(as_int, widen(as_int, int_gate, tuple(targets)))
    (text_again,), (int_again,) = find(wide_text, names=names), find(wide_int)
    assert text_again.admits == int_again.admits
    assert widen(wide_text, text_again, tuple(targets)) == []


# FlashInfer's own capability helper (flashinfer/utils.py: `get_compute_capability(device)` returns the device's
# (major, minor)), declared in capability.blocks.HELPERS and checked against the release source
# (tests/replay/test_replay_real.py); a helper that is not declared is not guessed from its name.
FLASHINFER_HELPER = '''\
from flashinfer.utils import get_compute_capability


def _mm_fp4_backends(a):
    major, minor = get_compute_capability(a.device)
    if major == 12 and minor == 0:
        return ["b12x", "cutlass"]
    return ["cutlass"]


def xqa(query):
    cap = get_compute_capability(query.device)
    if cap[0] not in [9, 10, 12]:
        raise ValueError("xqa needs SM90, SM100 or SM120")
    return run_xqa(query)
'''


def test_flashinfer_helper_before_an_undeclared_helper_is_not_read():
    # before: the reader knew torch's and SGLang's calls only; a helper it is not told about still reads nothing
    undeclared = FLASHINFER_HELPER.replace("get_compute_capability", "get_device_caps")
    assert find(undeclared.encode()) == []


def test_flashinfer_helper_after_its_pair_is_read_by_run():
    gates = find(FLASHINFER_HELPER.encode())
    assert [(g.line, g.text, sorted(a.name for a in g.admits.admitted)) for g in gates] == [
        (6, "major == 12 and minor == 0", ["sm_120"]),
        (13, "cap[0] not in [9, 10, 12]", ["sm_100", "sm_103", "sm_120", "sm_121", "sm_90"]),
    ]
    data = FLASHINFER_HELPER.encode()
    widened = apply_edits(data, widen(data, gates[0], (Arch.parse("sm_121"),)))
    assert b"    if major == 12 and minor in [0, 1]:\n" in widened


def test_flashinfer_helper_after_scan_reads_the_same_comparisons(tmp_path):
    from codemods.audit.scan import scan

    (tmp_path / "m.py").write_text(FLASHINFER_HELPER)
    gates = scan(tmp_path, Arch.parse("sm_121")).gates
    assert [(g["kind"], g["line"], g["symbol"], g["text"], g["admits"], g["excludes_arch"]) for g in gates] == [
        # scan lists each comparison, with what the whole condition's path admits: the b12x path runs on sm_120 only
        ("python_capability", 6, "_mm_fp4_backends", "major == 12", ["sm_120"], True),
        ("python_capability", 6, "_mm_fp4_backends", "minor == 0", ["sm_120"], True),
        # the code after `if cap[0] not in [...]: raise` runs on 9, 10 and 12: sm_121 is admitted
        ("python_capability", 13, "xqa", "cap[0] not in [9, 10, 12]", ["sm_90", "sm_100", "sm_103", "sm_120", "sm_121"],
         False),
    ]  # fmt: skip


# FlashInfer 0.7.1's batch MLA modules: a module's own function passing the helper's result on.
WRAPPED = '''\
def _get_compute_capability(device):
    if device.type != "cuda":
        raise ValueError(device)
    return get_compute_capability(device)


def _not_a_wrapper(device):
    if device is None:
        return (0, 0)
    return get_compute_capability(device)


class Wrapper:
    def plan(self, q_dtype, scale_mode="default"):
        if (
            scale_mode == "default"
            and not (
                q_dtype == torch.float8_e4m3fn
                and _get_compute_capability(self.device) == (10, 0)
            )
        ):
            scale_mode = "kv-per-tensor"
        major, minor = _get_compute_capability(self.device)
        if major != 10:
            raise ValueError(major)
        if _not_a_wrapper(self.device) == (10, 0):
            pass
'''


def test_a_module_own_wrapper_of_the_helper_reads_as_the_helper():
    gates = find(WRAPPED.encode())
    # `_not_a_wrapper` also returns (0, 0): not read, whatever its name
    assert [(g.line, g.text, sorted(a.name for a in g.admits.admitted)) for g in gates] == [
        (19, "_get_compute_capability(self.device) == (10, 0)", ["sm_100"]),
        (24, "major != 10", ["sm_100", "sm_103"]),
    ]
    after = _rewrite(WRAPPED, "sm_103,sm_107")
    assert "                and _get_compute_capability(self.device) in ((10, 0), (10, 3), (10, 7))\n" in after
    assert "        if major != 10:\n" in after  # major 10 holds on 10.3 and 10.7 already
    assert after.count("(10, 7)") == 1  # `_not_a_wrapper(...) == (10, 0)` is not read: not widened
    assert _rewrite(WRAPPED, "sm_100", function="plan") == WRAPPED  # admitted already: no edit


def test_a_module_own_wrapper_is_read_by_scan_too(tmp_path):
    from codemods.audit.scan import scan

    (tmp_path / "m.py").write_text(WRAPPED)
    gates = scan(tmp_path, Arch.parse("sm_107")).gates
    assert [(g["line"], g["symbol"], g["text"]) for g in gates] == [
        (19, "plan", "_get_compute_capability(self.device) == (10, 0)"),
        (24, "plan", "major != 10"),
    ]


# CuTe DSL (cutlass.base_dsl.arch.Arch): members `sm_100`, `sm_100a`, `sm_100f`, ... ordered by (major, minor) alone,
# so `arch >= Arch.sm_100 and arch <= Arch.sm_100f` holds on the 10.0 targets only.
CUTE_DSL = '''\
import cutlass
from cutlass.base_dsl.arch import Arch


class Decode:
    def pick(self, arch):
        if cutlass.const_expr(arch >= Arch.sm_100 and arch <= Arch.sm_100f):
            self.variant = 0
        elif cutlass.const_expr(Arch.sm_103 <= arch and arch <= Arch.sm_103f):
            self.variant = 1
        else:
            raise NotImplementedError(arch)

    def tail(self):
        if self.arch in (Arch.sm_120a, Arch.sm_121a):
            return 2
        return self.arch > Arch.sm_90a
'''


def test_cute_dsl_arch_members_read_as_their_numbers(tmp_path):
    from codemods.audit.scan import scan

    source = CUTE_DSL.encode()
    found = {g.text: str(g.admits) for g in find(source)}
    assert found == {
        "arch >= Arch.sm_100 and arch <= Arch.sm_100f": "sm_100",
        "Arch.sm_103 <= arch and arch <= Arch.sm_103f": "sm_103",
        "self.arch in (Arch.sm_120a, Arch.sm_121a)": "sm_120,sm_121",
        "self.arch > Arch.sm_90a": "sm_100,sm_103,sm_110,sm_120,sm_121",
    }
    (tmp_path / "decode.py").write_text(CUTE_DSL)
    gates = scan(tmp_path, Arch.parse("sm_121"), cache=None).gates
    assert [(g["line"], g["text"], g["admits"], g["excludes_arch"]) for g in gates] == [
        (7, "arch >= Arch.sm_100 and arch <= Arch.sm_100f", ["sm_100"], True),  # one range, one row
        (9, "Arch.sm_103 <= arch and arch <= Arch.sm_103f", ["sm_103"], True),
        (15, "self.arch in (Arch.sm_120a, Arch.sm_121a)", ["sm_120", "sm_121"], False),
        (17, "self.arch > Arch.sm_90a", ["sm_100", "sm_103", "sm_110", "sm_120", "sm_121"], False),
    ]


def test_cute_dsl_arch_members_are_widened_only_as_ranges():
    """No `Arch.sm_121a` is written into an equality of members (CannotWiden, the bytes kept); a range of one arch
    gains a range per target, joined by `or` (FlashInfer 2cf8f4cc7's mla_decode_fp8.py)."""
    source = b"def pick(arch):\n    if arch == Arch.sm_100a:\n        pass\n    if arch >= Arch.sm_100 and arch <= Arch.sm_100f:\n        pass\n"
    equality, ranged = find(source)
    with pytest.raises(CannotWiden, match="compares CuTe DSL `Arch` members other than as whole ranges"):
        widen(source, equality, (Arch.parse("sm_121"),))
    assert apply_edits(source, widen(source, ranged, (Arch.parse("sm_121"),))).decode().splitlines()[3:6] == [
        "    if (arch >= Arch.sm_100 and arch <= Arch.sm_100f) or (",  # as black and ruff format split it
        "        arch >= Arch.sm_121 and arch <= Arch.sm_121f",
        "    ):",
    ]
    mixed = b"def pick(arch, x):\n    return x and arch >= Arch.sm_100 and arch <= Arch.sm_100f\n"
    with pytest.raises(CannotWiden, match="other than as whole ranges"):
        widen(mixed, find(mixed)[0], (Arch.parse("sm_103"),))


MEMBER_RANGES = """\
def softmax(self, row_max, tAcc):
    arch = BaseDSL._get_dsl().get_arch_enum()
    if cutlass.const_expr(arch >= Arch.sm_100 and arch <= Arch.sm_100f):
        row_max = reduce_in_registers(tAcc, row_max)
    elif cutlass.const_expr(arch >= Arch.sm_103 and arch <= Arch.sm_103f):
        row_max = reduce_on_tmem_load(tAcc, row_max)
    return row_max
"""


@pytest.mark.parametrize(
    ("archs", "branch"),
    [
        pytest.param("sm_101,sm_110", (
            "    elif cutlass.const_expr(\n"
            "        (arch >= Arch.sm_101 and arch <= Arch.sm_101f)\n"
            "        or (arch >= Arch.sm_103 and arch <= Arch.sm_103f)\n"
            "        or (arch >= Arch.sm_110 and arch <= Arch.sm_110f)\n"
            "    ):\n"
        ), id="ranges-in-ascending-order-black-split-inside-the-call-of-one-argument"),
        pytest.param("sm_110", (
            "    elif cutlass.const_expr(\n"
            "        (arch >= Arch.sm_103 and arch <= Arch.sm_103f)\n"
            "        or (arch >= Arch.sm_110 and arch <= Arch.sm_110f)\n"
            "    ):\n"
        ), id="one-range-added-after"),
    ],
)  # fmt: skip
def test_a_cute_dsl_range_gains_one_range_per_target(archs, branch):
    after = _rewrite(MEMBER_RANGES, archs, picks="sm_103")
    assert after == MEMBER_RANGES.replace(
        "    elif cutlass.const_expr(arch >= Arch.sm_103 and arch <= Arch.sm_103f):\n", branch
    )
    assert _rewrite(after, archs, picks="sm_103") == after  # a second pass changes nothing
    universe = tuple(dict.fromkeys(DEFAULT_ARCHS + parse_archs(archs)))  # sm_101 is not among the defaults
    (again,) = [g for g in find(after.encode(), universe) if g.admits.admits(Arch.parse("sm_103"))]
    assert sorted(a.name for a in again.admits.admitted) == sorted(["sm_103", *archs.split(",")])


# FlashInfer 0.7.4's softmax: a range `or`-ed with a range over names bound by `getattr(Arch, "sm_107", ...)`.
NAMED_RANGES = """\
_ARCH_SM107 = getattr(Arch, "sm_107", Arch.sm_103f)
_ARCH_SM107F = getattr(Arch, "sm_107f", Arch.sm_103f)


def softmax(arch):
    if cutlass.const_expr(arch >= Arch.sm_100 and arch <= Arch.sm_100f):
        a = 1
    elif cutlass.const_expr(
        (arch >= Arch.sm_103 and arch <= Arch.sm_103f)
        or (arch >= _ARCH_SM107 and arch <= _ARCH_SM107F)
    ):
        a = 2
"""


def test_scan_lists_a_member_range_once_and_a_range_over_names_as_unknown(tmp_path):
    """Round 11 bug 10: each range was two rows (`arch >= Arch.sm_100`, `arch <= Arch.sm_100f`), and the `elif`
    admitted every arch, its `arch >= _ARCH_SM107` read as a test that does not depend on the GPU."""
    from codemods.audit.scan import scan

    (tmp_path / "hca.py").write_text(NAMED_RANGES)
    gates = scan(tmp_path, Arch.parse("sm_110"), cache=None).gates
    assert [(g["line"], g["text"], g["admits"]) for g in gates] == [
        (6, "arch >= Arch.sm_100 and arch <= Arch.sm_100f", ["sm_100"]),
        (9, "arch >= Arch.sm_103 and arch <= Arch.sm_103f", ["sm_103"]),
    ]
    assert gates[1]["unknown"] == ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_110", "sm_120", "sm_121"]
    source = NAMED_RANGES.encode()
    (named,) = [g for g in find(source, function="softmax") if "_ARCH_SM107" in g.text]
    assert "`_ARCH_SM107`" in named.detail["unknown"]
    with pytest.raises(CannotWiden, match="compared with `_ARCH_SM107`"):  # round 11 bug 2: unknown is not widened
        widen(source, named, (Arch.parse("sm_110"),))


def test_scan_lists_bounds_of_one_number_as_one_range(tmp_path):
    """An `and` of a lower and an upper bound of one subject is one range (one row); other `and`s keep a row each."""
    from codemods.audit.scan import scan

    (tmp_path / "op.py").write_text(
        "from sglang.srt.utils import get_device_sm\n\n\ndef f():\n    sm = get_device_sm()\n"
        "    if sm >= 90 and sm < 110:\n        return 1\n    if sm >= 90 and sm >= 100:\n        return 2\n"
    )
    gates = scan(tmp_path, Arch.parse("sm_110"), cache=None).gates
    assert [(g["text"], g["admits"]) for g in gates] == [
        ("sm >= 90 and sm < 110", ["sm_90", "sm_100", "sm_103"]),
        ("sm >= 90", ["sm_100", "sm_103", "sm_110", "sm_120", "sm_121"]),
        ("sm >= 100", ["sm_100", "sm_103", "sm_110", "sm_120", "sm_121"]),
    ]


@pytest.mark.parametrize(
    ("archs", "branch"),
    [
        pytest.param("sm_110", (
            "        (arch >= Arch.sm_100 and arch <= Arch.sm_100f)\n"
            "        or (arch >= Arch.sm_103 and arch <= Arch.sm_103f)\n"
            "        or (arch >= Arch.sm_110 and arch <= Arch.sm_110f)\n"
        ), id="round-11-bug-2-a-line-of-its-own-last"),
        pytest.param("sm_90,sm_101,sm_120", (
            "        (arch >= Arch.sm_90 and arch <= Arch.sm_90f)\n"
            "        or (arch >= Arch.sm_100 and arch <= Arch.sm_100f)\n"
            "        or (arch >= Arch.sm_101 and arch <= Arch.sm_101f)\n"
            "        or (arch >= Arch.sm_103 and arch <= Arch.sm_103f)\n"
            "        or (arch >= Arch.sm_120 and arch <= Arch.sm_120f)\n"
        ), id="first-between-and-last-each-where-it-sorts"),
    ],
)  # fmt: skip
def test_a_split_or_of_ranges_gains_a_line_per_range(archs, branch):
    """Round 11 bug 2: the new range was nested with the old in parentheses, `((a) or (b))`, on one long line."""
    before = (
        "def softmax(arch):\n    if cutlass.const_expr(\n"
        "        (arch >= Arch.sm_100 and arch <= Arch.sm_100f)\n"
        "        or (arch >= Arch.sm_103 and arch <= Arch.sm_103f)\n"
        "    ):\n        a = 2\n"
    )
    head = "def softmax(arch):\n    if cutlass.const_expr(\n"
    after = _rewrite(before, archs, picks="sm_103")
    assert after == head + branch + "    ):\n        a = 2\n"
    assert _rewrite(after, archs, picks="sm_103") == after


def test_the_kind_says_run_has_no_edit_for_a_comparison_of_members(tmp_path):
    """GateKind.editable (python_capability's has_edit): scan's widenable where widen edits, blocker for members."""
    from codemods.audit.scan import scan

    (tmp_path / "op.py").write_text(
        "import torch\nfrom cutlass.base_dsl.arch import Arch\n\n\ndef check(arch):\n"
        "    if not arch == Arch.sm_120a:\n        raise ValueError(arch)\n"
        "    major, minor = torch.cuda.get_device_capability()\n    if not (major == 12 and minor == 0):\n"
        "        raise ValueError(minor)\n"
    )
    gates = scan(tmp_path, Arch.parse("sm_121"), cache=None).gates
    assert [(g["text"], g["classification"]) for g in gates] == [
        ("arch == Arch.sm_120a", "blocker"), ("major == 12", "widenable"), ("minor == 0", "widenable"),
    ]  # fmt: skip
    kind = KINDS["python_capability"]
    (number,) = find(b"major, minor = torch.cuda.get_device_capability()\nif major == 12:\n    pass\n")
    members = replace(number, detail={**number.detail, "members": True})
    assert (kind.editable(number), kind.editable(members)) == (True, False)
    assert not KINDS["python_predicate"].editable(number)
    # python_arch_map widens since issue 17, for the archs its gate's detail lists it `adds` (a same-major key to copy)
    (table,) = find_map(b'M = {"sm_100": 1, "sm_120": 2}\n\n\ndef f(cc):\n    return M[cc]\n')
    map_kind = KINDS["python_arch_map"]
    assert (map_kind.editable(table, Arch.parse("sm_121")), map_kind.editable(table, Arch.parse("sm_110"))) == (True, False)


def test_cute_dsl_compile_target_is_no_gate():
    """`cute.GPUArch("sm_90a")` names what a kernel is compiled for, compared with nothing: not read."""
    assert find(b'def build(f):\n    return cute.compile(f, compile_options=(cute.GPUArch("sm_90a"),))\n') == []


def test_a_cute_dsl_arch_check_that_raises_is_a_blocker_without_an_edit(tmp_path):
    """`if not arch == Arch.sm_120a: raise`: sm_121 gets nothing, and widen writes no `Arch.sm_121a`: a blocker."""
    from codemods.audit.scan import scan

    (tmp_path / "op.py").write_text(
        "from cutlass.base_dsl.arch import Arch\n\n\ndef check(arch):\n"
        "    if not arch == Arch.sm_120a:\n        raise ValueError(arch)\n"
    )
    [gate] = scan(tmp_path, Arch.parse("sm_121"), cache=None).gates
    assert (gate["text"], gate["admits"], gate["classification"]) == ("arch == Arch.sm_120a", ["sm_120"], "blocker")
    assert gate["reason"].endswith("codemod has no edit for this gate")


# CuTe DSL's `Arch` is an Enum of (major, minor, suffix): `==` and `in` compare the suffix, and on a GPU of major 9 or
# later the DSL's arch is its `a` target by default (cutlass.base_dsl.env_manager: `suffix = "a"`).
CUTE_DSL_EQUALITY = '''\
from cutlass.base_dsl.arch import Arch
from cutlass.cutlass_dsl import BaseDSL


class MmaSM120BlockScaledOp:
    def __post_init__(self) -> None:
        arch = BaseDSL._get_dsl().get_arch_enum()
        if not Arch.sm_120a == arch:
            raise ValueError(f"expects arch to be sm_120a, but got {arch}")


class MmaSM100FamilyOp:
    def __post_init__(self) -> None:
        arch = BaseDSL._get_dsl().get_arch_enum()
        if not arch == Arch.sm_100f:
            raise ValueError(f"expects arch to be sm_100f, but got {arch}")

    def pick(self, arch):
        return 1 if arch in (Arch.sm_100, Arch.sm_103) else 0
'''


def test_cute_dsl_equality_compares_the_members_suffix(tmp_path):
    from codemods.audit.scan import scan

    source = CUTE_DSL_EQUALITY.encode()
    found = {g.line: (str(g.admits), g.detail.get("unknown", "")) for g in find(source)}
    # an `a` member is the GPU's default target: read as its arch, flipped or not (as before); the code after
    # `if not Arch.sm_120a == arch: raise` runs on sm_120 alone
    assert found[8] == ("sm_120", "")
    # `f` and plain members (major >= 9) are no GPU's default target: before, read as sm_100 (and sm_100, sm_103)
    for line in (15, 19):
        assert found[line][0].startswith("none (unknown:") and "CUTE_DSL_ARCH" in found[line][1]
    (tmp_path / "mma.py").write_text(CUTE_DSL_EQUALITY)
    gates = scan(tmp_path, Arch.parse("sm_121"), cache=None).gates
    assert [(g["line"], g["text"], g["admits"], g["excludes_arch"]) for g in gates] == [
        (8, "Arch.sm_120a == arch", ["sm_120"], True),  # the scan lists no comparison it cannot read
    ]


EARLY_VALUE = b'''\
import torch


def use_fast_path(device):
    major, minor = torch.cuda.get_device_capability(device)
    if major != 12:
        return True
    return run_sm12x_check(device)
'''


def test_a_negated_check_returning_a_value_early_guards_the_code_after_it():
    # `if major != 12: return True` is a check for 12, as `if not P(): return True` is for P: the code after is
    # 12's path, the other archs get `True` early (a value, no refusal); scan reads it the same
    # (test_scan_readers.test_scan_reads_a_negated_capability_check_returning_early_as_run_does)
    [gate] = find(EARLY_VALUE)
    assert gate.admits.names() == ["sm_120", "sm_121"]
    after = apply_edits(EARLY_VALUE, widen(EARLY_VALUE, gate, parse_archs("sm_110")))
    assert after == EARLY_VALUE.replace(b"if major != 12:", b"if major not in (11, 12):")
    assert widen(EARLY_VALUE, gate, parse_archs("sm_121")) == []


def test_a_check_that_holds_keeps_its_body_as_the_path():
    source = EARLY_VALUE.replace(b"if major != 12:", b"if major == 12:")
    [gate] = find(source)
    assert gate.admits.names() == ["sm_120", "sm_121"]
    assert widen(source, gate, parse_archs("sm_121")) == []


def test_a_wrapper_named_without_a_helper_token_binds_its_unpacked_names():
    # FlashInfer 0.7.2's sampling.py: the wrapper's own name holds no helper's
    source = dedent('''\
        def _blackwell_softmax_capability(device_index):
            return torch.cuda.get_device_capability(device_index)


        def _supports_blackwell_softmax(device_index):
            major, minor = _blackwell_softmax_capability(device_index)
            return major == 10 and minor in (0, 3)
    ''')
    [gate] = find(source.encode(), function="_supports_blackwell_softmax")
    assert gate.text == "major == 10 and minor in (0, 3)"
    assert _rewrite(source, "sm_107") == source.replace("minor in (0, 3)", "minor in (0, 3, 7)")


def test_names_can_declare_a_pair():
    # FlashInfer 0.7.2's batch_hca.py: the capability handed in as a parameter
    source = dedent('''\
        def _compile_hca_kernel(head_dim, compute_capability: tuple[int, int]):
            if compute_capability not in ((10, 0), (10, 3)):
                raise RuntimeError(compute_capability)
    ''')
    assert find(source.encode()) == []  # never guessed from the name
    [gate] = find(source.encode(), names={"compute_capability": "pair"})
    assert gate.admits.names() == ["sm_100", "sm_103"] and gate.detail["names"] == {"compute_capability": "pair"}
    after = _rewrite(source, "sm_107", names={"compute_capability": "pair"})
    assert after == source.replace("((10, 0), (10, 3))", "((10, 0), (10, 3), (10, 7))")
    from codemods.gates.python.python_capability import check_selector

    assert check_selector("names", {"cc": "pair"}) == ""
    assert "one of sm, major, minor, cuda_arch, pair" in check_selector("names", {"cc": "tuple"})


def test_function_may_name_one_method_of_several_alike():
    # FlashInfer 0.7.4's fused_moe/api.py: a `supported` classmethod per config class
    source = dedent('''\
        class RoutedConfig:
            @classmethod
            def supported(cls, arch: int) -> bool:
                return arch in (100, 103, 107)


        class FrostConfig:
            @classmethod
            def supported(cls, arch: int) -> bool:
                return arch == 107
    ''')
    names = {"arch": "sm"}
    assert len(find(source.encode(), names=names, function="supported")) == 2
    [gate] = find(source.encode(), names=names, function="FrostConfig.supported")
    assert gate.text == "arch == 107"
    after = _rewrite(source, "sm_120", names=names, function="FrostConfig.supported")
    assert after == source.replace("return arch == 107", "return arch in (107, 120)")


# FlashInfer 0.7.4's jit/cake_bgmv_moe.py: a conditional expression alone in the parentheses black put around it.
BGMV = """\
def _generic_binding_source(target, input_dtype):
    group_shrink_mixed = (
        1 if target.arch in ("sm100a", "sm103a") and input_dtype == "dl_bfloat16" else 0
    )
    return group_shrink_mixed
"""


def test_a_conditional_expression_outgrowing_its_brackets_is_split_as_black_does():
    names = {"target.arch": "sm"}
    after = _rewrite(BGMV, "sm_107", names=names)
    assert after == BGMV.replace(
        '        1 if target.arch in ("sm100a", "sm103a") and input_dtype == "dl_bfloat16" else 0\n',
        '        1\n        if target.arch in ("sm100a", "sm103a", "sm107a")\n        and input_dtype == "dl_bfloat16"\n        else 0\n',
    )
    assert _rewrite(after, "sm_107", names=names) == after
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("ruff") is not None:  # the test extra: what `ruff format` writes, as black
        formatted = subprocess.run([sys.executable, "-m", "ruff", "format", "--isolated", "-"], input=after.encode(),
                                   capture_output=True, check=True).stdout  # fmt: skip
        assert formatted.decode() == after


def test_a_conditional_expression_that_fits_stays_and_one_assigned_bare_gets_black_parentheses():
    names = {"target.arch": "sm"}
    short = BGMV.replace('"dl_bfloat16"', '"x"')
    assert _rewrite(short, "sm_107", names=names) == short.replace('"sm103a")', '"sm103a", "sm107a")')  # fits
    bare = 'def f(target, input_dtype):\n    x = 1 if target.arch in ("sm100a", "sm103a") and input_dtype == "dl_bfloat16_fast" else 0\n'
    # not inside brackets of its own: black adds them, and splits inside (what `ruff format` writes)
    assert _rewrite(bare, "sm_107", names=names) == (
        'def f(target, input_dtype):\n    x = (\n        1\n        if target.arch in ("sm100a", "sm103a", "sm107a")\n'
        '        and input_dtype == "dl_bfloat16_fast"\n        else 0\n    )\n'
    )


@settings(max_examples=150, deadline=None)
@given(condition=_conditions(), targets=st.lists(st.sampled_from(DEFAULT_ARCHS), min_size=1, max_size=2, unique=True))
def test_before_an_exit_the_code_after_comes_through_on_exactly_the_targets(condition, targets):
    """`if <condition>: raise`: the gate admits where the code after it runs (where the condition fails, or for a
    check, `_checked`, what it names); widening makes it run on the targets too and nowhere else new, or refuses."""
    source = f"def f():\n    major, minor = torch.cuda.get_device_capability()\n    if {condition}:\n        raise E()\n"
    data = source.encode()
    (gate,) = find(data)
    after_path = set(DEFAULT_ARCHS) - _holds(gate.text)
    lone = ast.parse(condition, mode="eval").body
    negations_only = all(
        isinstance(v, ast.Compare) and isinstance(v.ops[0], (ast.NotEq, ast.NotIn))
        for v in (lone.values if isinstance(lone, ast.BoolOp) and isinstance(lone.op, ast.And) else [lone])
    )
    if negations_only:
        return  # a check: test_an_and_of_negations_is_a_check, test_negated_major_becomes_not_in
    assert set(gate.admits.admitted) == after_path and not gate.admits.unknown
    try:
        edits = widen(data, gate, tuple(targets))
    except CannotWiden as exc:
        assert str(exc).startswith("line 3: ")
        return
    after = apply_edits(data, edits)
    (again,) = find(after)
    assert set(DEFAULT_ARCHS) - _holds(again.text) >= after_path | set(targets)  # the targets come through
    assert set(again.admits.admitted) == set(DEFAULT_ARCHS) - _holds(again.text)
    assert widen(after, again, tuple(targets)) == []


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            "# -*- coding: latin-1 -*-\ndef f():\n    s = 'é'; major = torch.cuda.get_device_capability()[0]\n"
            "    if s == 'é' and major == 9:\n        pass\n",
            id="latin-1-coding-line-read-as-utf-8-like-every-other-reader",
        ),
    ],
)
def test_a_coding_line_does_not_decide_how_the_file_is_read(source: str) -> None:
    """A `# coding: latin-1` line made Python's parser, given the bytes, read the file as Latin-1 while every span
    is UTF-8: the gate came out a byte off (`ajor == 9:`). Refused, as any file that is not UTF-8 is."""
    with pytest.raises(SourceError, match="^not UTF-8"):
        find(source.encode("latin-1"), DEFAULT_ARCHS)
