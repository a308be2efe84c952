"""Recipes written from the README replay upstream FlashInfer gate edits line for line (real release pairs)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from replays import BENCH_ONLY, PYTHON_REPLAYS, RECIPES, RELEASES, replay  # noqa: E402

from conftest import fetch_wheel  # noqa: E402


def _wheel_target(wheel: Path):
    from codemods.recipes import load as recipes
    from codemods.recipes.model import ProjectTree

    project = recipes.projects()["flashinfer"]
    layout = next(layout for layout in project.layouts if layout.name == "wheel")
    return ProjectTree(project, layout, wheel)


def _reader(wheel: Path):
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())

    def read(rel: str) -> bytes:
        if rel not in names:
            raise FileNotFoundError(rel)
        return archive.read(rel)

    return read


def test_every_replay_recipe_is_listed_and_its_cases_pass(cli):
    files = sorted(RECIPES.glob("*.toml"))
    assert {f.stem for f in files} == set(RELEASES) | set(BENCH_ONLY) | {name for name, _ in PYTHON_REPLAYS}
    for file in files:
        result = cli("recipe", "test", file)
        assert result.exit_code == 0, (file.name, result.output)


@pytest.mark.real
@pytest.mark.parametrize("recipe_id", sorted(RELEASES))
def test_replay_on_release_pair(recipe_id):
    from codemods.recipes.load import load_recipe

    commit, before, after = RELEASES[recipe_id]
    earlier = fetch_wheel("flashinfer-python", before)
    later = fetch_wheel("flashinfer-python", after)
    result = replay(load_recipe(RECIPES / f"{recipe_id}.toml"), _wheel_target(earlier), _reader(earlier), _reader(later))
    assert all(outcome == "changed" for outcome, _ in result["outcomes"].values()), result["outcomes"]
    assert result["line_for_line"], result["extra"]
