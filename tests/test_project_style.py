"""A project's `[style]` in targets/projects/*.toml says what its own source says, and widening follows it."""

import ast
from pathlib import Path
from textwrap import dedent

import pytest

from codemods.core.arch import parse_archs
from codemods.gates import apply_edits
from codemods.gates.python.capability.membership import membership_counts
from codemods.gates.python.python_capability import find, widen
from codemods.recipes.load import load_project, projects

from conftest import unpack_wheel

SKIP_IF = dedent(
    """\
    import pytest


    @pytest.mark.skipif(get_compute_capability(torch.device("cuda"))[0] not in [10], reason="SM10x only")
    def test_gemm_allreduce():
        pass
    """
).encode()


@pytest.mark.parametrize("membership, expected", [("list", b"not in [10, 12]"), ("tuple", b"not in (10, 12)"), ("", b"not in (10, 12)")])
def test_a_file_with_no_example_of_its_own_takes_the_project_brackets(membership, expected):
    source = SKIP_IF.replace(b"not in [10]", b"!= 10")
    [gate] = find(source)
    after = apply_edits(source, widen(source, gate, parse_archs("sm_120"), number_membership=membership))
    assert after == source.replace(b"!= 10", expected)


def test_strings_keep_the_default_whatever_the_project_says_of_numbers():
    # 9a463df0d: `if sm_version != "sm_120": raise` -> `not in ("sm_120", "sm_121")` in FlashInfer, in a file with none
    source = b'def launch(sm_version):\n    if sm_version != "sm_120":\n        raise ValueError(sm_version)\n'
    [gate] = find(source)
    after = apply_edits(source, widen(source, gate, parse_archs("sm_121"), number_membership="list"))
    assert after == source.replace(b'!= "sm_120"', b'not in ("sm_120", "sm_121")')


@pytest.mark.parametrize(
    ("test", "expected"),
    [
        # FlashInfer 0.7.2 (packed_kda_decode_cute.py), in a file with no membership test to copy
        ("capability != (10, 0)", "capability not in ((10, 0), (10, 3))"),
        ("capability == (10, 0)", "capability in ((10, 0), (10, 3))"),
    ],
)
def test_pairs_keep_the_default_whatever_the_project_says_of_numbers(test, expected):
    source = f"def fast_path(device):\n    capability = get_compute_capability(device)\n    if {test}:\n        return 1\n".encode()
    [gate] = find(source)
    after = apply_edits(source, widen(source, gate, parse_archs("sm_103"), number_membership="list"))
    assert after == source.replace(test.encode(), expected.encode())


def test_a_file_with_examples_keeps_its_own_brackets_whatever_the_project_says():
    source = SKIP_IF.replace(b"not in [10]", b"!= 10") + b'\nMODES = "a" if x in ("fp8", "fp4") else "b"\n'
    [gate] = find(source)
    after = apply_edits(source, widen(source, gate, parse_archs("sm_120"), number_membership="list"))
    assert b"not in (10, 12)" in after


def test_a_bad_style_value_is_a_clear_error(tmp_path: Path):
    from codemods.core import errors

    bad = tmp_path / "p.toml"
    bad.write_text('name = "p"\n[style]\nnumber_membership = "set"\n[[layout]]\nname = "x"\nmarkers = ["p"]\n')
    with pytest.raises(errors.RecipeInvalid, match="number_membership"):
        load_project(bad)


@pytest.mark.real
@pytest.mark.parametrize("version", ["0.6.3", "0.6.10"])
def test_flashinfer_writes_numbers_in_lists_as_its_style_says(version):
    root = unpack_wheel("flashinfer-python", version)
    totals = {"list": 0, "tuple": 0}
    for file in (root / "flashinfer").rglob("*.py"):
        if "data" in file.relative_to(root / "flashinfer").parts:
            continue  # vendored CUTLASS DSL, not FlashInfer's own code
        try:
            tree = ast.parse(file.read_bytes())
        except SyntaxError:
            continue
        for key, count in membership_counts(tree, numbers=True).items():
            totals[key] += count
    assert projects()["flashinfer"].number_membership == "list"
    assert totals["list"] > 4 * totals["tuple"], totals  # 0.6.10: 72 to 11
