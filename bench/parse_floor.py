"""The parse floor of a cold `codemod scan`: only the parses its output cannot be made without, nothing else.

Given the JSON of a cold `codemod scan --format json` (bench/scan.py writes
one), it parses, in one process per CPU as scan's workers run:

- with the stdlib `ast` (which the issue prescribes to locate Python gates),
  every Python file the scan reports a gate in: a gate is not found without
  parsing its file;
- with the lexer namer (codemods.cpp.functions, the one scan and `run` name functions with since 2026-12-05),
  every C file in which the scan names the function around a `cuda_guard`, asked for those guards' lines:
  the floor of today's design, which names functions without a parse.

Files a scan parses and finds nothing in are left out, so this is a lower
bound: no scan that reports these gates with these parsers goes below it.

    python bench/parse_floor.py SCAN.json [--jobs 0]

It prints the files and megabytes parsed and the CPU seconds; bench/scan.py
times it beside rg and the scan, so the floor and the targets are read in
one run.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import codemods.cli  # noqa: E402,F401  (the collector settings the command runs with; its workers fork with them)
from codemods.audit.prefilter import is_c_file  # noqa: E402


def _parse(job: tuple[str, str, tuple[int, ...]]) -> tuple[int, float]:
    """(bytes, CPU seconds) of one file's floor: `py` parsed with ast, a C file's guards named by the lexer."""
    path, how, lines = job
    data = Path(path).read_bytes()
    started = time.process_time()
    if how == "py":
        try:
            ast.parse(data)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    else:
        from codemods.cpp import functions

        # line starts at C speed (split, map, accumulate): a Python loop over every byte cost more than the naming
        ends = list(itertools.accumulate(map(len, data.split(b"\n")))) if lines else []
        starts = [0] + [end + n for n, end in enumerate(ends[:-1], 1)]
        functions.enclosing_functions(data, [starts[min(line, len(starts)) - 1] for line in lines])
    return len(data), time.process_time() - started


def jobs_of(scan: dict, folder: str) -> list[tuple[str, str, tuple[int, ...]]]:
    """The work the scan's gates need: (path, "py" / "c", the lines of its named guards)."""
    out: dict[str, tuple[str, list[int]]] = {}
    for gate in scan["gates"]:
        path = os.path.join(gate.get("repo", folder), gate["file"])
        if gate["kind"].startswith("python_"):
            out[path] = ("py", [])
        elif gate["kind"] == "cuda_guard" and gate.get("symbol") and is_c_file(gate["file"]):
            out.setdefault(path, ("c", []))[1].append(gate["line"])
    return sorted((path, how, tuple(sorted(lines))) for path, (how, lines) in out.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scan", type=Path, help="the JSON of `codemod scan --format json`")
    parser.add_argument("--repo", default=".", help="the tree of a one-tree scan (its gates name no repo)")
    parser.add_argument("--jobs", type=int, default=0)
    args = parser.parse_args()
    work = jobs_of(json.loads(args.scan.read_bytes()), args.repo)
    with ProcessPoolExecutor(max_workers=args.jobs or os.cpu_count() or 1) as pool:
        results = list(pool.map(_parse, work, chunksize=8))
    for how, label in (("py", "ast.parse"), ("c", "lexer naming")):
        picked = [r for (_, kind, _), r in zip(work, results) if kind == how]
        print(f"{label}: {len(picked)} files, {sum(r[0] for r in picked) / 1e6:.1f} MB, {sum(r[1] for r in picked):.1f} s CPU")


if __name__ == "__main__":
    main()
