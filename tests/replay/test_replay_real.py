"""Replays of upstream gate edits: each recipe applied to the release before the edit gives the lines of
the release that ships it, and nothing else. Also: the projects' predicate tables agree with the source."""

import sys
from pathlib import Path

import pytest

from conftest import REAL_RELEASES, unpack_wheel
from codemods.recipes import load as recipes
from codemods.plan import planner
from codemods.gates import _predicates

HERE = Path(__file__).parent / "recipes"

sys.path.insert(0, str(Path(__file__).parent))
from replays import PYTHON_REPLAYS as REPLAYS  # noqa: E402


def _changed_lines(before: bytes, after: bytes) -> list[str]:
    import difflib

    old, new = before.decode().splitlines(), after.decode().splitlines()
    return [line for line in difflib.ndiff(old, new) if line.startswith("+ ")]


@pytest.mark.real
@pytest.mark.parametrize("name, release", REPLAYS, ids=[r[0] for r in REPLAYS])
def test_replay_line_for_line(name: str, release: tuple[str, str, str]) -> None:
    dist, old, new = release
    earlier, later = unpack_wheel(dist, old), unpack_wheel(dist, new)
    recipe = recipes.load_recipe(HERE / f"{name}.toml")
    target = recipes.detect(earlier)
    plan = planner.plan(recipe, target, read=lambda rel: (earlier / rel).read_bytes())
    assert not plan.failed, [c.reason for c in plan.failed]
    assert plan.changed, "the recipe must change the earlier release"
    for pc in plan.changed:
        shipped = (later / pc.file).read_bytes().decode().splitlines()
        added = _changed_lines(pc.before, pc.after)
        assert added
        missing = [line for line in added if line[2:] not in shipped]
        assert not missing, f"{pc.file}: lines the later release does not have: {missing}"


@pytest.mark.real
@pytest.mark.parametrize("project", ["flashinfer", "sglang"])
def test_predicate_table_matches_the_release_source(project: str, real_unpacked) -> None:
    """Every entry of targets/projects/<project>.toml [predicates] is what the release's source says."""
    proj = recipes.projects()[project]
    root = real_unpacked[project]
    target = recipes.detect(root, [project])
    read = {}
    for template in proj.predicate_files:
        path = root / target.resolve(template)
        if path.is_file():
            read.update(_predicates.read(path.read_bytes(), target.resolve(template), read))
    if project == "flashinfer":
        aot = root / target.resolve("{python}/aot.py")
        read.update(_predicates.read(aot.read_bytes(), "aot.py", read))
    table = proj.predicate_table()
    for name, meaning in table.items():
        assert name in read, f"{name}: not defined in {project} {REAL_RELEASES[project][1]}"
        assert read[name].caps == meaning.caps, f"{name}: table {_predicates.describe(meaning)}, source {_predicates.describe(read[name])}"
    # the case of issue 17: FlashInfer's sm120a predicate admits SM120 only
    if project == "flashinfer":
        assert _predicates.describe(read["is_sm120a_supported"]) == ["sm_120"]
    else:
        assert _predicates.describe(read["is_sm120_supported"]) == ["sm_12x"]
