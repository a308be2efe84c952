"""How many runs, and how much CPU, the predicate reader spends evaluating the definitions of a release.

    python bench/predicate_classes.py [--repeat 3] [DIST==VERSION ...]

For each release (default: FlashInfer 0.7.4 and SGLang 0.5.23, unpacked by the tests' wheel cache,
tests/conftest.py `unpack_wheel`) it parses every Python file that mentions `_sm` or `capabilit` once, then
reads the predicates twice as scan does: each file alone, then each file with every meaning the first pass found
as `known` (python.predicates.reading.read_tree). It prints the number of runs of a definition on one capability
(the `run` calls of `Evaluator._on_every_cap`, counted in a separate pass), and the best over `--repeat`
repetitions of the CPU time (process time) of the two passes, parsing left out, and of its part spent running
definitions (inside the outermost `_on_every_cap`; the rest is the reader's walk of each tree and its search for
the definitions that may depend on the GPU). Run it on an older checkout with `PYTHONPATH=TREE`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import unpack_wheel  # noqa: E402

from codemods.gates.python import ast_text  # noqa: E402
from codemods.gates.python.predicates import evaluation, reading  # noqa: E402

RELEASES = ["flashinfer-python==0.7.4", "sglang==0.5.23"]


def _trees(dist: str, version: str) -> list[tuple[str, object]]:
    root = unpack_wheel(dist, version)
    out = []
    for path in sorted(root.rglob("*.py")):
        source = path.read_bytes()
        if b"_sm" in source or b"capabilit" in source:
            try:
                out.append((path.name, ast_text.ast_of(source)))
            except (SyntaxError, ValueError):
                continue
    return out


def _read_twice(trees) -> int:
    reading._last_read = None
    first = [reading.read_tree(tree, name) for name, tree in trees]
    known = {key: meaning for meanings in first for key, meaning in meanings.items()}
    second = [reading.read_tree(tree, name, known) for name, tree in trees]
    return sum(len(m) for m in second)


def _timed(trees) -> tuple[float, float]:
    """CPU seconds of `_read_twice`, and of its runs of definitions."""
    spent = 0.0
    depth = 0
    original = evaluation.Evaluator._on_every_cap

    def timed(self, run):
        nonlocal spent, depth
        depth += 1
        start = time.process_time()
        try:
            return original(self, run)
        finally:
            depth -= 1
            if depth == 0:
                spent += time.process_time() - start

    evaluation.Evaluator._on_every_cap = timed  # type: ignore[method-assign]
    try:
        start = time.process_time()
        _read_twice(trees)
        return time.process_time() - start, spent
    finally:
        evaluation.Evaluator._on_every_cap = original  # type: ignore[method-assign]


def _runs(trees) -> int:
    count = 0
    original = evaluation.Evaluator._on_every_cap

    def counted(self, run):
        def counting(cap):
            nonlocal count
            count += 1
            return run(cap)

        return original(self, counting)

    evaluation.Evaluator._on_every_cap = counted  # type: ignore[method-assign]
    try:
        _read_twice(trees)
    finally:
        evaluation.Evaluator._on_every_cap = original  # type: ignore[method-assign]
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("releases", nargs="*", default=RELEASES)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for release in args.releases:
        dist, version = release.split("==")
        trees = _trees(dist, version)
        runs = _runs(trees)
        meanings = _read_twice(trees)
        total, running = min(_timed(trees) for _ in range(args.repeat))
        print(
            f"{dist} {version}: {len(trees)} files, {meanings} meanings, {runs} runs;"
            f" {total:.2f} s CPU reading, {running:.2f} s of it running definitions (best of {args.repeat})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
