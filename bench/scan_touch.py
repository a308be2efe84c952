"""How long `codemod scan` takes after one file of a warm tree changes (issue 35, decision 5).

    python bench/scan_touch.py TREE [--codemod CMD] [--runs 3] [--change HOW:REL ...] [--check-cold]

Copies TREE (an unpacked FlashInfer wheel, say) to a temporary folder, keeping the stamps, and gives codemod a
cache of its own there ($CODEMOD_HOME). It primes the cache with one scan, times a warm scan (nothing changed),
then for each change: makes it (stamped now, as an editor would), times the scan that follows (`--verbose`
says whether the last result was patched: `incremental True`), and puts the file back and scans once more so
the next change starts warm. HOW is `touch` (same bytes, new stamp) or `append` (a comment line at the end: `//`
for C, `#` for Python). `--check-cold` also compares each scan's JSON with a cold scan's (`--no-cache`).
The median of `--runs` timings is printed as a markdown table, with `uptime` before and after.

The default changes are FlashInfer's: a header a JIT module compiles (touched, then edited), a header no
module compiles (fmha_v2's, whose sources are computed at JIT time), and the package's `utils.py` (Python,
with gates).

`--codemod` runs another checkout (a script that runs its `python -m codemods`), for before/after numbers.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_CHANGES = [
    "touch:flashinfer/data/include/flashinfer/attention/prefill.cuh",
    "append:flashinfer/data/include/flashinfer/attention/prefill.cuh",
    "append:flashinfer/data/csrc/fmha_v2/fmha/hopper/utils_qgmma.h",
    "append:flashinfer/utils.py",
]


def timed(command: list[str], env: dict) -> tuple[float, bytes, str]:
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, env=env, check=False)
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return seconds, proc.stdout, proc.stderr.decode()


def change(path: Path, how: str) -> bytes:
    """Make the change; return the bytes to put back."""
    original = path.read_bytes()
    if how == "append":
        comment = b"# codemod bench\n" if path.suffix == ".py" else b"// codemod bench\n"
        path.write_bytes(original + (b"" if original.endswith(b"\n") else b"\n") + comment)
    elif how == "touch":
        os.utime(path)
    else:
        raise SystemExit(f"unknown change {how!r}: touch or append")
    return original


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path)
    parser.add_argument("--codemod", default=str(Path(sys.executable).with_name("codemod")))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--arch", default="sm_120")
    parser.add_argument("--change", action="append", help="HOW:REL (repeatable; default: FlashInfer's four)")
    parser.add_argument("--check-cold", action="store_true")
    args = parser.parse_args()
    changes = [item.split(":", 1) for item in args.change or DEFAULT_CHANGES]
    print(f"uptime before: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    with tempfile.TemporaryDirectory(prefix="scan-touch-") as work:
        copy = Path(work) / args.tree.name
        shutil.copytree(args.tree, copy, symlinks=True)  # copy2: stamps kept, so the cache trusts them
        env = {**os.environ, "CODEMOD_HOME": str(Path(work) / "home"), "NO_COLOR": "1"}
        scan = [args.codemod, "scan", "--repo", str(copy), "--arch", args.arch, "--format", "json", "--verbose"]
        first, _, _ = timed(scan, env)
        rows = [("first scan (writes the cache)", [first], "")]
        warm = [timed(scan, env)[0] for _ in range(args.runs)]
        rows.append(("warm, nothing changed", warm, ""))
        for how, rel in changes:
            path = copy / rel
            times, modes, same = [], set(), []
            for _ in range(args.runs):
                original = change(path, how)
                seconds, output, stderr = timed(scan, env)
                times.append(seconds)
                modes.add("patched" if "incremental True" in stderr else "assembled")
                if args.check_cold:
                    cold = timed([*scan, "--no-cache"], env)[1]
                    same.append(cold == output)
                if how == "append":
                    path.write_bytes(original)
                timed(scan, env)  # warm again for the next run
            note = "/".join(sorted(modes)) + (f", JSON = cold: {all(same)}" if same else "")
            rows.append((f"{how} {rel}", times, note))
    print(f"uptime after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    print(f"\n{args.tree.name}, `{args.codemod}`, {args.runs} runs\n")
    print("| scan after | median wall (s) | runs (s) | how |")
    print("|---|---|---|---|")
    for name, times, note in rows:
        print(f"| {name} | {statistics.median(times):.2f} | {', '.join(f'{t:.2f}' for t in times)} | {note} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
