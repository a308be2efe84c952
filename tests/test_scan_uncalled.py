"""`scan`'s audit: a CUDA guard in a device helper that nothing the JIT module compiles calls is not listed.

The shape is FlashInfer's bundled TensorRT-LLM headers (tests/fixtures/device_helpers.py):
two namespaces define a device helper of the same name; one is guarded for
sm_90 through sm_11x with an empty `#else` (sm_121 gets nothing there), the
other is not; the kernel calls the name from inside the other namespace,
where C++ name lookup finds the unguarded one. The guard is classified by the one
call reader (codemods.cpp.calls, as the empty-kernel hazard reads it):
covered when no call reaches its helper, as before when a call does or
when codemod cannot tell which helper a call reaches.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemods.audit.scan import scan
from codemods.core.arch import Arch
from fixtures.device_helpers import COMMON, COMMON_GUARD_LINE, REACHING_CALLS, UNRESOLVED_CALLS, tree as _tree

SM121 = Arch.parse("sm_121")


def _guard(root: Path) -> dict:
    (record,) = [g for g in scan(root, SM121).gates if g["file"] == COMMON and g["line"] == COMMON_GUARD_LINE]
    return record


@pytest.mark.parametrize("call, prologue", REACHING_CALLS)
def test_before_a_guard_in_a_helper_a_kernel_calls_stays_widenable(tmp_path, call, prologue):
    record = _guard(_tree(tmp_path, call, prologue))
    assert record["excludes_arch"] is True
    assert record["classification"] == "widenable"
    assert record["symbol"] == "elect_one_sync"


def test_after_a_guard_in_a_helper_no_call_reaches_is_covered(tmp_path, cli):
    # the unqualified call inside tllm::kernels finds kernels::elect_one_sync before the using-directive's
    root = _tree(tmp_path, "elect_one_sync()")
    record = _guard(root)
    assert record["excludes_arch"] is True
    assert record["classification"] == "covered"
    assert record["reason"] == (
        "no call in the files of fp4_quantization reaches `tllm::common::elect_one_sync`, the device function around "
        "this guard: no kernel runs this code on any arch"
    )
    done = cli("scan", "--repo", root, "--arch", "sm_121", "--format", "json")
    assert done.exit_code == 0, done.output
    (listed,) = [g for g in json.loads(done.stdout)["gates"] if g["file"] == COMMON and g["line"] == COMMON_GUARD_LINE]
    assert listed["classification"] == "covered"
    text = cli("scan", "--repo", root, "--arch", "sm_121")
    assert f"{COMMON}:{COMMON_GUARD_LINE}" not in text.stdout


@pytest.mark.parametrize("call, prologue", UNRESOLVED_CALLS)
def test_a_call_codemod_cannot_resolve_keeps_the_guard_listed(tmp_path, call, prologue):
    assert _guard(_tree(tmp_path, call, prologue))["classification"] == "widenable"


def test_a_guard_in_a_file_no_module_compiles_keeps_its_classification(tmp_path):
    assert _guard(_tree(tmp_path, "elect_one_sync()", compiled=False))["classification"] == "widenable"
