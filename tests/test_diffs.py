"""Diffs built from edits must apply with `git apply` and give exactly `after`."""

from __future__ import annotations

import random
import subprocess

import pytest

from codemods.render.diff import unified_diff
from codemods.gates import Edit, apply_edits

LINES = [b"alpha\n", b"#if X\n", b"  call();\n", b"#endif\n", b"\n", b"beta\r\n", b"gamma"]


def random_case(rng: random.Random):
    before = b"".join(rng.choice(LINES[:-1]) for _ in range(rng.randint(0, 30))) + rng.choice([b"", LINES[-1]])
    points = sorted(rng.sample(range(len(before) + 1), k=min(len(before) + 1, rng.randint(1, 6) * 2)))
    edits = []
    for i in range(0, len(points) - 1, 2):
        start, end = points[i], points[i + 1]
        if rng.random() < 0.3:
            end = start
        edits.append(Edit(start, end, rng.choice([b"", b"x", b"new line\n", b"\n", b" || Y"])))
    return before, edits


@pytest.mark.parametrize("use_edits", [True, False], ids=["from-edits", "difflib"])
@pytest.mark.parametrize("seed", range(25))
def test_patch_applies(tmp_path, seed, use_edits):
    rng = random.Random(seed)
    for case in range(10):
        before, edits = random_case(rng)
        after = apply_edits(before, edits)
        if before == after:
            continue
        work = tmp_path / f"{case}"
        work.mkdir()
        (work / "f.txt").write_bytes(before)
        (work / "p.diff").write_text(unified_diff("f.txt", before, after, edits if use_edits else None), errors="surrogateescape")
        subprocess.run(["git", "apply", "--unidiff-zero", "p.diff"], cwd=work, check=True, capture_output=True)
        assert (work / "f.txt").read_bytes() == after, (before, edits)


def test_large_file_diff_from_edits(tmp_path):
    body = b"".join(b"line %d\n" % i for i in range(200_000))
    step = len(body) // 50
    edits = [Edit(start, start + 4, b"LINE") for start in range(step, len(body) - step, step)]
    after = apply_edits(body, edits)
    diff = unified_diff("big.h", body, after, edits)
    assert diff.count("@@ -") == len(edits)
    (tmp_path / "big.h").write_bytes(body)
    (tmp_path / "p.diff").write_text(diff)
    subprocess.run(["git", "apply", "p.diff"], cwd=tmp_path, check=True)
    assert (tmp_path / "big.h").read_bytes() == after


def test_lines_an_edit_spans_but_leaves_alone_are_context():
    """A directive continued over three lines gains one term on its last line (round 11 bug 12: the diff removed and
    re-added all three, where `git diff` shows one changed line)."""
    before = b"#if defined(A) || \\\n    defined(B) || \\\n    defined(C)\nx\n#endif\n"
    start = before.index(b"defined(A)")
    end = before.index(b"defined(C)") + len(b"defined(C)")
    after_text = before[start:end] + b" || defined(D)"
    edits = [Edit(start, end, after_text)]
    diff = unified_diff("g.h", before, apply_edits(before, edits), edits)
    assert [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))] == [
        "-    defined(C)", "+    defined(C) || defined(D)"
    ]
