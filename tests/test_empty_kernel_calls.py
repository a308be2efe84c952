"""`scan`'s empty-kernel hazard in a device helper: counted only where the module's code calls that helper.

The shape is TensorRT-LLM's in FlashInfer 0.6.10 (tests/fixtures/device_helpers.py):
two namespaces define the same `elect_one_sync`; `common`'s is guarded for sm_90 through sm_11x with an
empty `#else`, `kernels`' is not; a file-level `using namespace ...common`,
and the kernel's call inside `namespace ...kernels`, which C++ resolves to
`kernels::elect_one_sync`. Before this rule scan called the guard a definite
empty kernel and `scan --check` failed on it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemods.audit.scan import check, scan
from codemods.core.arch import Arch
from conftest import unpack_wheel
from fixtures.device_helpers import COMMON, COMMON_GUARD_LINE, GUARD, REACHING_CALLS, UNRESOLVED_CALLS, tree as _tree

SM121 = Arch.parse("sm_121")


def _empty(root: Path) -> list[tuple[str, int, bool]]:
    result = scan(root, SM121)
    return [(h["file"], h["line"], h["potential"]) for h in result.hazards if h["kind"] == "empty-kernel"]


def test_unqualified_call_in_kernels_reaches_kernels_helper_so_no_hazard(tmp_path, cli):
    root = _tree(tmp_path, "elect_one_sync()")
    assert _empty(root) == []
    assert cli("scan", "--repo", root, "--arch", "sm_121", "--check").exit_code == 0


@pytest.mark.parametrize("call, prologue", REACHING_CALLS)
def test_a_call_that_reaches_the_guarded_helper_is_definite(tmp_path, cli, call, prologue):
    root = _tree(tmp_path, call, prologue)
    assert _empty(root) == [(COMMON, COMMON_GUARD_LINE, False)]
    caught = cli("scan", "--repo", root, "--arch", "sm_121", "--check", "--format", "json")
    assert caught.exit_code == 1
    (hazard,) = [h for h in json.loads(caught.stdout)["hazards"] if h["kind"] == "empty-kernel"]
    assert "the kernel runs without it" in hazard["message"]
    assert "`tllm::common::elect_one_sync` is called at include/flashinfer/tllm/quantization.cuh:11" in hazard["message"]


@pytest.mark.parametrize("call, prologue", UNRESOLVED_CALLS)
def test_a_call_codemod_cannot_resolve_makes_it_potential(tmp_path, cli, call, prologue):
    root = _tree(tmp_path, call, prologue)
    assert _empty(root) == [(COMMON, COMMON_GUARD_LINE, True)]
    result = scan(root, SM121)
    (hazard,) = [h for h in result.hazards if h["kind"] == "empty-kernel"]
    assert "the kernel may run without it" in hazard["message"] and "codemod cannot tell" in hazard["message"]
    assert check(result) is False
    assert cli("scan", "--repo", root, "--arch", "sm_121", "--check").exit_code == 0


def test_a_using_directive_inside_kernels_still_loses_to_kernels_own_helper(tmp_path):
    # C++ sees common's names in tllm (the namespace enclosing both), after kernels' own: no hazard
    root = _tree(tmp_path, "elect_one_sync()", "namespace tllm { namespace kernels { using namespace common; } }")
    assert _empty(root) == []


def test_a_guard_in_the_kernel_itself_stays_definite(tmp_path):
    root = _tree(tmp_path, "elect_one_sync()")
    header = root / "include/flashinfer/tllm/quantization.cuh"
    text = header.read_text().replace("    out[blockIdx.x] = 1;\n", f"{GUARD}\n    out[blockIdx.x] = 1;\n#endif\n")
    header.write_text(text)
    line = text.splitlines().index(GUARD) + 1
    assert _empty(root) == [("include/flashinfer/tllm/quantization.cuh", line, False)]


@pytest.mark.real
def test_real_flashinfer_0_6_10_passes_check_for_sm121(cli):
    root = unpack_wheel("flashinfer-python", "0.6.10")
    result = scan(root, SM121)
    helper = "flashinfer/data/csrc/nv_internal/include/tensorrt_llm/common/cudaUtils.h"
    assert [h for h in result.hazards if h["file"] == helper] == []
    assert [h for h in result.hazards if not h["potential"]] == []
    done = cli("scan", "--repo", root, "--arch", "sm_121", "--check", "--quiet")
    assert done.exit_code == 0, done.output
    assert "0 definite" in done.stdout
