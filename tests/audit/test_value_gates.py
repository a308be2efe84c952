"""Scan lists value gates (issue 38 item 1): a predicate, an `or` of them or a capability comparison stored in a
name is reported as a value, with the `assigns` that selects it, and `run` given that file, function and
`assigns` widens exactly that gate: scan and run agree."""

from __future__ import annotations

import re
import textwrap

import pytest

from codemods.audit.python_files import analyse_python
from codemods.audit.records import Context
from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates.registry import KINDS
from codemods.plan.changes import PlannedChange
from codemods.plan.widen import plan_change
from codemods.recipes.model import Change

FLASHINFER = (
    "flashinfer/gemm/fp4_plan.py",
    "flashinfer",
    textwrap.dedent(
        """\
        import torch

        from ..utils import get_compute_capability, is_sm100a_supported, is_sm120a_supported


        def plan_fp4_gemm(device, use_tma):
            use_cutlass = is_sm120a_supported(device)
            use_trtllm: bool = is_sm100a_supported(device) and use_tma
            major, minor = get_compute_capability(device)
            is_blackwell = major == 10
            return use_cutlass, use_trtllm, is_blackwell
        """
    ),
)
SGLANG = (
    "sglang/srt/server_args_fusion.py",
    "sglang",
    textwrap.dedent(
        """\
        from sglang.srt.utils import is_sm90_supported, is_sm100_supported, is_sm120_supported

        _is_sm100_supported = is_sm100_supported()


        class ServerArgs:
            def __post_init__(self):
                self.enable_fusion = (is_sm90_supported() or is_sm100_supported()) and self.tp_size > 1
                self.use_cutlass_moe = is_sm100_supported()
        """
    ),
)


def _scan(file: str, project: str, source: str, arch: Arch) -> list[dict]:
    from codemods.plan.widen import meanings_for
    from codemods.recipes.load import projects

    meanings = meanings_for(projects()[project], file, source.encode())
    context = Context(
        root="", arch=arch, universe=DEFAULT_ARCHS, jit=None, layout=False, include_all=True, hazards=True,
        cache=None, key="", meanings=meanings,
    )  # fmt: skip
    return analyse_python(file, source.encode(), context, False).gates


def _run(file: str, project: str, source: str, record: dict, selector: dict, archs: tuple[Arch, ...]) -> PlannedChange:
    change = Change(id="c", project=project, file=file, kind=record["kind"], title="", why="", selector=selector)
    pc = PlannedChange(change, file, before=source.encode(), selector=selector)
    plan_change(pc, KINDS[record["kind"]], DEFAULT_ARCHS, archs, None, None)
    return pc


@pytest.mark.parametrize(
    ("case", "arch", "expected", "family"),
    [
        pytest.param(FLASHINFER, "sm_121", {7: "use_cutlass", 8: "use_trtllm", 10: "is_blackwell"}, "",
                     id="flashinfer-sm121"),
        pytest.param(FLASHINFER, "sm_120", {8: "use_trtllm", 10: "is_blackwell"}, "", id="flashinfer-sm120"),
        # SGLang's predicates admit a whole major: a recipe admits the family (`admit = "family"`)
        pytest.param(SGLANG, "sm_120", {8: "self.enable_fusion", 9: "self.use_cutlass_moe"}, "sm_121",
                     id="sglang-sm120"),
    ],
)  # fmt: skip
def test_scan_lists_each_value_with_the_assigns_that_selects_it_and_run_widens_it(case, arch, expected, family):
    file, project, source = case
    target = Arch.parse_target(arch)
    targets = (target, *([Arch.parse_target(family)] if family else []))
    records = {r["line"]: r for r in _scan(file, project, source, target) if r["excludes_arch"]}
    assert sorted(records) == sorted(expected), records
    for line, name in expected.items():
        record = records[line]
        assert record["classification"] == "unknown", record
        assert record["reason"] == (
            f'a value, not a guard: what uses `{name}` decides; a change selects it with assigns = "{name}"'
        )
        selector = {"function": record["symbol"], "assigns": name}
        pc = _run(file, project, source, record, selector, targets)
        assert pc.outcome == "changed", pc.reason
        ((gate,),) = [[g for g in pc.gates if g.outcome == "changed"]]
        assert gate.gate.line == line and gate.admits_after is not None and gate.admits_after.admits(target)
        assert pc.after.decode().count(f"{name} = ") + pc.after.decode().count(f"{name}: bool = ") == 1


def test_a_module_flag_spelled_like_a_predicate_is_no_value_gate():
    """`_is_sm100_supported = is_sm100_supported()` defines a predicate (read by its callers), not a value."""
    file, project, source = SGLANG
    lines = [r["line"] for r in _scan(file, project, source, Arch.parse_target("sm_120"))]
    assert 3 not in lines


def test_run_without_assigns_does_not_pick_a_stored_predicate():
    """A predicate stored in a value is a gate of python_arch_test only where `assigns` names its target."""
    file, project, source = FLASHINFER
    change = Change(id="c", project=project, file=file, kind="python_arch_test", title="", why="",
                    selector={"function": "plan_fp4_gemm"})  # fmt: skip
    pc = PlannedChange(change, file, before=source.encode(), selector=change.selector)
    plan_change(pc, KINDS["python_arch_test"], DEFAULT_ARCHS, (Arch.parse_target("sm_121"),), None, None)
    assert pc.outcome == "failed" and pc.missed and re.search(r"not found in", pc.reason), pc.reason


def test_a_gate_runs_widen_refuses_is_a_blocker_with_runs_reason():
    """Scan asks run's own widen before it calls a gate widenable: SGLang 0.5.23's `if _is_sm103:` names a module
    flag no sibling of which admits sm_110, so run refuses it, and scan says so with run's reason. (For sm_120 the
    gate is other-arch first: it selects code of another kind of arch, review, not widen.)"""
    source = textwrap.dedent(
        """\
        import torch

        from sglang.srt.utils import get_device_sm, is_cuda

        _is_sm103 = is_cuda() and get_device_sm() == 103


        def fused_sigmoid_gating(q, k):
            if _is_sm103:
                q = torch.sigmoid(q)
            return q * k
        """
    )
    file = "sglang/srt/layers/gating.py"
    other = {r["line"]: r for r in _scan(file, "sglang", source, Arch.parse_target("sm_120"))}
    assert other[9]["classification"] == "other-arch"
    target = Arch.parse_target("sm_110")
    records = {r["line"]: r for r in _scan(file, "sglang", source, target)}
    assert records[9]["classification"] == "blocker"
    assert "`codemod run` cannot widen it: " in records[9]["reason"]
    pc = _run(file, "sglang", source, records[9], {"function": "fused_sigmoid_gating"}, (target,))
    assert pc.outcome == "failed"
    why = records[9]["reason"].split("`codemod run` cannot widen it: ")[1]
    assert why in pc.reason, (why, pc.reason)
    assert "assigns" not in records[5]["reason"], "a predicate's definition is not offered as a value to widen"
