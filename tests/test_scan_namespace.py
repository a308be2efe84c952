"""A folder without `__init__.py` is importable (PEP 420, issue 38 item 5): scan calls a module in one "never
imported" only when no file outside the folder imports it; FlashInfer's tests import `flashinfer.cute_dsl_kernels`
modules as a namespace package while the package itself ships no `__init__.py` there."""

from __future__ import annotations

import json
import textwrap

import pytest

from conftest import git

MODULE = "flashinfer/cute_dsl_kernels/gemm/blackwell_gemm.py"
SOURCE = textwrap.dedent(
    """\
    import torch


    def blackwell_gemm(a, b):
        if torch.cuda.get_device_capability(a.device)[0] != 10:
            raise RuntimeError("blackwell_gemm needs SM100")
        return _run(a, b)
    """
)
TEST = "tests/gemm/test_blackwell_gemm.py"


def _scan(cli, root) -> dict:
    result = cli("scan", "--repo", root, "--arch", "sm_121", "--format", "json", "--verbose")
    assert result.exit_code == 0, result.output + result.stderr
    [gate] = [g for g in json.loads(result.stdout)["gates"] if g["file"] == MODULE]
    return gate


@pytest.fixture
def repo(example_repo):
    root = example_repo("flashinfer")
    (root / MODULE).parent.mkdir(parents=True)
    (root / MODULE).write_text(SOURCE)
    git(root, "add", MODULE)
    git(root, "commit", "-qm", "a module in a folder without __init__.py")
    return root


def test_a_module_nothing_imports_in_a_folder_without_init_is_never_imported(cli, repo):
    gate = _scan(cli, repo)
    assert gate["classification"] == "covered"
    assert "has no __init__.py and no file imports this module: the package never imports this copy" in gate["reason"]


@pytest.mark.parametrize(
    "importing",
    [
        pytest.param("from flashinfer.cute_dsl_kernels.gemm import blackwell_gemm\n", id="from-package-import-module"),
        pytest.param("import flashinfer.cute_dsl_kernels.gemm.blackwell_gemm as bg\n", id="import-dotted"),
        pytest.param("from flashinfer.cute_dsl_kernels.gemm.blackwell_gemm import blackwell_gemm\n", id="from-module"),
        pytest.param(
            'import importlib\nbg = importlib.import_module("flashinfer.cute_dsl_kernels.gemm.blackwell_gemm")\n',
            id="import-module-string",
        ),
    ],
)
def test_a_module_tests_import_as_a_namespace_package_is_not_called_never_imported(cli, repo, importing):
    (repo / TEST).parent.mkdir(parents=True, exist_ok=True)
    (repo / TEST).write_text(importing + "\n\ndef test_gemm():\n    pass\n")
    git(repo, "add", TEST)
    git(repo, "commit", "-qm", "a test importing it")
    gate = _scan(cli, repo)
    assert "never imports" not in gate["reason"]
    assert gate["classification"] != "covered"


def test_an_import_of_the_installed_package_a_bundled_copy_mirrors_is_not_an_import_of_the_copy(cli, example_repo):
    """FlashInfer imports `cutlass.cute.nvgpu.warp.mma` (the installed CuTe DSL); the copy under flashinfer/data
    is `flashinfer.data.cutlass.python.CuTeDSL.cutlass...`, which nothing on sys.path roots: still never imported."""
    root = example_repo("flashinfer")
    copy = "flashinfer/data/cutlass/python/CuTeDSL/cutlass/cute/nvgpu/warp/mma.py"
    user = "flashinfer/gemm_b12x.py"
    (root / copy).parent.mkdir(parents=True)
    (root / copy).write_text(SOURCE)
    (root / user).write_text("from cutlass.cute.nvgpu.warp.mma import blackwell_gemm\n")
    git(root, "add", copy, user)
    git(root, "commit", "-qm", "a bundled copy and a user of the installed package")
    result = cli("scan", "--repo", root, "--arch", "sm_121", "--format", "json", "--verbose")
    assert result.exit_code == 0, result.output + result.stderr
    [gate] = [g for g in json.loads(result.stdout)["gates"] if g["file"] == copy]
    assert gate["classification"] == "covered" and "the package never imports this copy" in gate["reason"]
