"""Negated conjunctions of major and minor (issue 38 item 4): `if not (major == 10 and minor == 0): pytest.skip(...)`
widens for sm_103 through the equivalent membership, and scan and run agree: every gate `scan` calls widenable in a
generated family of such gates is widened by a recipe naming only its file and function."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.audit.python_files import analyse_python
from codemods.audit.records import Context
from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates.registry import KINDS
from codemods.plan.changes import PlannedChange
from codemods.plan.widen import plan_change
from codemods.recipes.load import load_recipe

FILE = "tests/gemm/test_mm_fp4.py"
FUNCTION = "test_mm_fp4"


def _source(condition: str, exit_line: str = 'pytest.skip("mm_fp4 is only supported on SM100")') -> bytes:
    """FlashInfer's test shape: the capability read into `major, minor`, then a skip unless the one arch."""
    return textwrap.dedent(
        f"""\
        import pytest
        import torch


        def {FUNCTION}(m, n, k):
            major, minor = torch.cuda.get_device_capability()
            if {condition}:
                {exit_line}
            a = torch.randn(m, k, device="cuda")
            return a
        """
    ).encode()


def _scan(source: bytes, arch: Arch) -> list[dict]:
    context = Context(
        root="", arch=arch, universe=DEFAULT_ARCHS, jit=None, layout=False, include_all=True, hazards=True,
        cache=None, key="",
    )  # fmt: skip
    return [r for r in analyse_python(FILE, source, context, False).gates if r["kind"] == "python_capability"]


def _run(source: bytes, arch: Arch) -> PlannedChange:
    """Plan a recipe whose one change names only the file and the function, as `codemod recipe test` does."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mm-fp4.toml"
        path.write_text(
            textwrap.dedent(
                f"""\
                id = "mm-fp4"
                summary = "mm_fp4 tests on {arch.name}"
                arch = "{arch.name}"

                [[change]]
                id = "flashinfer.mm-fp4-test"
                project = "flashinfer"
                file = "{FILE}"
                kind = "python_capability"
                function = "{FUNCTION}"
                """
            )
        )
        recipe = load_recipe(path)
    (change,) = recipe.changes
    targets, universe = recipe.scope(DEFAULT_ARCHS)
    pc = PlannedChange(change, FILE, before=source, selector=change.locations[0].selector)
    plan_change(pc, KINDS["python_capability"], universe, targets, None, None)
    return pc


def _line(source: bytes, n: int = 6) -> str:
    return source.decode().splitlines()[n].strip()


def test_sm103_joins_sm100_through_the_minor_membership():
    before = _source("not (major == 10 and minor == 0)")
    (sm103,) = [a for a in DEFAULT_ARCHS if a.name == "sm_103"]
    assert {r["classification"] for r in _scan(before, sm103)} == {"widenable"}
    pc = _run(before, sm103)
    assert (pc.outcome, pc.reason) == ("changed", "")
    # FlashInfer writes numbers in lists (targets/projects/flashinfer.toml) where the file has no membership
    assert _line(pc.after) == "if not (major == 10 and minor in [0, 3]):"
    assert pc.after == before.replace(b"minor == 0)", b"minor in [0, 3])")
    assert _run(pc.after, sm103).outcome == "unchanged"  # and again: nothing more to do
    assert all(not r["excludes_arch"] for r in _scan(pc.after, sm103))


def test_the_membership_is_written_in_the_files_brackets():
    before = _source("not (major == 10 and minor == 0)") + b"\n\nFAST = 'cudnn' in ('cudnn', 'cutlass')\n"
    (sm103,) = [a for a in DEFAULT_ARCHS if a.name == "sm_103"]
    assert _line(_run(before, sm103).after) == "if not (major == 10 and minor in (0, 3)):"


def test_an_arch_of_another_major_and_minor_is_added_as_its_own_conjunction():
    before = _source("not (major == 10 and minor == 0)", "raise ValueError('only SM100')")
    (sm121,) = [a for a in DEFAULT_ARCHS if a.name == "sm_121"]
    pc = _run(before, sm121)
    assert pc.outcome == "changed", pc.reason
    # an sm_121 recipe brings sm_120 too (the family it is in): one term per major, its minors a membership
    assert _line(pc.after) == "if not ((major == 10 and minor == 0) or (major == 12 and minor in [0, 1])):"
    assert _run(pc.after, sm121).outcome == "unchanged"


_MAJOR = st.sampled_from(["major == {}", "major >= {}", "major in ({},)", "major != {}"])
_MINOR = st.sampled_from(["minor == {}", "minor >= {}", "minor <= {}", "minor in ({}, 9)", "minor != {}"])
_EXITS = ['pytest.skip("not supported")', "raise RuntimeError('not supported')", "return None"]


@st.composite
def _negated_conjunctions(draw) -> str:
    major = draw(_MAJOR).format(draw(st.sampled_from([8, 9, 10, 11, 12])))
    minor = draw(_MINOR).format(draw(st.integers(0, 9)))
    terms = [major, minor] if draw(st.booleans()) else [minor, major]
    return f"not ({' and '.join(terms)})"


@settings(max_examples=120)
@given(condition=_negated_conjunctions(), exit_line=st.sampled_from(_EXITS), arch=st.sampled_from(DEFAULT_ARCHS))
def test_every_negated_conjunction_scan_calls_widenable_is_widened_by_file_and_function(condition, exit_line, arch):
    before = _source(condition, exit_line)
    widenable = [r for r in _scan(before, arch) if r["classification"] == "widenable"]
    if not widenable:
        return
    pc = _run(before, arch)
    assert pc.outcome == "changed", f"scan: {widenable}\nrun: {pc.outcome}: {pc.reason}"
    assert not [r for r in _scan(pc.after, arch) if r["excludes_arch"]], pc.after.decode()
    assert _run(pc.after, arch).outcome == "unchanged"
