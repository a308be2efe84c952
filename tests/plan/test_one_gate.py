"""One gate per selector (issue 38 item 1), and the branch rule in `run` (item 2), on the dispatch shape that went
wrong silently: a `raise` guard the recipe is for, an `if major == 10:` arm dispatching to the SM100 kernel with
`elif major == 12:` and `elif major == 9:` arms after it, and a dtype choice, all in one function and all
admitting sm_100."""

from __future__ import annotations

import json
import textwrap

import pytest

from conftest import git

FILE = "flashinfer/fmha_dispatch.py"
SOURCE = textwrap.dedent(
    """\
    import torch

    from .jit import gen_fmha_sm90_module, gen_fmha_sm100_module, gen_fmha_sm120_module
    from .utils import get_compute_capability


    def fmha_varlen(q, k, v, scale=None):
        major, minor = get_compute_capability(q.device)
        if major not in [9, 10]:
            raise ValueError(f"fmha_varlen is not supported on SM{major}{minor}")
        if major == 10:
            module = gen_fmha_sm100_module().build_and_load()
        elif major == 12:
            module = gen_fmha_sm120_module().build_and_load()
        elif major == 9:
            module = gen_fmha_sm90_module().build_and_load()
        out_dtype = torch.float8_e4m3fn if major == 10 else torch.bfloat16
        return module.run(q, k, v, scale, out_dtype)
    """
)
RAISE, DISPATCH, ELIF_12, DTYPE = 9, 11, 13, 17


def recipe(tmp_path, extra: str = "", admits: str = '["sm_100"]') -> str:
    path = tmp_path / "fmha-sm120.toml"
    path.write_text(
        textwrap.dedent(
            f"""\
            id = "fmha-sm120"
            summary = "fmha_varlen on SM120"
            arch = "sm_120"

            [[change]]
            id = "flashinfer.fmha-varlen-guard"
            project = "flashinfer"
            file = "{{python}}/fmha_dispatch.py"
            kind = "python_capability"
            function = "fmha_varlen"
            admits = {admits}
            """
        )
        + extra
    )
    return str(path)


@pytest.fixture
def repo(example_repo):
    root = example_repo("flashinfer")
    (root / FILE).write_text(SOURCE)
    git(root, "add", FILE)
    git(root, "commit", "-qm", "fmha dispatch")
    return root


def test_a_selector_matching_several_gates_lists_each_and_writes_nothing(cli, repo, tmp_path):
    result = cli("run", recipe(tmp_path), "--repo", repo)
    assert result.exit_code == 3, result.output
    assert "error[ambiguous-selector]" in result.stderr
    lines = SOURCE.splitlines()
    for line in (RAISE, DISPATCH, DTYPE):
        assert f"{FILE}:{line}: `{lines[line - 1].strip().removeprefix('if ').split(' if ')[-1].rstrip(':').split(' else')[0]}" in result.stderr
    assert f'{FILE}:{RAISE}: `major not in [9, 10]` (pick it with body = "raise"' in result.stderr
    assert f'{FILE}:{DTYPE}: `major == 10` (pick it with assigns = "out_dtype"' in result.stderr
    assert "nth = 2" in result.stderr and "all = true" in result.stderr
    assert (repo / FILE).read_text() == SOURCE, "nothing written"
    assert git(repo, "branch", "--list", "codemod/*") == ""


def test_body_raise_widens_only_the_raise_guard(cli, repo, tmp_path):
    result = cli("run", recipe(tmp_path, 'body = "raise"\n'), "--repo", repo)
    assert result.exit_code == 0, result.output
    after = (repo / FILE).read_text()
    assert after == SOURCE.replace("if major not in [9, 10]:", "if major not in [9, 10, 12]:")
    again = cli("run", recipe(tmp_path, 'body = "raise"\n'), "--repo", repo, "--dry-run")
    assert again.exit_code == 0 and "unchanged" in again.output


def test_admits_that_tells_them_apart_widens_only_the_raise_guard(cli, repo, tmp_path):
    result = cli("run", recipe(tmp_path, admits='["sm_90", "sm_100"]'), "--repo", repo, "--dry-run")
    assert result.exit_code == 0, result.output
    assert f"{FILE}:{RAISE}" in result.output and f"{FILE}:{DISPATCH}" not in result.output


def test_nth_picks_the_nth_match_in_source_order(cli, repo, tmp_path):
    result = cli("run", recipe(tmp_path, "nth = 3\n"), "--repo", repo)
    assert result.exit_code == 0, result.output
    after = (repo / FILE).read_text()
    assert after == SOURCE.replace("torch.float8_e4m3fn if major == 10 else", "torch.float8_e4m3fn if major in [10, 12] else")


def test_the_branch_rule_refuses_widening_an_arm_a_later_arm_handles(cli, repo, tmp_path):
    result = cli("run", recipe(tmp_path, "nth = 2\n"), "--repo", repo)
    assert result.exit_code == 3, result.output
    assert "error[needs-human]" in result.stderr
    assert f"{FILE}:{DISPATCH}: cannot widen `major == 10`" in result.stderr
    assert f"`elif major == 12:` ({FILE}:{ELIF_12}) handles sm_120 today" in result.stderr
    assert (repo / FILE).read_text() == SOURCE


def test_all_true_widens_every_match_the_branch_rule_allows(cli, repo, tmp_path):
    result = cli("run", recipe(tmp_path, "all = true\n"), "--repo", repo, "--dry-run")
    assert result.exit_code == 3, result.output
    assert "error[needs-human]" in result.stderr, "all = true does not lift the branch rule"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param('body = "exit"\n', "body must be one of 'raise', 'return', 'skip'", id="body-unknown"),
        pytest.param("nth = 0\n", "nth must be a whole number from 1", id="nth-zero"),
        pytest.param('all = "yes"\n', "all must be true or false", id="all-not-bool"),
    ],
)
def test_bad_picks_are_refused_with_the_line(cli, repo, tmp_path, extra, message):
    result = cli("run", recipe(tmp_path, extra), "--repo", repo, "--dry-run")
    assert result.exit_code == 8, result.output
    assert message in result.stderr and "fmha-sm120.toml:12" in result.stderr


def test_scan_puts_the_arm_in_needs_human_by_the_same_rule(cli, repo):
    """The rule `run` refuses the arm with decides scan's group, with the same sentence (one implementation)."""
    result = cli("scan", "--repo", repo, "--arch", "sm_120", "--format", "json")
    assert result.exit_code == 0, result.output
    records = {g["line"]: g for g in json.loads(result.stdout)["gates"] if g["file"] == FILE}
    assert records[DISPATCH]["classification"] == "needs-human"
    assert records[DISPATCH]["reason"].startswith(f"`elif major == 12:` ({FILE}:{ELIF_12}) handles sm_120 today")
    assert records[RAISE]["classification"] != "needs-human", "the raise guard is admission, not dispatch"


BODIES = textwrap.dedent(
    """\
    import pytest


    def check(q):
        major, minor = torch.cuda.get_device_capability(q.device)
        if major < 9:
            raise RuntimeError("needs SM90 or later")
        if major == 11:
            return None
        if major == 12:
            pytest.skip("not on SM12x yet")
        if major == 10:
            use_tma(q)
        return run(q)
    """
)


@pytest.mark.parametrize(
    ("body", "line"),
    [
        pytest.param("raise", 6, id="raise"),
        pytest.param("return", 8, id="return"),
        pytest.param("skip", 10, id="skip-call"),
    ],
)
def test_body_picks_the_gate_by_how_the_code_it_decides_ends(body, line):
    from codemods.core.arch import DEFAULT_ARCHS
    from codemods.gates.base import Where
    from codemods.gates.registry import KINDS
    from codemods.plan import picks

    source = BODIES.encode()
    found = KINDS["python_capability"].find(source, DEFAULT_ARCHS, Where("check.py"), {"function": "check"})
    assert [g.line for g in found] == [6, 8, 10, 12]
    assert [g.line for g in picks.pick(source, found, {"body": body})] == [line]
    assert [g.line for g in picks.pick(source, found, {"nth": 4})] == [12]
    assert picks.pick(source, found, {"nth": 5}) == []


ARMS = """\
def pick(q):
    major, minor = torch.cuda.get_device_capability(q.device)
    if major == 10:
        return sm100(q)
    {later}
"""


@pytest.mark.parametrize(
    ("later", "handled"),
    [
        pytest.param("elif major == 12:\n        return sm120(q)", True, id="elif-takes-it"),
        pytest.param("elif major >= 12:\n        return sm120(q)", True, id="elif-bound-takes-it"),
        pytest.param("elif major == 9:\n        return sm90(q)\n    elif major == 12:\n        return sm120(q)", True, id="second-elif"),
        pytest.param("elif major == 12:\n        raise NotImplementedError('SM120')", False, id="elif-refuses-it"),
        pytest.param("else:\n        return generic(q)", False, id="else-not-counted"),
        pytest.param("elif major == 9:\n        return sm90(q)", False, id="elif-for-another-arch"),
        pytest.param("elif major != 9:\n        return other(q)", False, id="negated-not-counted"),
    ],
)
def test_the_branch_rule_counts_a_later_arm_written_for_the_arch(later, handled):
    from codemods.core.arch import DEFAULT_ARCHS, Arch
    from codemods.gates.base import Where
    from codemods.gates.registry import KINDS
    from codemods.plan import dispatch

    source = ARMS.format(later=later).encode()
    gates = KINDS["python_capability"].find(source, DEFAULT_ARCHS, Where("pick.py"), {"function": "pick"})
    (arm_10,) = [g for g in gates if g.line == 3]
    arm = dispatch.later_arm(source, arm_10, (Arch.parse_target("sm_120"),), gates)
    assert (arm is not None) == handled
    if arm is not None:
        assert arm.text.startswith("elif major") and "12" in arm.text


VALUES = textwrap.dedent(
    """\
    from sglang.srt.utils import is_sm90_supported, is_sm100_supported, is_sm120_supported


    class ServerArgs:
        def __post_init__(self):
            self.enable_fusion = (is_sm90_supported() or is_sm100_supported()) and self.tp_size > 1
            self.use_cutlass = is_sm90_supported() or is_sm100_supported()
    """
)
GENERATOR = textwrap.dedent(
    """\
    def generate_operations(has_arch):
        operations = []
        operations += generate_sm100_operations(has_arch(100))
        grouped = generate_grouped_operations(has_arch(100))
        return operations + grouped
    """
)


def _planned(kind: str, file: str, source: str, selector: dict, archs: str = "sm_120,sm_121"):
    from codemods.core.arch import DEFAULT_ARCHS, parse_archs
    from codemods.gates.registry import KINDS
    from codemods.plan.changes import PlannedChange
    from codemods.plan.widen import plan_change
    from codemods.recipes.model import Change

    change = Change(id="c", project="sglang", file=file, kind=kind, title="", why="", selector=selector)
    pc = PlannedChange(change, file, before=source.encode(), selector=selector)
    plan_change(pc, KINDS[kind], DEFAULT_ARCHS, parse_archs(archs), None, None)
    return pc


@pytest.mark.parametrize(
    ("kind", "file", "source", "function", "offers"),
    [
        pytest.param("python_arch_or", "server_args.py", VALUES, "__post_init__",
                     {6: 'assigns = "self.enable_fusion"', 7: 'assigns = "self.use_cutlass"'}, id="arch-or-values"),
        pytest.param("python_arch_call", "generator.py", GENERATOR, "generate_operations",
                     {3: 'assigns = "operations"', 4: 'assigns = "grouped"'}, id="arch-call-augmented-and-plain"),
    ],
)  # fmt: skip
def test_the_multi_match_error_offers_assigns_for_values(kind, file, source, function, offers):
    pc = _planned(kind, file, source, {"function": function})
    assert pc.outcome == "failed" and pc.failure == "ambiguous", pc.reason
    for line, offer in offers.items():
        assert f"{file}:{line}: " in pc.reason and f"(pick it with {offer} or nth = " in pc.reason, pc.reason
    line, offer = next(iter(offers.items()))
    picked = _planned(kind, file, source, {"function": function, offer.split(" = ")[0]: offer.split('"')[1]})
    assert picked.outcome == "changed", picked.reason
    assert [g.gate.line for g in picked.gates] == [line]


def test_the_multi_match_error_offers_call_for_lists():
    source = textwrap.dedent(
        """\
        def gen_modules():
            a = gen_gemm_module(supported_major_versions=[10])
            b = build(make_spec(supported_major_versions=[10]))
            return a, b
        """
    )
    pc = _planned("python_arch_list", "jit.py", source, {"function": "gen_modules", "keyword": "supported_major_versions"})
    assert pc.failure == "ambiguous", pc.reason
    assert 'jit.py:3: `[10]` (pick it with assigns = "b" or call = "make_spec" or nth = 2)' in pc.reason, pc.reason
