"""The branch rule on `#if`/`#elif` groups (issue 38 item 2, C side): a guard whose group has a later branch the new
arch takes today, holding code, is a dispatch arm, refused by `run` as needs-human, and put in needs-human by `scan`
from the same functions (plan.dispatch.taken_branch, branch_work). A later branch that is an `#error` or a stub gives
the arch nothing: widening is admission there, and `run` widens it."""

from __future__ import annotations

import json
import textwrap

import pytest

from codemods.core.arch import Arch
from codemods.gates.cpp import cuda_guard
from codemods.plan import dispatch
from conftest import git

FILE = "csrc/gemm_dispatch.cu"
DISPATCH = textwrap.dedent(
    """\
    #include <cuda_runtime.h>

    __global__ void gemm_kernel(float const* a, float* c) {
    #if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 1000 || __CUDA_ARCH__ == 1030)
      gemm_tcgen05_tile(a, c);
    #elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1200)
      gemm_mma_sync_tile(a, c);
    #elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
      gemm_wgmma_tile(a, c);
    #endif
    }
    """
)
ARM, LATER = 4, 6
SM120 = Arch.parse("sm_120")


def _later(source: str) -> dispatch.Arm | None:
    data = source.encode()
    gate = cuda_guard.find(data)[0]
    return dispatch.later_directive(data, gate, (SM120,))


def test_a_later_branch_with_code_is_the_arm_that_handles_the_arch():
    arm = _later(DISPATCH)
    assert arm is not None and arm.line == LATER
    assert arm.text == "#elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1200)"


@pytest.mark.parametrize(
    "later",
    [
        pytest.param('#else\n  __trap();\n', id="a-trap-stub"),
        pytest.param("#else\n  return;\n", id="a-return-stub"),
        pytest.param('#elif defined(__CUDA_ARCH__)\n#error "gemm_kernel needs sm_90 or sm_100"\n', id="an-error"),
        pytest.param("#else\n  // nothing for other GPUs\n", id="a-comment"),
    ],
)
def test_a_later_branch_that_does_no_work_is_no_arm(later):
    source = DISPATCH.replace(
        "#elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1200)\n  gemm_mma_sync_tile(a, c);\n"
        "#elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)\n  gemm_wgmma_tile(a, c);\n",
        later,
    )
    assert _later(source) is None


def test_an_earlier_branch_or_a_branch_the_arch_does_not_take_is_no_arm():
    # the arm for sm_120 comes first: the guard after it is not dispatch for sm_120
    swapped = DISPATCH.replace("== 1000 || __CUDA_ARCH__ == 1030", ">= 1200").replace(">= 1200)\n  gemm_mma", "== 1000)\n  gemm_mma")
    data = swapped.encode()
    second = cuda_guard.find(data)[1]
    assert dispatch.later_directive(data, second, (SM120,)) is None
    # the later branches admit only sm_90
    narrow = DISPATCH.replace(">= 1200", "== 900").replace(">= 900", "== 800")
    assert _later(narrow) is None


def recipe(tmp_path, file: str = FILE, kind: str = "cuda_guard", function: str = "gemm_kernel") -> str:
    """A recipe of one change widening the sm_100 gates of `function` in `file` for sm_120."""
    path = tmp_path / "dispatch-sm120.toml"
    path.write_text(
        textwrap.dedent(
            f"""\
            id = "dispatch-sm120"
            summary = "{function} on SM120"
            arch = "sm_120"

            [[change]]
            id = "flashinfer.{function.replace("_", "-")}"
            project = "flashinfer"
            file = "{file}"
            kind = "{kind}"
            function = "{function}"
            admits = ["sm_100"]
            """
        )
    )
    return str(path)


def committed(example_repo, file: str, text: str):
    """The flashinfer example as a git repository, with `file` holding `text`, committed."""
    root = example_repo("flashinfer")
    (root / file).parent.mkdir(parents=True, exist_ok=True)
    (root / file).write_text(text)
    git(root, "add", file)
    git(root, "commit", "-qm", f"add {file}")
    return root


@pytest.fixture
def repo(example_repo):
    return committed(example_repo, FILE, DISPATCH)


def test_run_refuses_the_arm_as_needs_human_and_writes_nothing(cli, repo, tmp_path):
    result = cli("run", recipe(tmp_path), "--repo", repo)
    assert result.exit_code == 3, result.output
    assert "error[needs-human]" in result.stderr
    assert f"{FILE}:{ARM}: cannot widen" in result.stderr
    assert f"`#elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1200)` ({FILE}:{LATER}) handles sm_120 today" in result.stderr
    assert (repo / FILE).read_text() == DISPATCH
    assert git(repo, "branch", "--list", "codemod/*") == ""


def test_run_widens_the_guard_when_the_later_branch_is_a_stub(cli, repo, tmp_path):
    stub = DISPATCH.replace(
        "#elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1200)\n  gemm_mma_sync_tile(a, c);\n"
        "#elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)\n  gemm_wgmma_tile(a, c);\n",
        "#else\n  __trap();\n",
    )
    (repo / FILE).write_text(stub)
    git(repo, "commit", "-qam", "a stub for other GPUs")
    result = cli("run", recipe(tmp_path), "--repo", repo)
    assert result.exit_code == 0, result.output
    assert (repo / FILE).read_text() == stub.replace(
        "__CUDA_ARCH__ == 1030)",
        "__CUDA_ARCH__ == 1030 || \\\n                               __CUDA_ARCH__ == 1200 || __CUDA_ARCH__ == 1210)",
    )  # past the column limit the new terms go on a continued line, one column past the chain's `(`


def test_scan_puts_the_arm_in_needs_human_by_the_same_rule(cli, repo):
    result = cli("scan", "--repo", repo, "--arch", "sm_120", "--format", "json")
    assert result.exit_code == 0, result.output
    records = {g["line"]: g for g in json.loads(result.stdout)["gates"] if g["file"] == FILE}
    assert records[ARM]["classification"] == "needs-human"
    assert f"(line {LATER}) instead; widening would change which implementation it runs" in records[ARM]["reason"]


# ---------------------------------------------------------------- C++ `if`/`else if` chains of host checks

HOST_FILE = "csrc/moe_dispatch.cpp"
HOST = textwrap.dedent(
    """\
    #include "moe_runner.h"

    void launch_moe(MoeParams const& params, cudaStream_t stream) {
      int const sm_version = getSMVersion();
      if (sm_version == 100 || sm_version == 103) {
        launch_moe_sm100(params, stream);
      } else if (sm_version >= 120) {
        launch_moe_sm120(params, stream);
      } else if (sm_version == 90) {
        launch_moe_sm90(params, stream);
      } else {
        TLLM_THROW("launch_moe: unsupported SM %d", sm_version);
      }
    }
    """
)
HOST_ARM, HOST_LATER = 5, 7


def host_recipe(tmp_path) -> str:
    return recipe(tmp_path, HOST_FILE, "cpp_runtime_check", "launch_moe")


@pytest.fixture
def host_repo(example_repo):
    return committed(example_repo, HOST_FILE, HOST)


def _host_arm(source: str) -> dispatch.Arm | None:
    from codemods.gates.cpp import cpp_runtime_check

    data = source.encode()
    checks = cpp_runtime_check.find(data, language="cpp")
    return dispatch.later_statement(data, checks[0], (SM120,), checks, "cpp")


def test_a_later_else_if_that_takes_the_arch_is_the_arm():
    arm = _host_arm(HOST)
    assert arm is not None and (arm.line, arm.text) == (HOST_LATER, "else if (sm_version >= 120) {")


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param("launch_moe_sm120(params, stream);", 'TLLM_THROW("no SM120 kernel");', id="the-later-arm-throws"),
        pytest.param("launch_moe_sm100(params, stream);", 'TLLM_THROW("SM100 needs a newer build");', id="the-arm-throws"),
        pytest.param("} else if (sm_version >= 120) {", "} else if (sm_version == 110) {", id="no-later-arm-takes-it"),
    ],
)
def test_no_arm_when_the_later_arm_refuses_or_the_arch_takes_none(before, after):
    assert _host_arm(HOST.replace(before, after)) is None


def test_run_refuses_the_host_arm_as_needs_human(cli, host_repo, tmp_path):
    result = cli("run", host_recipe(tmp_path), "--repo", host_repo)
    assert result.exit_code == 3, result.output
    assert "error[needs-human]" in result.stderr
    assert f"`else if (sm_version >= 120) {{` ({HOST_FILE}:{HOST_LATER}) handles sm_120 today" in result.stderr
    assert (host_repo / HOST_FILE).read_text() == HOST


def test_scan_puts_the_host_arm_in_needs_human_with_runs_sentence(cli, host_repo):
    result = cli("scan", "--repo", host_repo, "--arch", "sm_120", "--format", "json")
    assert result.exit_code == 0, result.output
    records = {g["line"]: g for g in json.loads(result.stdout)["gates"] if g["file"] == HOST_FILE}
    assert records[HOST_ARM]["classification"] == "needs-human"
    assert records[HOST_ARM]["reason"].startswith(f"`else if (sm_version >= 120) {{` ({HOST_FILE}:{HOST_LATER}) handles")
    assert records[HOST_LATER + 2]["classification"] != "needs-human", "the SM90 arm: sm_120 takes an earlier one"
