"""The projects' predicate tables agree with the release source (the replays themselves: test_replay.py)."""

import pytest

from conftest import REAL_RELEASES, unpack_wheel
from codemods.recipes import load as recipes
from codemods.gates.python.predicates import reading


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
            read.update(reading.read(path.read_bytes(), target.resolve(template), read))
    if project == "flashinfer":
        aot = root / target.resolve("{python}/aot.py")
        read.update(reading.read(aot.read_bytes(), "aot.py", read))
    table = proj.predicate_table()
    since = dict(proj.predicates_since)
    for name, meaning in table.items():
        if name in since:  # defined from a later release on: checked against that release's source
            continue
        assert name in read, f"{name}: not defined in {project} {REAL_RELEASES[project][1]}"
        assert read[name].caps == meaning.caps, f"{name}: table {reading.describe(meaning)}, source {reading.describe(read[name])}"
    for name, release in since.items():
        assert name not in read, f"{name}: defined in {REAL_RELEASES[project][1]} already; drop it from [predicates_since]"
        later = unpack_wheel({"flashinfer": "flashinfer-python", "sglang": "sglang"}[project], release)
        later_target = recipes.detect(later, [project])
        defined: dict = {}
        for template in proj.predicate_files:
            path = later / later_target.resolve(template)
            if path.is_file():
                defined.update(reading.read(path.read_bytes(), later_target.resolve(template), defined))
        assert name in defined, f"{name}: not defined in {project} {release}"
        assert defined[name].caps == table[name].caps, f"{name}: table {reading.describe(table[name])}, {release} {reading.describe(defined[name])}"
    # the case of issue 17: FlashInfer's sm120a predicate admits SM120 only
    if project == "flashinfer":
        assert reading.describe(read["is_sm120a_supported"]) == ["sm_120"]
    else:
        assert reading.describe(read["is_sm120_supported"]) == ["sm_12x"]


@pytest.mark.real
@pytest.mark.parametrize("release", [REAL_RELEASES["flashinfer"][1], "0.6.10"])
def test_capability_helpers_return_what_the_reader_is_told(release: str, real_unpacked) -> None:
    """FlashInfer's `get_compute_capability(device)` (declared in gates/python/capability/blocks.HELPERS, not guessed
    from its name) returns the device's (major, minor): flashinfer/utils.py returns torch's own call."""
    import ast

    from codemods.gates.python.capability.blocks import HELPERS, _capability_call
    from conftest import unpack_wheel

    root = real_unpacked["flashinfer"] if release == REAL_RELEASES["flashinfer"][1] else unpack_wheel("flashinfer-python", release)
    tree = ast.parse((root / "flashinfer/utils.py").read_bytes())
    (helper,) = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "get_compute_capability"]
    returns = [node.value for node in ast.walk(helper) if isinstance(node, ast.Return)]
    assert returns and all(value is not None and ast.unparse(value).startswith("torch.cuda.get_device_capability(")
                           for value in returns), [ast.unparse(v) for v in returns if v is not None]
    assert {_capability_call(value) for value in returns if value is not None} == {HELPERS["get_compute_capability"]} == {"pair"}
