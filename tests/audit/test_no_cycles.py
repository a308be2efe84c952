"""A scan leaves no syntax tree in a reference cycle.

The scan runs with the collector's passes far apart (codemods/cli sets the thresholds): a parsed module
reachable only from a cycle (a nested function that calls itself keeps its closure, and with it whatever
the closure holds) would stay in memory until a full pass, and every pass would walk it. So no walk that
calls itself is a nested function (tests/test_package_shape.py), and these scans, run with the collector
off, leave no `ast` node, source text or tree index behind them for it to find.
"""

from __future__ import annotations

import ast
import gc
import shutil
from collections import Counter
from pathlib import Path

import pytest
from test_jit_users import SM121, moe_tree
from test_map_callers import SM110, _tree
from test_parallel import MAP_FILES

from codemods.audit.scan import scan
from codemods.core.arch import Arch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HELD = ("PythonText", "TreeIndex", "Pruned", "Lines")  # what a reader's closure holds a tree through


def _example(name: str):
    def build(root: Path) -> Path:
        shutil.copytree(EXAMPLES / name, root / name)
        return root / name

    return build


def _left_in_cycles(run) -> Counter:
    """The syntax trees and texts that only a reference cycle keeps after `run()`, by type."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        return Counter(type(o).__name__ for o in gc.garbage if isinstance(o, ast.AST) or type(o).__name__ in HELD)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()


@pytest.mark.parametrize(
    ("build", "arch"),
    [
        pytest.param(_example("flashinfer"), Arch.parse("sm_120"), id="flashinfer-example"),
        pytest.param(_example("sglang"), Arch.parse("sm_120"), id="sglang-example"),
        pytest.param(_example("vllm"), Arch.parse("sm_120"), id="vllm-example"),
        pytest.param(lambda root: _tree(root, MAP_FILES), SM110, id="map-callers"),
        pytest.param(moe_tree, SM121, id="ways-into-a-spec"),
    ],
)
def test_a_scan_leaves_no_tree_in_a_cycle(tmp_path, build, arch):
    root = build(tmp_path)
    results = []
    left = _left_in_cycles(lambda: results.append(scan(root, arch, jobs=1)))
    assert results[0].gates  # the readers ran
    assert left == Counter()
