"""CPU seconds of the commands people wait on, beside the floor of a stdlib `ast.parse` of the same files.

    PYTHONPATH=. python bench/commands.py [--runs 5] [--only run-flashinfer,run-sglang,list,verify]

Issue 14's targets: `run sm120-enable` on FlashInfer 0.6.3 (git checkout
layout) <= 1 s and on SGLang 0.5.8 <= 2 s, `list` <= 0.4 s (CPU: user+sys,
children included, git's too), cold `verify` on FlashInfer 0.6.3 <= 15 s
(wall). Each command runs in a fresh process on a fresh copy of the tree
(the copy is not timed, and its git index is refreshed untimed: a copy's
files have new inode and change times, so the index's stat data no longer
match them and git would re-read every file, which a user's own checkout
does not make it do); the figure is the median of the runs, with the
largest peak RSS. codemod's own modules are byte-compiled first, as `pip
install` leaves them, and the timed processes run with
PYTHONDONTWRITEBYTECODE unset: with it set, every run would compile
codemod's sources again, which no installed copy does. The trees come from the release wheels (tests/conftest.py's
cache, downloaded once). A benchmark, not a test: the numbers depend on the
machine and its load.
"""

from __future__ import annotations

import argparse
import ast
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import flashinfer_checkout, init_repo, unpack_wheel  # noqa: E402

CLI = [sys.executable, "-c", "from codemods.cli.app import main; main()"]
TARGETS = {"run-flashinfer": 1.0, "run-sglang": 2.0, "list": 0.4, "verify": 15.0}


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float, int, int]:
    """(CPU seconds with children, wall seconds, peak RSS in MB, exit code) of one process."""
    started = time.monotonic()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr.read() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)  # this process and the children it reaped (git, nvcc)
    wall = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        print(f"  exit {code}: {stderr.strip().splitlines()[-1:]}", file=sys.stderr)
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss // 1024, code


def _ast_floor(root: Path, files: list[str]) -> float:
    """CPU seconds of reading and `ast.parse`-ing the files the recipe edits: what any Python reader pays."""
    started = time.process_time()
    for rel in files:
        ast.parse((root / rel).read_bytes())
    return time.process_time() - started


def _trees(temp: Path) -> dict[str, tuple[Path, list[str]]]:
    flashinfer = init_repo(flashinfer_checkout(unpack_wheel("flashinfer-python", "0.6.3"), temp / "fi"))
    sglang = temp / "sg"
    shutil.copytree(unpack_wheel("sglang", "0.5.8") / "sglang", sglang / "python" / "sglang",
                    ignore=shutil.ignore_patterns("__pycache__"))
    init_repo(sglang)
    return {
        "flashinfer": (flashinfer, ["flashinfer/jit/comm.py"]),
        "sglang": (sglang, ["python/sglang/srt/layers/communicator.py", "python/sglang/srt/server_args.py"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default=",".join(TARGETS))
    args = parser.parse_args()
    wanted = args.only.split(",")
    with tempfile.TemporaryDirectory(prefix="bench-commands-") as name:
        temp = Path(name)
        trees = _trees(temp)
        compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "codemods"), quiet=1)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["CODEMOD_HOME"] = str(temp / "home")
        print(f"{'command':<16} {'median CPU s':>12} {'median wall s':>13} {'peak RSS MB':>11} {'target':>8}  floor")
        for label in wanted:
            project = {"run-flashinfer": "flashinfer", "run-sglang": "sglang", "verify": "flashinfer"}.get(label)
            cpus, walls, rss = [], [], 0
            for run in range(args.runs):
                root = None
                if project:
                    root = temp / f"{label}-{run}"
                    shutil.copytree(trees[project][0], root, symlinks=True)
                    subprocess.run(["git", "-C", str(root), "update-index", "-q", "--refresh"], check=False)
                command = {
                    "list": [*CLI, "list"],
                    "run-flashinfer": [*CLI, "run", "sm120-enable", "--repo", str(root)],
                    "run-sglang": [*CLI, "run", "sm120-enable", "--repo", str(root)],
                    "verify": [*CLI, "verify", "--repo", str(root), "--arch", "sm_120"],
                }[label]
                if label == "verify":
                    subprocess.run([*CLI, "run", "sm120-enable", "--repo", str(root)], env=env, capture_output=True)
                    env = {**env, "CODEMOD_HOME": str(temp / f"home-{run}")}  # cold: no cached base
                cpu, wall, peak, _ = _timed(command, env)
                cpus.append(cpu)
                walls.append(wall)
                rss = max(rss, peak)
            floor = ""
            if project and label != "verify":
                tree, files = trees[project]
                floor = f"ast.parse of {len(files)} file(s): {_ast_floor(tree, files):.3f} s"
            figure = statistics.median(walls if label == "verify" else cpus)
            verdict = "ok" if figure <= TARGETS[label] else "MISSED"
            print(f"{label:<16} {statistics.median(cpus):>12.2f} {statistics.median(walls):>13.2f} {rss:>11} "
                  f"{TARGETS[label]:>6.1f} s {verdict}  {floor}")


if __name__ == "__main__":
    main()
