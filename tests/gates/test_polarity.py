"""Polarity (issue 18 item 1): a capability gate reports what the code path it guards admits.

Each shape is run: the snippet is executed once per arch with a device of that
capability, and the archs on which the guarded code is reached must be exactly
the archs scan's reader says the gate admits. So no gate is reported reversed.
"""

from __future__ import annotations

import ast
from textwrap import dedent
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates.python import polarity
from codemods.gates.python import python_capability

CAP = "torch.cuda.get_device_capability()"

# How FlashInfer and SGLang tests and helpers guard code, with `{cond}` the condition and `reached()` the
# guarded code. `probe()` runs it.
SHAPES = {
    "if-raise": """
        def probe():
            major, minor = torch.cuda.get_device_capability()
            if {cond}:
                raise RuntimeError("unsupported GPU")
            reached()
    """,
    "if-skip": """
        def probe():
            major, minor = torch.cuda.get_device_capability()
            if {cond}:
                pytest.skip("needs another GPU")
            reached()
    """,
    "if-return": """
        def probe():
            major, minor = torch.cuda.get_device_capability()
            if {cond}:
                return
            reached()
    """,
    "if-return-false": """
        def probe():
            major, minor = torch.cuda.get_device_capability()
            if {cond}:
                return False
            reached()
            return True
    """,
    "if-exit": """
        def probe():
            major, minor = torch.cuda.get_device_capability()
            if {cond}:
                sys.exit(0)
            reached()
    """,
    "if-flag": """
        def probe():
            major, minor = torch.cuda.get_device_capability()
            disable_reason = None
            if {cond}:
                disable_reason = "unsupported GPU"
            elif use_y:
                disable_reason = f"another reason: {{use_y}}"
            if disable_reason is not None:
                return
            reached()
    """,
    "if-flag-truthy": """
        def probe():
            major, minor = torch.cuda.get_device_capability()
            blocked = False
            if {cond}:
                blocked = True
            if blocked:
                raise RuntimeError("unsupported GPU")
            reached()
    """,
    "if-list": """
        def probe():
            major, minor = torch.cuda.get_device_capability()
            bad = []
            if {cond}:
                bad.append("unsupported GPU")
            if bad:
                raise RuntimeError(bad)
            reached()
    """,
    "if-list-after-a-loop": """
        def probe():
            unsupported = []
            for i in range(2):
                major, minor = torch.cuda.get_device_capability(i)
                if {cond}:
                    unsupported.append(f"cuda:{{i}}")
            if unsupported:
                raise RuntimeError(unsupported)
            reached()
    """,
    "if-list-not-an-exit": """
        def probe():
            major, minor = torch.cuda.get_device_capability()
            notes = []
            if {cond}:
                notes.append("fast path")
            if notes:
                log(notes)
            if notes:
                reached()
    """,
    "if-flag-not-an-exit": """
        def probe():
            major, minor = torch.cuda.get_device_capability()
            note = None
            if {cond}:
                note = "fast path"
            if note is not None:
                log(note)
            if note is not None:
                reached()
    """,
    "if-body": """
        def probe():
            major, minor = torch.cuda.get_device_capability()
            if {cond}:
                reached()
    """,
    "if-return-true": """
        def probe():
            major, minor = torch.cuda.get_device_capability()
            if {cond}:
                reached()
                return True
            return False
    """,
    "assert": """
        def probe():
            major, minor = torch.cuda.get_device_capability()
            assert {cond}, "unsupported GPU"
            reached()
    """,
    "skipif": """
        major, minor = 0, 0  # the decorator reads the device itself


        @pytest.mark.skipif({cond_cap}, reason="needs another GPU")
        def probe():
            reached()
    """,
    "skip_if-helper": """
        def probe():
            major, minor = torch.cuda.get_device_capability()
            skip_if({cond}, "needs another GPU")
            reached()
    """,
    "skipUnless": """
        @unittest.skipUnless({cond_cap}, "needs this GPU")
        def probe():
            reached()
    """,
}


class _Skipped(Exception):
    pass


def _skip(reason: str = "") -> None:
    raise _Skipped(reason)


def _reached_on(source: str, arch: Arch, flag: bool) -> bool:
    """Whether `probe()` reaches `reached()` on a device of `arch`'s capability."""
    hits: list[bool] = []

    def skipif(condition, reason=""):
        return (lambda fn: (lambda: _skip(reason))) if condition else (lambda fn: fn)

    def skip_unless(condition, reason=""):
        return skipif(not condition, reason)

    def skip_if(condition, reason=""):
        if condition:
            _skip(reason)

    namespace = {
        "torch": SimpleNamespace(cuda=SimpleNamespace(get_device_capability=lambda *a: (arch.major, arch.minor))),
        "pytest": SimpleNamespace(skip=_skip, mark=SimpleNamespace(skipif=skipif)),
        "unittest": SimpleNamespace(skipUnless=skip_unless),
        "sys": SimpleNamespace(exit=lambda code=0: _skip(str(code))),
        "skip_if": skip_if,
        "use_x": flag,
        "use_y": False,
        "log": lambda *a: None,
        "reached": lambda: hits.append(True),
    }
    exec(compile(source, "<probe>", "exec"), namespace)
    try:
        namespace["probe"]()
    except (_Skipped, RuntimeError, AssertionError):
        pass
    return bool(hits)


def _snippet(shape: str, cond: str) -> str:
    cond_cap = cond.replace("major", f"{CAP}[0]").replace("minor", f"{CAP}[1]")
    return dedent(SHAPES[shape]).format(cond=cond, cond_cap=cond_cap)


def _check(shape: str, cond: str) -> None:
    source = _snippet(shape, cond)
    data = source.encode()
    gates = python_capability.gates(python_capability.PythonText(data), ast.parse(data).body, DEFAULT_ARCHS)
    assert gates, source
    free = "use_x" in cond
    ran = {a.name for a in DEFAULT_ARCHS if any(_reached_on(source, a, flag) for flag in ((True, False) if free else (True,)))}
    for gate in gates:
        assert not gate.admits.unknown, source
        assert set(gate.admits.names()) == ran, f"{gate.text} in\n{source}"


# Shapes from the issue and the real code: (shape, condition, the archs whose guarded path runs)
CASES = [
    pytest.param("skipif", "major not in [10, 11, 12]", ["sm_100", "sm_103", "sm_110", "sm_120", "sm_121"],
                 id="skipif-not-in-runs-on-the-listed-majors"),
    pytest.param("skipif", "major not in [10]", ["sm_100", "sm_103"], id="skipif-not-in-10-skips-sm121"),
    pytest.param("if-skip", "major != 9", ["sm_90"], id="skip-unless-hopper"),
    pytest.param("if-raise", "major != 12 or minor != 0", ["sm_120"], id="raise-unless-exactly-sm120"),
    pytest.param("if-return", "major < 10", ["sm_100", "sm_103", "sm_110", "sm_120", "sm_121"], id="early-return"),
    pytest.param("if-return-false", "major != 12", ["sm_120", "sm_121"], id="return-false-first"),
    pytest.param("if-exit", "major == 12 and minor == 0", [a.name for a in DEFAULT_ARCHS if a.name != "sm_120"],
                 id="sys-exit-on-sm120"),
    pytest.param("assert", "major >= 9", ["sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"], id="assert"),
    pytest.param("skip_if-helper", "major < 12", ["sm_120", "sm_121"], id="skip-if-helper"),
    pytest.param("skipUnless", "major == 12", ["sm_120", "sm_121"], id="skip-unless-decorator"),
    pytest.param("if-flag", "major < 9", ["sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"],
                 id="an-exit-reached-through-a-flag"),
    pytest.param("if-flag-truthy", "major != 12", ["sm_120", "sm_121"], id="an-exit-reached-through-a-true-flag"),
    pytest.param("if-list", "major == 9", [a.name for a in DEFAULT_ARCHS if a.name != "sm_90"],
                 id="an-exit-reached-through-a-list-round12-bug1"),
    pytest.param("if-list-after-a-loop", "major not in (8, 12)", ["sm_80", "sm_86", "sm_89", "sm_120", "sm_121"],
                 id="an-exit-after-the-loop-reached-through-a-list-sglang-0.5.15-nunchaku"),
    pytest.param("if-list-not-an-exit", "major == 12", ["sm_120", "sm_121"], id="a-list-no-later-if-exits-on"),
    pytest.param("if-flag-not-an-exit", "major == 12", ["sm_120", "sm_121"], id="a-flag-no-later-if-exits-on"),
    pytest.param("if-body", "major > 8 or (major == 8 and minor >= 9)",
                 ["sm_89", "sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"], id="body-of-a-compound-test"),
    pytest.param("if-return-true", "major == 12", ["sm_120", "sm_121"], id="return-true-is-the-path"),
    pytest.param("if-raise", "major >= 10 and use_x", [a.name for a in DEFAULT_ARCHS], id="a-free-operand-lets-it-through"),
    pytest.param("if-raise", "major < 10 and True", ["sm_100", "sm_103", "sm_110", "sm_120", "sm_121"],
                 id="a-constant-operand-is-its-value"),
]


@pytest.mark.parametrize("shape, cond, runs", CASES)
def test_a_gate_reports_what_its_path_admits(shape, cond, runs):
    source = _snippet(shape, cond).encode()
    gates = python_capability.gates(python_capability.PythonText(source), ast.parse(source).body, DEFAULT_ARCHS)
    assert gates and {tuple(g.admits.names()) for g in gates} == {tuple(runs)}
    _check(shape, cond)


def test_before_the_polarity_reader_skipif_reported_where_its_condition_holds():
    """Issue 18: `skipif(cap[0] not in [10, 11, 12])` was reported as admitting sm_80...sm_90 (the condition's
    truth set) and so excluding sm_121; the path it guards runs on 10, 11 and 12."""
    source = _snippet("skipif", "major not in [10, 11, 12]").encode()
    [gate] = python_capability.gates(python_capability.PythonText(source), ast.parse(source).body, DEFAULT_ARCHS)
    truth = [a.name for a in DEFAULT_ARCHS if a.major not in (10, 11, 12)]
    assert truth == ["sm_80", "sm_86", "sm_89", "sm_90"]  # before
    assert gate.admits.names() == ["sm_100", "sm_103", "sm_110", "sm_120", "sm_121"] and gate.detail["runs_where"] == "false"


def test_a_recipe_still_reads_a_negated_comparison_as_a_check_for_its_values():
    source = _snippet("if-body", "major != 9").encode()
    [gate] = python_capability.find(source, DEFAULT_ARCHS)
    assert gate.admits.names() == ["sm_90"]  # `if cap != 9: fallback()`: run's view, unchanged


_SIDE = st.sampled_from(["major", "minor"])
_OP = st.sampled_from(["==", "!=", "<", ">=", "in", "not in"])


@st.composite
def _conditions(draw) -> str:
    def one() -> str:
        side, op = draw(_SIDE), draw(_OP)
        values = draw(st.lists(st.sampled_from([0, 1, 3, 8, 9, 10, 11, 12]), min_size=1, max_size=3, unique=True))
        value = f"{values}" if "in" in op else str(values[0])
        return f"{side} {op} {value}"

    cond = one()
    for _ in range(draw(st.integers(0, 2))):
        joint = draw(st.sampled_from(["and", "or"]))
        other = draw(st.sampled_from(["cmp", "cmp", "not", "free"]))
        operand = one() if other == "cmp" else f"not ({one()})" if other == "not" else "use_x"
        cond = f"({cond}) {joint} {operand}"
    return cond


@settings(max_examples=150, deadline=None)
@given(shape=st.sampled_from(sorted(SHAPES)), cond=_conditions())
def test_no_gate_is_reported_reversed(shape, cond):
    if shape in ("skipif", "skipUnless") and "use_x" in cond:
        cond = cond.replace("use_x", "True")  # a decorator is run once, at import
    _check(shape, cond)



@pytest.mark.parametrize(
    "line, use",
    [
        ('backend = "trtllm-gen" if cap[0] == 10 else "xqa"', ("choice", "'xqa'")),
        ("kernel = gen() if cap[0] == 10 else None", None),  # a value: checked below
        ("is_sm120 = cap[0] == 12 and cap[1] == 0", ("value", "what uses `is_sm120` decides")),
        ("run(a, use_tma=cap[0] >= 9)", ("value", "what `run` does with it decides")),
        ("if cap[0] >= 9:\n                use_tma()", None),
        ("assert cap[0] >= 9", None),
        ('pytest.mark.skipif(cap[0] < 9, reason="needs SM90")', None),
    ],
)
def test_a_test_that_guards_no_code_path_says_what_decides_instead(line, use):
    """Issue 18 item 2: `use` tells a choice between two values or a value stored/passed from a guard."""
    tree = ast.parse(dedent(f"""\
        def f(a):
            cap = torch.cuda.get_device_capability()
            {line}
        """))
    up = polarity.parents([tree])
    compare = next(n for n in ast.walk(tree) if isinstance(n, ast.Compare))
    test, _ = polarity.need(compare, up)
    got = polarity.use(test, up)
    if "else None" in line:
        assert got is not None and got[0] == "value" and "picks `None` elsewhere" in got[1]
    else:
        assert got == use


def test_a_predicate_return_guards_a_path_another_return_is_a_value():
    tree = ast.parse(dedent("""\
        def _supports_tma(cap):
            return cap[0] >= 9

        def _tile(cap):
            if cap[0] == 12:
                return (128, 64)
            return cap[0] >= 9
        """))
    up = polarity.parents([tree])
    uses = [polarity.use(polarity.need(n, up)[0], up) for n in ast.walk(tree) if isinstance(n, ast.Compare)]
    assert uses == [None, None, ("value", "what the callers of `_tile` do with it decides")]
