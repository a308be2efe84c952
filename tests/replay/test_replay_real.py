"""The projects' predicate tables agree with the release source (the replays themselves: test_replay.py)."""

import pytest

from conftest import REAL_RELEASES
from codemods.recipes import load as recipes
from codemods.gates import _predicates


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
