"""gates/python/layout/wrap: the line breaks it puts in an `if`/`elif`/`while` test grown too long are ruff format's (black's).

Each case is a test line of the shapes widening makes (comparisons with a collection, predicates called with
arguments, negations, `and`/`or` mixed), too long for 88 columns; where `_black_cuts` splits it, the split
must be exactly what `ruff format` writes for the same function. Where it declines ([]), the line is left as
it was, which the kinds report (a long line, never a wrong layout).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from textwrap import indent

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from codemods.gates.python.layout.wrap import _black_cuts

OPERANDS = [
    "sf.dtype == torch.float",
    "gran == (1, 128)",
    'get_device_arch() in ("100a", "103a")',
    'get_device_arch() in ("100a", "103a", "110a", "120a", "121a")',
    'is_sm100a_supported(torch.device("cuda"))',
    'is_sm110a_supported(torch.device("cuda"))',
    "torch.cuda.get_device_capability()[0] not in [9, 10, 12]",
    "use_fp8",
    "not use_tma",
    "backend == \"cutlass\"",
    "major >= 10",
    'arch in ["sm_90a", "sm_100a", "sm_103a", "sm_110a", "sm_120a", "sm_121a"]',
    "(is_sm100a_supported(d) or is_sm110a_supported(d))",
]


def _apply(line: str, cuts: list[tuple[int, int, str]]) -> str:
    out, at = "", 0
    for start, end, text in cuts:
        out += line[at:start] + text
        at = end
    return out + line[at:]


def _ruff(source: str) -> str:
    done = subprocess.run([sys.executable, "-m", "ruff", "format", "--isolated", "-"], input=source.encode(), capture_output=True, check=True)
    return done.stdout.decode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    keyword=st.sampled_from(["if", "elif", "while"]),
    operands=st.lists(st.sampled_from(OPERANDS), min_size=1, max_size=5),
    joins=st.lists(st.sampled_from(["and", "or"]), min_size=4, max_size=4),
    negated=st.booleans(),
    depth=st.integers(0, 2),
)
def test_a_split_is_what_ruff_format_writes(keyword, operands, joins, negated, depth):
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff (the test extra) is not installed")
    condition = operands[0]
    for join, operand in zip(joins, operands[1:]):
        condition += f" {join} {operand}"
    if negated:
        condition = f"not ({condition})"
    line = "    " * (depth + 1) + f"{keyword} {condition}:"
    assume(len(line) > 88)
    cuts = _black_cuts(line, 88, "\n")
    assume(cuts)
    head = "if x:\n    pass\n" if keyword == "elif" else ""  # an `elif` follows an `if`
    test = line.strip()

    def function(block: str) -> str:  # the block at `depth` levels of `if True:` inside a function
        for _ in range(depth):
            block = "if True:\n" + indent(block, "    ")
        return "def f():\n" + indent(block, "    ")

    source = function(f"{head}{test}\n    pass\n")
    assert "\n" + line + "\n" in source  # the test line sits at its own indent
    got = source.replace("\n" + line + "\n", "\n" + _apply(line, cuts) + "\n")
    expected = _ruff(source)
    assert got == expected


@pytest.mark.parametrize(
    "line, lines",
    [
        pytest.param(
            '    if sf.dtype == torch.float and gran == (1, 128) and get_device_arch() in ("100a", "103a"):',
            ["    if (", "        sf.dtype == torch.float", "        and gran == (1, 128)",
             '        and get_device_arch() in ("100a", "103a")', "    ):"],
            id="several-ands-go-in-parentheses-flashinfer-4d4e8c057",
        ),
        pytest.param(
            '    if sf.dtype == torch.float and get_device_arch() in ("100a", "103a", "110a", "120a", "121a"):',
            ['    if sf.dtype == torch.float and get_device_arch() in (', '        "100a",', '        "103a",',
             '        "110a",', '        "120a",', '        "121a",', "    ):"],
            id="one-and-a-collection-last-is-exploded",
        ),
        pytest.param(
            '    if not is_sm100a_supported(torch.device("cuda")) and not is_sm110a_supported(torch.device("cuda")):',
            ['    if not is_sm100a_supported(torch.device("cuda")) and not is_sm110a_supported(',
             '        torch.device("cuda")', "    ):"],
            id="one-and-a-call-of-one-argument-last-splits-there-flashinfer-beebc6074",
        ),
    ],
)  # fmt: skip
def test_black_splits(line, lines):
    assert _apply(line, _black_cuts(line, 88, "\n")).split("\n") == lines


@pytest.mark.parametrize(
    "line",
    [
        "    if a_long_condition_name_here and another_long_condition if flag else other_value_that_is_long:",
        "    if first_condition_that_is_long and second_condition_long or third_condition:  # a comment here",
    ],
)
def test_shapes_black_splits_otherwise_are_left(line):
    assert _black_cuts(line, 88, "\n") == []


SKIP_TRANSFORM = """\
def transform_sf_into_required_layout(sf, gran):
    should_skip_transform = (
        {first}
    ) or ({second})
    return should_skip_transform
"""


@pytest.mark.parametrize(
    "first, second",
    [
        pytest.param('sf.dtype == torch.int and gran == (1, 128) and get_device_arch() in ("100a", "103a")',
                     'sf.dtype == torch.int and gran == (128, 128) and get_device_arch() in ("100a", "103a")',
                     id="both-groups-grown-flashinfer-4d4e8c057"),
        pytest.param('sf.dtype == torch.int and gran == (1, 128) and get_device_arch() in ("100a", "103a", "110a")',
                     "sf.dtype == torch.int and gran == (128, 128)", id="the-first-group-alone-too-long"),
    ],
)  # fmt: skip
def test_a_value_of_two_groups_splits_as_ruff_format_writes(first, second):
    """`x = (` / a group's body / `) or (other group)`: the body line (all its brackets hold) is split before each
    `and`/`or`; the last line, `) or (...)`, as `) or (` / the body one level deeper / `)`."""
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff (the test extra) is not installed")
    source = SKIP_TRANSFORM.format(first=first, second=second)
    lines = source.split("\n")
    out = []
    for number, line in enumerate(lines):
        if len(line) > 88:
            enclosed = lines[number - 1].rstrip().endswith("(") and lines[number + 1].lstrip().startswith(")")
            cuts = _black_cuts(line, 88, "\n", enclosed)
            assert cuts, line
            line = _apply(line, cuts)
        out.append(line)
    assert "\n".join(out) == _ruff(source)


@given(
    st.lists(st.sampled_from(["get_platform().is_sm100", "get_platform().is_sm90", "is_sm120_supported()", "use_fa4",
                              "not disabled", "server_args.enable_fa4_attention_backend_for_inkling"]),
             min_size=1, max_size=6),
    st.sampled_from(["inkling_attn_backend", "self.backend", "x"]),
    st.sampled_from(['"fa4"', "pick_the_fastest_backend(server_args)"]),
    st.integers(min_value=0, max_value=2),
)
def test_an_assigned_conditional_expression_splits_as_ruff_format_writes(operands, target, chosen, depth):
    """`name = a if P or Q else b` past the limit: `name = (` / the value one level deeper / `)`, and still too long
    there, a line before its `if`, each `or` and `else` (SGLang 0.5.21's inkling.py, widened); what ruff writes."""
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff (the test extra) is not installed")
    indent = "    " * (depth + 1)
    line = f"{indent}{target} = {chosen} if {' or '.join(operands)} else \"triton\""
    line = line.replace(" or not ", " and not ")  # `and` beside `or`: one priority to black
    source = "".join(f"{'    ' * d}def f{d}():\n" for d in range(depth + 1)) + line + "\n"
    cuts = _black_cuts(line, 88, "\n")
    if len(line) <= 88:
        return
    expected = _ruff(source)
    if cuts:
        assert source.replace(line, _apply(line, cuts)) == expected
    else:  # declined: only where ruff splits some other way
        assert expected != source
