"""audit.parallel: the parts of a tree's assembly read in a worker of the scan's pool (the keys each arch-keyed map's
callers pass; the ways into the specs' functions) give the records one process gives, and what the workers
looked at is recorded for the next scan as if the scan's process had looked."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_jit_users import SM121, moe_tree
from test_map_callers import SM110, _decode, _tree

from codemods.audit import parallel, scan as scan_module
from codemods.audit.jit_modules import TreeFiles
from codemods.audit.jit_users import Trees, ways_in
from codemods.audit.map_callers import asked_of, keys_callers_pass
from codemods.audit.scan import scan
from codemods.core.arch import Arch

MAP_FILES = {"flashinfer/jit/__init__.py": "", "csrc/empty.cu": "", **_decode('_get_max_tmem_alloc_cols("sm_100")')}


@pytest.fixture
def started(monkeypatch) -> list[str]:
    """The parts of the assembly the scans below started in a worker (the spy sees the scan's process)."""
    seen: list[str] = []
    for name in ("callers_started", "ways_started"):
        original = getattr(parallel, name)

        def spy(*args, _original=original, _name=name):
            begun = _original(*args)
            if begun is not None:
                seen.append(_name)
            return begun

        monkeypatch.setattr(scan_module, name, spy)
    return seen


def _records(root: Path, arch: Arch, jobs: int, cache: Path | None = None) -> tuple[list[dict], list[dict]]:
    result = scan(root, arch, jobs=jobs, cache=cache)
    return result.gates, result.hazards


@pytest.mark.parametrize(
    ("build", "arch", "part"),
    [
        pytest.param(lambda root: _tree(root, MAP_FILES), SM110, "callers_started", id="map-callers"),
        pytest.param(moe_tree, SM121, "ways_started", id="ways-into-a-spec"),
    ],
)
def test_a_scan_with_workers_gives_the_records_of_one_process(tmp_path, started, build, arch, part):
    root = build(tmp_path)
    alone = _records(root, arch, jobs=1)
    assert started == []  # one process reads every part itself
    assert _records(root, arch, jobs=2) == alone
    assert part in started


def test_the_map_records_a_worker_reads_are_what_the_pass_makes_here(tmp_path):
    root = _tree(tmp_path, MAP_FILES)
    gates = scan(root, SM110, jobs=1, hazards=False).gates  # the records as the files' readers made them
    own = tuple(sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py")))
    here = [dict(record) for record in gates]
    tree = TreeFiles(root)
    keys_callers_pass(here, Trees(tree.read, files=own), own, SM110)
    there = [dict(record) for record in gates]
    words: set[bytes] = set()
    with ThreadPoolExecutor(1) as pool:
        finish = parallel.callers_started(pool, str(root), there, own, list(own), SM110, TreeFiles(root), words)
        assert finish is not None
        finish()
    assert there == here
    assert [r["classification"] for r in asked_of(there)] == ["needs-human"]
    assert words == {b"get_max_tmem_alloc_cols"}


def test_ways_read_ahead_are_the_ways_read_here(tmp_path):
    root = moe_tree(tmp_path)
    own = tuple(sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py")))
    lines = {"flashinfer/aot.py": {6}, "flashinfer/fused_moe/cute_dsl/fused_moe.py": {11, 19}}
    task = parallel.WaysTask(str(root), ["gen_moe_utils_module"], own, list(own), lines)
    ways, (touched, words) = parallel.ways_ahead(task)
    read = TreeFiles(root).read
    assert ways == {"gen_moe_utils_module": ways_in(read, own, lines, "gen_moe_utils_module", until_ungated=True)}
    assert ways["gen_moe_utils_module"] and all(way.gated for way in ways["gen_moe_utils_module"])
    assert "flashinfer/aot.py" in touched and b"gen_moe_utils_module" in words


def test_ways_read_ahead_record_what_the_worker_looked_at_unless_never_started(tmp_path):
    looked = ({"flashinfer/aot.py": [10, 1, 2]}, {b"gen_moe_utils_module"})
    answer = ({"gen_moe_utils_module": []}, looked)
    release = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        tree, words = TreeFiles(tmp_path), set()
        done = parallel.Ahead(pool.submit(lambda: answer), tree, words)
        assert done() == {"gen_moe_utils_module": []}
        assert (tree.touched, words) == looked
        busy = pool.submit(release.wait)  # the one worker is busy: the next task waits in the queue
        tree, words = TreeFiles(tmp_path), set()
        queued = parallel.Ahead(pool.submit(lambda: answer), tree, words)
        queued.settle()  # never asked for and never started: it never runs, and nothing was looked at
        release.set()
        busy.result()
        assert (tree.touched, words) == ({}, set())


@pytest.mark.parametrize("change", ["edited", "added"])
def test_a_caller_changed_after_a_scan_with_workers_is_read_again(tmp_path, change):
    # what the worker looked at (the caller) and the word it searched for (the map's function) are recorded: a
    # caller edited, or a new file holding the word, is not patched over, and the map record follows the new call
    cache = tmp_path / "cache"
    root = _tree(tmp_path, MAP_FILES)
    for file in root.rglob("*.py"):  # written long before the scan: the cache trusts their stamps
        os.utime(file, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    [before] = [g for g in _records(root, SM110, jobs=2, cache=cache)[0] if g["kind"] == "python_arch_map"]
    assert before["classification"] == "needs-human"
    caller = root / "flashinfer/cute_dsl/attention/mla_decode.py"
    text = caller.read_text().replace('"sm_100"', '"sm_110"')
    if change == "added":
        caller = caller.with_name("mla_decode_sm110.py")
    caller.write_text(text)
    os.utime(caller, ns=(1_600_000_001_000_000_000, 1_600_000_001_000_000_000))
    again = _records(root, SM110, jobs=2, cache=cache)
    assert again == _records(root, SM110, jobs=1)
    [after] = [g for g in again[0] if g["kind"] == "python_arch_map"]
    assert (after["excludes_arch"], after["classification"]) == (True, "blocker")
