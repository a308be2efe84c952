"""Recipes written from the README replay upstream gate edits line for line (real release pairs).

One list (replays.REPLAYS) and one judgement (replays.replay): the recipe applied
to the last release without the edit gives the lines of the first release with
it, and nothing else. A replay codemod cannot yet make line for line carries the
missing shape in `fails` and is a strict xfail here, so it is counted, not hidden.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from replays import BY_RECIPE, RECIPES, REPLAYS, WITH_RELEASES, on_release_pair  # noqa: E402

from conftest import fetch_wheel  # noqa: E402


def test_every_replay_recipe_is_listed_and_its_cases_pass(cli):
    """Each recipe's [[test]] cases state upstream's edit: they pass, except for a replay marked `fails`,
    where at least one of them must still fail (so the mark is dropped once codemod learns the shape), unless
    what differs is an edit of upstream's no recipe makes (`upstream_only`): then they all pass."""
    files = sorted(RECIPES.glob("*.toml"))
    assert [r.recipe for r in REPLAYS] == list(dict.fromkeys(r.recipe for r in REPLAYS)), "a recipe listed twice"
    assert {f.stem for f in files} == {r.recipe for r in REPLAYS}
    for file in files:
        result = cli("recipe", "test", file)
        if BY_RECIPE[file.stem].fails and not BY_RECIPE[file.stem].upstream_only:
            assert result.exit_code == 1 and "FAIL " in result.output, (file.name, result.output)
        else:
            assert result.exit_code == 0, (file.name, result.output)


@pytest.mark.real
@pytest.mark.parametrize(
    "entry",
    [pytest.param(r, id=r.recipe, marks=[pytest.mark.xfail(reason=r.fails, strict=True)] if r.fails else []) for r in WITH_RELEASES],
)
def test_replay_on_release_pair(entry):
    result = on_release_pair(entry, fetch_wheel)
    assert all(outcome == "changed" for outcome, _ in result["outcomes"].values()), result["outcomes"]
    assert result["line_for_line"], result["extra"]


def test_what_is_scored_apart_is_marked_as_failing():
    """A replay upstream changed more than archs in (`beyond_archs`, scored apart by bench/replay.py) is one
    codemod does not reproduce, for an edit no recipe makes: never a way to hide a shape codemod lacks."""
    apart = [r for r in REPLAYS if r.beyond_archs]
    assert apart and all(r.fails and r.upstream_only for r in apart), [r.recipe for r in apart if not (r.fails and r.upstream_only)]
