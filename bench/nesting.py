"""Benchmark codemod on hostile C/CUDA nesting: wall time and peak RSS.

Rows:
- `run --dry-run` of sm120-enable on the example FlashInfer tree whose header
  ends with N nested `#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200` levels
  (every level a gate to widen), N = 1,000, 2,000 and 10,000;
- the same with one widenable guard around N nested `#ifdef FOO` (hazard
  regions walk the nest), N = 10,000;
- `scan --no-cache --jobs 1` of the 10,000-level tree;
- `recipe test` of a recipe whose one case holds 200,000 guards (flat, 22 MB).

Each command runs in its own process (RUSAGE_CHILDREN gives its peak RSS);
the trees are generated under a temporary folder and removed afterwards.

    python bench/nesting.py [--levels 1000,2000,10000] [--guards 200000] [--skip-recipe]

Measured on the shared 2-CPU box (load ~1.7), before -> after the fixes of issue 13:
  run --dry-run, 1k nested levels: 7 s -> 0.9 s (69 MB); 2k: 62 s -> 1.0 s (72 MB);
  10k: did not finish -> 2.6 s (91 MB); one gate around 10k nested #ifdef: RecursionError -> 0.9 s;
  scan of the 10k nest: 1.0 s (a 5k #ifdef nest took 36 s);
  recipe test with 200k guards: 261 s and 1.16 GB (under load) -> 54 s and 758 MB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"
NESTED = b"#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200\n"
GUARD = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))\n"
WIDENED = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))\n"
ENV = {
    **os.environ,
    "PYTHONPATH": str(ROOT),
    "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}  # fmt: skip


def nested_tree(dest: Path, levels: int, inner_ifdef: bool = False) -> Path:
    shutil.copytree(ROOT / "examples" / "flashinfer", dest)
    header = dest / HEADER
    if inner_ifdef:
        nest = NESTED + b"#ifdef FOO\n" * levels + b"  cudaGridDependencySynchronize();\n" + b"#endif\n" * (levels + 1)
    else:
        nest = NESTED * levels + b"  cudaGridDependencySynchronize();\n" + b"#endif\n" * levels
    header.write_bytes(header.read_bytes() + nest)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=dest, env=ENV, check=True)
    return dest


def many_guards_recipe(path: Path, guards: int) -> Path:
    before = (GUARD + "  cudaGridDependencySynchronize();\n#endif\n") * guards
    path.write_text(
        'id = "many-guards"\nsummary = "bench"\narch = "sm_120"\n\n'
        '[[change]]\nid = "flashinfer.guards"\nproject = "flashinfer"\n'
        'file = "{include}/flashinfer/comm/trtllm_allreduce.cuh"\nkind = "cuda_guard"\nadmits = ["sm_90", "sm_100"]\n\n'
        f'[[test]]\nname = "many"\nchange = "flashinfer.guards"\nbefore = """\n{before}"""\n'
        f'after = """\n{before.replace(GUARD, WIDENED)}"""\n'
    )
    return path


def measure(label: str, *args: str) -> None:
    script = (
        "import resource, subprocess, sys, time\n"
        "start = time.perf_counter()\n"
        "proc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
        "wall = time.perf_counter() - start\n"
        "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(proc.returncode, f'{wall:.2f}', f'{usage.ru_utime + usage.ru_stime:.2f}', usage.ru_maxrss // 1024)\n"
        "sys.stderr.write(proc.stderr[-500:] if proc.returncode else '')\n"
    )
    command = [sys.executable, "-c", "from codemods.cli.app import main; main()", *args]
    out = subprocess.run([sys.executable, "-c", script, *command], env=ENV, capture_output=True, text=True)
    code, wall, cpu, rss = out.stdout.split()
    print(f"| {label} | {code} | {wall} | {cpu} | {rss} |", flush=True)
    if out.stderr:
        print(out.stderr, file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1000,2000,10000")
    parser.add_argument("--guards", type=int, default=200_000)
    parser.add_argument("--skip-recipe", action="store_true")
    options = parser.parse_args()
    print("| case | exit | wall s | cpu s | peak RSS MB |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="codemod-bench-nesting-") as tmp:
        home = {"CODEMOD_HOME": str(Path(tmp) / "home")}
        os.environ.update(home)
        ENV.update(home)
        levels = [int(n) for n in options.levels.split(",") if n]
        for n in levels:
            tree = nested_tree(Path(tmp) / f"nested-{n}", n)
            measure(f"run --dry-run, {n:,} nested #if (each a gate)", "run", "sm120-enable", "--repo", str(tree), "--dry-run")
        deepest = max(levels, default=0)
        if deepest:
            tree = nested_tree(Path(tmp) / f"ifdef-{deepest}", deepest, inner_ifdef=True)
            measure(f"run --dry-run, one gate around {deepest:,} nested #ifdef", "run", "sm120-enable", "--repo", str(tree), "--dry-run")
            measure(f"scan --no-cache --jobs 1, {deepest:,} nested #if", "scan", "--repo", str(Path(tmp) / f"nested-{deepest}"), "--no-cache", "--jobs", "1")
        if not options.skip_recipe:
            started = time.perf_counter()
            recipe = many_guards_recipe(Path(tmp) / "many-guards.toml", options.guards)
            print(f"(recipe written in {time.perf_counter() - started:.1f} s)", file=sys.stderr)
            measure(f"recipe test, one case of {options.guards:,} guards", "recipe", "test", str(recipe))


if __name__ == "__main__":
    main()
