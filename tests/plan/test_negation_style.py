"""A lone `if not P:` widened to several predicates (issue 34): the negation style is the file's; in a file with
neither `not (P or Q)` nor `not P and not Q`, the nearest file in its folder's; with none there either, a guess
that the run's output says."""

from __future__ import annotations

import textwrap

import pytest

from conftest import git

UTILS = textwrap.dedent(
    """\
    import torch


    def get_compute_capability(device):
        return torch.cuda.get_device_capability(device)


    def is_sm100a_supported(device) -> bool:
        major, _ = get_compute_capability(device)
        return major == 10


    def is_sm120a_supported(device) -> bool:
        major, minor = get_compute_capability(device)
        return major == 12 and minor == 0
    """
)
GEMM = textwrap.dedent(
    """\
    from ..utils import is_sm100a_supported, is_sm120a_supported


    def mm_fp4(a, b):
        if not is_sm100a_supported(a.device):
            raise ValueError("mm_fp4 needs SM100")
        return a @ b
    """
)
AND_NOT = textwrap.dedent(
    """\
    from ..utils import is_sm100a_supported, is_sm120a_supported


    def bmm_fp8(a, b):
        if not is_sm100a_supported(a.device) and not is_sm120a_supported(a.device):
            raise ValueError("bmm_fp8 needs SM100 or SM120")
        return a @ b
    """
)
RECIPE = textwrap.dedent(
    """\
    id = "mm-fp4-sm120"
    summary = "mm_fp4 on SM120"
    arch = "sm_120"
    admit = "exact"

    [[change]]
    id = "flashinfer.mm-fp4-guard"
    project = "flashinfer"
    file = "{python}/gemm/mm_fp4.py"
    kind = "python_arch_test"
    function = "mm_fp4"
    """
)


@pytest.fixture
def repo(example_repo):
    def make(neighbour: str | None):
        root = example_repo("flashinfer")
        (root / "flashinfer" / "gemm").mkdir()
        (root / "flashinfer" / "utils.py").write_text(UTILS)
        (root / "flashinfer" / "gemm" / "mm_fp4.py").write_text(GEMM)
        if neighbour is not None:
            (root / "flashinfer" / "gemm" / "mm_fp8.py").write_text(neighbour)
        git(root, "add", "-A")
        git(root, "commit", "-qm", "gemm")
        return root

    return make


def _run(cli, tmp_path, root):
    path = tmp_path / "mm-fp4-sm120.toml"
    path.write_text(RECIPE)
    result = cli("run", path, "--repo", root)
    assert result.exit_code == 0, result.output
    return (root / "flashinfer" / "gemm" / "mm_fp4.py").read_text(), result.stderr


def test_a_file_with_neither_style_takes_the_style_of_the_file_beside_it(cli, tmp_path, repo):
    after, stderr = _run(cli, tmp_path, repo(AND_NOT))
    # a call with arguments would be guessed `not (P or Q)`: the file beside it says `not P and not Q`
    assert after == GEMM.replace(
        "if not is_sm100a_supported(a.device):", "if not is_sm100a_supported(a.device) and not is_sm120a_supported(a.device):"
    )
    assert "guessed" not in stderr


def test_with_no_style_in_the_folder_the_guess_is_said(cli, tmp_path, repo):
    after, stderr = _run(cli, tmp_path, repo(None))
    assert after == GEMM.replace(
        "if not is_sm100a_supported(a.device):", "if not (is_sm100a_supported(a.device) or is_sm120a_supported(a.device)):"
    )
    assert "negation style guessed (`not (P or Q)`)" in stderr
    assert 'negation = "parentheses" or "and_not"' in stderr


def test_the_files_own_style_wins_over_the_folder(cli, tmp_path, repo):
    root = repo(AND_NOT)
    own = GEMM + textwrap.dedent(
        """\


        def mm_mxfp8(a, b):
            if not (is_sm100a_supported(a.device) or is_sm120a_supported(a.device)):
                raise ValueError("mm_mxfp8 needs SM100 or SM120")
            return a @ b
        """
    )
    (root / "flashinfer" / "gemm" / "mm_fp4.py").write_text(own)
    git(root, "commit", "-qam", "mxfp8")
    after, stderr = _run(cli, tmp_path, root)
    assert after == own.replace(
        "if not is_sm100a_supported(a.device):", "if not (is_sm100a_supported(a.device) or is_sm120a_supported(a.device)):"
    )
    assert "guessed" not in stderr
