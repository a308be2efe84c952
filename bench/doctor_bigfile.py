"""Time `codemod doctor` on a large synthetic SGLang log and report its peak memory.

    python bench/doctor_bigfile.py [--size-mb 1024] [--keep]

Writes a log of about --size-mb megabytes to a temp folder: the healthy TP8
example's start-up, then a long serving phase (decode, prefill and access-log
lines, autotuner skips with native backtraces, a 10 KB config dump now and
then), and one crash at the very end so the whole file has to be read. Then
runs `codemod doctor LOG --format json` in a child process and prints the
wall time, the throughput in MB/s and the child's peak RSS next to the peak
RSS of the same command on a small log. Needs about --size-mb of free disk
(falls back to 200 MB when less than 5 GB is free, and says so).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "examples" / "logs"


def serving_block(rng: random.Random, server_args: str, skip_lines: list[str]) -> str:
    lines = []
    for i in range(20_000):
        ts = f"2026-02-03 {10 + (i // 3600) % 10:02d}:{(i // 60) % 60:02d}:{i % 60:02d}"
        roll = rng.random()
        if roll < 0.72:
            lines.append(
                f"[{ts} TP0] Decode batch, #running-req: {rng.randint(1, 256)}, #token: {rng.randint(1000, 300000)}, "
                f"token usage: 0.{rng.randint(1, 99):02d}, cuda graph: True, gen throughput (token/s): {rng.gauss(3740, 90):.2f}, "
                f"#queue-req: {rng.randint(0, 8)}, "
            )
        elif roll < 0.84:
            lines.append(
                f"[{ts} TP0] Prefill batch, #new-seq: {rng.randint(1, 32)}, #new-token: {rng.randint(1, 32768)}, "
                f"#cached-token: {rng.randint(0, 9000)}, token usage: 0.{rng.randint(1, 99):02d}, "
                f"#running-req: {rng.randint(0, 256)}, #queue-req: {rng.randint(0, 8)}, "
            )
        elif roll < 0.995:
            lines.append(f'[{ts}] INFO:     10.0.{rng.randint(0, 9)}.{rng.randint(1, 254)}:{rng.randint(30000, 60000)} - '
                         f'"POST /v1/chat/completions HTTP/1.1" 200 OK')
        elif roll < 0.9995:
            lines.extend(skip_lines)
        else:
            lines.append(f"[{ts}] {server_args}")
    return "\n".join(lines) + "\n"


def write_log(path: Path, size: int) -> int:
    healthy = (LOGS / "sglang-tp8-healthy.log").read_text()
    patched = (LOGS / "sglang-tp8-sm120-patched.log").read_text().splitlines()
    server_args = healthy.splitlines()[0].split("] ", 1)[1]
    start = next(i for i, line in enumerate(patched) if "Skipping tactic" in line)
    skip_lines = patched[start:start + 5]  # one skip and its native backtrace
    crash = (LOGS / "sglang-tp8-sm120-crash.log").read_text()
    crash = crash[crash.index("[2026-02-03 09:13:13 TP6] Scheduler hit an exception"):]
    rng = random.Random(1)
    blocks = [serving_block(rng, server_args, skip_lines).encode() for _ in range(4)]
    written = 0
    with open(path, "wb") as f:
        head = healthy.encode()
        f.write(head)
        written += len(head)
        i = 0
        while written < size:
            block = blocks[i % len(blocks)]
            f.write(block)
            written += len(block)
            i += 1
        tail = crash.encode()
        f.write(tail)
        written += len(tail)
    return written


def run_doctor(log: Path) -> tuple[float, float, dict, int]:
    """Wall seconds, CPU seconds, parsed JSON, peak RSS (KiB) of one `codemod doctor` child."""
    code = (
        "import resource, sys\n"
        "from codemods.cli.app import main\n"
        "try:\n    main()\n"
        "finally:\n"
        "    u = resource.getrusage(resource.RUSAGE_SELF)\n"
        "    print(u.ru_maxrss, u.ru_utime + u.ru_stime, file=sys.stderr)\n"
    )
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, "doctor", str(log), "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"codemod doctor failed ({proc.returncode}):\n{proc.stderr}")
    rss, cpu = proc.stderr.strip().splitlines()[-1].split()
    return elapsed, float(cpu), json.loads(proc.stdout), int(rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--keep", action="store_true", help="keep the generated log")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="doctor-bigfile-"))
    free = shutil.disk_usage(tmp).free
    size_mb = args.size_mb
    if free < 5 * 1024**3:
        size_mb = min(size_mb, 200)
        print(f"only {free / 1024**3:.1f} GB free in {tmp}: using {size_mb} MB", file=sys.stderr)
    try:
        log = tmp / "big.log"
        t0 = time.perf_counter()
        written = write_log(log, size_mb * 1024**2)
        print(f"wrote {written / 1024**2:.0f} MB to {log} in {time.perf_counter() - t0:.1f} s")
        small_s, _, _, small_rss = run_doctor(LOGS / "sglang-tp8-healthy.log")
        big_s, big_cpu, report, big_rss = run_doctor(log)
        t = report["throughput"]
        print(f"small log ({(LOGS / 'sglang-tp8-healthy.log').stat().st_size / 1024:.0f} KB): {small_s:.2f} s, peak RSS {small_rss / 1024:.0f} MB")
        print(f"big log   ({written / 1024**2:.0f} MB, {report['lines']:,} lines): {big_s:.1f} s wall, {big_cpu:.1f} s CPU "
              f"({written / 1024**2 / big_s:.0f} MB/s), peak RSS {big_rss / 1024:.0f} MB")
        print(f"  verdict {report['verdict']} (fatal at line {report['fatal']['line']:,}: {report['fatal']['message']}); "
              f"{t['samples']:,} throughput samples, median {t['median']}; {report['autotuner_skips']:,} autotuner skips")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
