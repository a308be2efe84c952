"""Upstream gate edits replayed by recipes under tests/replay/recipes, and how a replay is judged.

Each recipe was written from the README alone, for one FlashInfer commit that
only widened gates (plus comments, messages and unrelated code around them).
`RELEASES` names the last PyPI release without the commit and the first with
it, for the `real` tests; `BENCH_ONLY` are the commits with no such pair
(the release is not on PyPI as a py3-none-any wheel, or no release holds the
commit yet), replayed by bench/replay.py against a local clone.
"""

from __future__ import annotations

import difflib
from collections import Counter
from pathlib import Path
from typing import Callable

RECIPES = Path(__file__).parent / "recipes"

# recipe id: (upstream commit, release before, first release with it)
RELEASES = {
    "nvfp4-attention-sm121": ("0f69698c7", "0.6.15", "0.6.16"),
    "cublaslt-bf16-sm80-up": ("27e035e2a", "0.6.14", "0.6.15"),
    "sm121-sm120-guards": ("dd417a502", "0.6.4", "0.6.5"),
    "router-gemm-sm103": ("2234bf76f", "0.6.7", "0.6.8"),
    "mxfp8-gemm-sm120": ("fe0539318", "0.6.7", "0.6.8"),
    "cudnn-bf16-sm87-up": ("4b02655f1", "0.6.10", "0.6.11"),
    "bmm-fp8-sm110": ("002087cfd", "0.6.3", "0.6.4"),
    "cudnn-bmm-bf16-sm80-up": ("f6717ff6b", "0.6.11", "0.6.12"),
    "cudnn-bmm-mxfp8-sm110-up": ("f6717ff6b", "0.6.11", "0.6.12"),
    "cudnn-bf16-sm80": ("e7f630c80", "0.6.7", "0.6.8"),
    "xqa-sm110": ("54101e953", "0.5.2", "0.5.3"),
}
BENCH_ONLY = {
    "b12x-fp4-gemm-sm121": "06cb1b764",  # 0.6.8 has no b12x backend yet; 0.6.9 is the first with both
    "cute-dsl-moe-sm120": "eb52e19ec",  # 0.6.9 also holds 8a9970b45, which narrowed these lists again
    "cutlass-fp8-gemm-sm120": "90abf04e4",  # 0.3.0 / 0.3.1: no py3-none-any wheel on PyPI
    "xqa-sm121": "5854494a0",  # 0.4.1: no py3-none-any wheel on PyPI
    "mm-fp4-sm121": "a5ff03391",  # 0.4.1 likewise
    "svdquant-sm107": "a6dfe70b7",  # after v0.6.17, the last release tag of the clone
    "cute-dsl-sm107": "f09227492",  # likewise
}
NAMED = {"nvfp4-attention-sm121", "cublaslt-bf16-sm80-up", "sm121-sm120-guards", "cutlass-fp8-gemm-sm120", "xqa-sm121"}


NEAR = 3


def extra_lines(before: bytes, ours: bytes, upstream: bytes) -> tuple[list[str], list[str]]:
    """Lines our edit adds and removes that upstream's edit of the same place does not: both empty is line for line.

    Both edits are aligned to the earlier file (difflib): each line we remove
    must be a line upstream also changed there, and each line we add must be
    among the lines upstream wrote there (within NEAR lines of it).
    """
    b, o, u = (data.decode("utf-8").splitlines() for data in (before, ours, upstream))
    theirs = [op for op in difflib.SequenceMatcher(None, b, u, autojunk=False).get_opcodes() if op[0] != "equal"]
    extra_added: list[str] = []
    extra_removed: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, b, o, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        # upstream's edits at this place: overlapping ours, or within NEAR lines (an alignment may split a hunk)
        touching = [op for op in theirs if op[1] <= i2 + NEAR and i1 - NEAR <= op[2]]
        written = Counter(line for op in touching for line in u[op[3] : op[4]])
        changed = {i for op in touching for i in range(op[1], op[2])}
        extra_removed += [b[i] for i in range(i1, i2) if i not in changed]
        extra_added += list((Counter(o[j1:j2]) - written).elements())
    return sorted(extra_added), sorted(extra_removed)


def replay(recipe, target, read_before: Callable[[str], bytes], read_upstream: Callable[[str], bytes]) -> dict:
    """Plan `recipe` on the earlier tree and judge each file it changes against upstream's."""
    from codemods.plan import planner

    plan = planner.plan(recipe, target, read=read_before)
    outcomes = {c.id: (c.outcome, c.reason) for c in plan.changes}
    files: dict[str, tuple[bytes, bytes]] = {}
    for change in plan.changes:
        if change.outcome == "changed":
            first = files.get(change.file, (change.before, change.before))[0]
            files[change.file] = (first, change.after)
    judged = {}
    for file, (before, ours) in files.items():
        judged[file] = extra_lines(before, ours, read_upstream(file))
    line_for_line = all(o == "changed" for o, _ in outcomes.values()) and all(not a and not r for a, r in judged.values())
    return {"outcomes": outcomes, "extra": judged, "line_for_line": line_for_line}


# Python-gate replays (python_arch_test, python_arch_or with predicates read from source), with the
# release pair each is checked on in test_replay_real.py: (recipe, (dist, before, after)).
PYTHON_REPLAYS = [
    ("fi-fmha-v2-deepseek-sm121", ("flashinfer-python", "0.6.3", "0.6.4")),  # 9e5ec6a0c
    ("fi-nvfp4-attention-aot-sm121", ("flashinfer-python", "0.6.15", "0.6.16")),  # 0f69698c7
    ("sg-mxfp4-marlin-sm120", ("sglang", "0.5.12", "0.5.13")),
    ("sg-deepgemm-ue8m0-sm121", ("sglang", "0.5.20", "0.5.21")),  # python_capability: get_device_sm() == 120
    ("sg-bf16-gemv-sm12x", ("sglang", "0.5.22", "0.5.23")),  # python_capability: [0] != 9 -> not in (9, 12)
    ("sg-mxfp4-marlin-moe-sm12x", ("sglang", "0.5.13", "0.5.14")),  # python_arch_test: not P -> not P and not Q
]
