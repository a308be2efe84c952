"""Where a cold `codemod scan` of the bench corpus spends its time: one process, under cProfile.

Runs `scan_many` over the five-release corpus of bench/scan.py (downloaded
there first) with `jobs=1` and no cache, and prints the functions with the
most own time, then the share of the total spent in the C-file reader
(audit.c_files.analyse_c), the Python-file reader, the prefilter and the
file reads. Figures are CPU-bound, single-process seconds; the ratios
between them are what to read on a loaded machine.

    python bench/scan_profile.py [--cache DIR] [--top 30]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scan import fetch  # noqa: E402  (bench/scan.py)

import codemods.cli  # noqa: E402,F401  (the command's collector settings: without them a profile charges
# ast.parse with the default collector's passes, twice its cost in the command; 2026-12-06 in scan_results.md)
from codemods.audit.scan import scan_many  # noqa: E402
from codemods.core.arch import Arch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "codemod-bench")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    folders = fetch(args.cache)
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    results = scan_many(folders, Arch.parse("sm_120"), jobs=1)
    profile.disable()
    wall = time.perf_counter() - started
    gates = sum(len(r.gates) for r in results)
    print(f"scan_many over {len(folders)} trees, jobs=1, no cache: {wall:.1f} s (under cProfile), {gates} gates")
    stats = pstats.Stats(profile)
    stats.sort_stats("tottime").print_stats(args.top)
    total = stats.total_tt  # type: ignore[attr-defined]
    cumulative = {}
    for (file, _, name), (_, _, _, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
        cumulative[(Path(file).name, name)] = cumulative.get((Path(file).name, name), 0.0) + ct
    print("share of the profiled total, cumulative:")
    for key in [("c_files.py", "analyse_c"), ("python_files.py", "analyse_python"), ("prefilter.py", "may_hold_gates"),
                ("listing.py", "read_regular"), ("listing.py", "list_files"), ("scan.py", "_assemble"),
                ("lexer.py", "find_directives"), ("c_files.py", "cuda_gates"), ("structure.py", "build_structure"),
                ("c_files.py", "_runtime_checks"), ("source.py", "decode")]:
        seconds = cumulative.get(key, 0.0)
        print(f"  {key[0]}:{key[1]:<18} {seconds:7.2f} s  {100 * seconds / total:5.1f}%")


if __name__ == "__main__":
    main()
