"""Capability locals (issue 38 item 3): a local bound to a capability expression is read as that expression by
`scan` and `run` alike (one reading: gates/python/capability/locals.py), with no `names` entry in the recipe.
Shapes of FlashInfer (`_arch_major = ...[0]` before a `raise`) and SGLang (`major, minor = ...`, `sm = major * 10 +
minor`); a local assigned something else between its binding and the gate, or bound from another call, is not."""

from __future__ import annotations

import json
import textwrap

import pytest

from conftest import git

FILE = "flashinfer/attention_locals.py"
SOURCE = textwrap.dedent(
    """\
    import torch

    from .utils import get_compute_capability


    def trtllm_attention(q, kv):
        _arch_major = torch.cuda.get_device_capability(q.device)[0]
        if _arch_major < 9:
            raise RuntimeError("trtllm attention needs SM90 or later")
        return _run(q, kv)


    def fp4_gemm(a, b):
        major, minor = torch.cuda.get_device_capability(a.device)
        if major == 10 and minor == 0:
            return _sm100_gemm(a, b)
        return _fallback(a, b)


    def mla_decode(q):
        cap = get_compute_capability(q.device)
        if cap[0] == 10:
            return _sm100_mla(q)
        return _generic_mla(q)


    def moe_route(x):
        major, minor = torch.cuda.get_device_capability()
        sm = major * 10 + minor
        if sm != 100:
            raise ValueError(f"moe_route needs SM100, got SM{sm}")
        return _route(x)


    def rebound(x):
        major = torch.cuda.get_device_capability()[0]
        major = x.shape[0]
        if major == 10:
            return _sm100(x)
        return _other(x)


    def other_call(x):
        major = x.get_major_version()
        if major == 10:
            return _sm100(x)
        return _other(x)
    """
)
def _line(text: str) -> int:
    return next(n for n, line in enumerate(SOURCE.splitlines(), 1) if line.strip() == text)


LINES = {
    "trtllm_attention": _line("if _arch_major < 9:"), "fp4_gemm": _line("if major == 10 and minor == 0:"),
    "mla_decode": _line("if cap[0] == 10:"), "moe_route": _line("if sm != 100:"), "rebound": _line("if major == 10:"),
}  # fmt: skip
WIDENED = {
    "trtllm_attention": ("if _arch_major < 9:", "if _arch_major < 9:"),  # admits sm_120 already: no edit
    "fp4_gemm": ("if major == 10 and minor == 0:", "if (major == 10 and minor == 0) or (major == 12 and minor in [0, 1]):"),
    "mla_decode": ("if cap[0] == 10:", "if cap[0] in [10, 12]:"),  # the example project writes lists
    "moe_route": ("if sm != 100:", "if sm not in [100, 120, 121]:"),  # sm tells sm_121 apart
}


@pytest.fixture
def repo(example_repo):
    root = example_repo("flashinfer")
    (root / FILE).write_text(SOURCE)
    git(root, "add", FILE)
    git(root, "commit", "-qm", "capability locals")
    return root


def recipe(tmp_path, function: str) -> str:
    path = tmp_path / f"{function}.toml"
    path.write_text(
        textwrap.dedent(
            f"""\
            id = "{function.replace("_", "-")}-sm120"
            summary = "{function} on SM120"
            arch = "sm_120"

            [[change]]
            id = "flashinfer.{function.replace("_", "-")}"
            project = "flashinfer"
            file = "{{python}}/attention_locals.py"
            kind = "python_capability"
            function = "{function}"
            """
        )
    )
    return str(path)


def test_find_reads_each_local_as_the_capability_it_holds():
    from codemods.core.arch import DEFAULT_ARCHS
    from codemods.gates.python import python_capability

    source = SOURCE.encode()
    found = {g.context: g for g in python_capability.find(source, DEFAULT_ARCHS)}
    assert {name: g.line for name, g in found.items()} == LINES
    assert {name for name, g in found.items() if "unknown" in g.detail} == {"rebound"}
    assert "`major` is also assigned something other than the capability" in found["rebound"].detail["unknown"]
    assert "other_call" not in found, "a local from another call holds no capability"


@pytest.mark.parametrize("function", ["fp4_gemm", "mla_decode", "moe_route"])
def test_run_widens_a_gate_on_a_local_with_a_recipe_naming_only_file_and_function(cli, repo, tmp_path, function):
    before, after = WIDENED[function]
    result = cli("run", recipe(tmp_path, function), "--repo", repo)
    assert result.exit_code == 0, result.output + result.stderr
    assert (repo / FILE).read_text() == SOURCE.replace(before, after)
    again = cli("run", recipe(tmp_path, function), "--repo", repo, "--dry-run")
    assert again.exit_code == 0 and "unchanged" in again.output


def test_a_raise_guard_on_a_local_already_admitting_the_arch_is_unchanged(cli, repo, tmp_path):
    result = cli("run", recipe(tmp_path, "trtllm_attention"), "--repo", repo, "--dry-run")
    assert result.exit_code == 0, result.output + result.stderr
    assert "already admits sm_120, sm_121; nothing to do" in result.output
    assert (repo / FILE).read_text() == SOURCE


def test_a_local_assigned_again_before_the_gate_is_left_alone(cli, repo, tmp_path):
    result = cli("run", recipe(tmp_path, "rebound"), "--repo", repo)
    assert result.exit_code != 0, result.output
    assert "`major` is also assigned something other than the capability" in result.stderr
    assert (repo / FILE).read_text() == SOURCE
    assert git(repo, "branch", "--list", "codemod/*") == ""


def test_a_local_from_another_call_is_no_gate(cli, repo, tmp_path):
    result = cli("run", recipe(tmp_path, "other_call"), "--repo", repo, "--dry-run")
    assert result.exit_code != 0, result.output
    assert (repo / FILE).read_text() == SOURCE


def test_scan_lists_each_gate_on_a_local_with_what_it_admits(cli, repo):
    result = cli("scan", "--repo", repo, "--arch", "sm_120", "--format", "json", "--verbose")
    assert result.exit_code == 0, result.output
    records = {g["line"]: g for g in json.loads(result.stdout)["gates"] if g["file"] == FILE}
    by = {name: records.get(line) for name, line in LINES.items()}
    # scan lists no comparison it cannot read (as `== SM_VERSION`): the rebound local is not called widenable
    assert sorted(records) == sorted(line for name, line in LINES.items() if name != "rebound"), records
    assert by["trtllm_attention"]["admits"] == ["sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"]
    assert by["trtllm_attention"]["excludes_arch"] is False
    assert by["mla_decode"]["admits"] == ["sm_100", "sm_103"] and by["mla_decode"]["unknown"] == []
    assert by["moe_route"]["admits"] == ["sm_100"] and by["moe_route"]["unknown"] == []
    assert by["fp4_gemm"]["admits"] == ["sm_100"] and by["fp4_gemm"]["unknown"] == []


@pytest.mark.parametrize(
    ("source", "unknown"),
    [
        pytest.param(
            "def f(q):\n    cap = torch.cuda.get_device_capability(q.device)\n    _arch_major = cap[0]\n"
            "    if _arch_major < 9:\n        raise RuntimeError('needs SM90')\n", None, id="major-of-a-local-pair",
        ),
        pytest.param(
            "def f(q):\n    if q.is_cuda:\n        major = torch.cuda.get_device_capability(q.device)[0]\n    else:\n"
            "        major = torch.cuda.get_device_capability()[0]\n    if major < 9:\n        raise RuntimeError('x')\n",
            None, id="bound-the-same-in-both-branches",
        ),
        pytest.param(
            "def f(q):\n    major, minor = torch.cuda.get_device_capability(q.device)\n    for major in range(3):\n"
            "        pass\n    if major < 9:\n        raise RuntimeError('x')\n", "`major` is also assigned", id="loop-variable",
        ),
    ],
)
def test_a_local_is_read_only_when_every_assignment_binds_the_capability(source, unknown):
    from codemods.core.arch import DEFAULT_ARCHS
    from codemods.gates.python import python_capability

    [gate] = python_capability.find(source.encode(), DEFAULT_ARCHS, function="f")
    assert gate.text.endswith("< 9")
    if unknown is None:
        assert "unknown" not in gate.detail and gate.admits.admits(DEFAULT_ARCHS[-1])
    else:
        assert unknown in gate.detail["unknown"]
