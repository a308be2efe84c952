"""Benchmark `codemod scan` against ripgrep and ast-grep on real releases.

Downloads (pip download --no-deps, into a cache folder, default
~/.cache/codemod-bench) FlashInfer 0.6.3 and 0.7.4, SGLang 0.5.8 and 0.5.23
and nvidia-cutlass 4.2.0.0, unpacks them, then runs on that corpus, several
times each:

- `codemod scan --no-cache` (cold), `codemod scan` from an empty cache
  (first: it writes the cache), `codemod scan` with a primed cache (warm),
  and `codemod scan --gates-only --no-cache` (no widenability, no hazards),
  all projects in one command (one `--repo` each);
- `rg` for the tokens the scan's prefilters look for;
- `ast-grep run -p __CUDA_ARCH__ -l cpp` (fewer runs: it takes minutes);
- the parse floor (bench/parse_floor.py, over the cold scan's output):
  `ast.parse` of the Python files with a gate and the lexer naming of the
  guards whose function the scan names, which no scan reporting those
  gates with this design goes below.

It prints a markdown table (median wall time, ratios to rg and ast-grep,
peak RSS of codemod scan) and the recall of codemod's cuda_guard gates
against the guard lines found from rg's matches: every `#if`/`#elif`
(`#ifdef`-style too) logical line, backslash continuations joined, that
names `__CUDA_ARCH__`, `__CUDA_ARCH_SPECIFIC__`, `__CUDA_ARCH_FAMILY_SPECIFIC__`
or `__CUDA_ARCH_FEAT_SM<NN>_ALL`. Nothing it downloads is committed.

    python bench/scan.py [--runs 3] [--ast-grep-runs 1] [--cache DIR] [--jobs 0] [--baseline CHECKOUT]

`--baseline CHECKOUT` also times the cold scan of another checkout of codemod
(say `git worktree add /tmp/base main`) in the same run, for before/after
ratios on a loaded machine.

ripgrep: codemod scan's finder, installed with codemod (`ripgrep==14.1.0`);
ast-grep: `pip install ast-grep-cli`. A missing tool is reported and skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RELEASES = [
    ("flashinfer-python", "0.6.3"),
    ("flashinfer-python", "0.7.4"),
    ("sglang", "0.5.8"),
    ("sglang", "0.5.23"),
    ("nvidia-cutlass", "4.2.0.0"),
]
RG_TOKENS = ["__CUDA_ARCH", "supported_major_versions", "is_sm[0-9]", "is_blackwell", "get_device_capability"]
ARCH_MACRO = r"__CUDA_ARCH__|__CUDA_ARCH_SPECIFIC__|__CUDA_ARCH_FAMILY_SPECIFIC__|__CUDA_ARCH_FEAT_SM[0-9]+_ALL"
_MACRO_RE = re.compile(rb"\b(?:" + ARCH_MACRO.encode() + rb")\b")
_COMMENT_RE = re.compile(rb"/\*.*?\*/|//.*", re.DOTALL)
_DIRECTIVE_RE = re.compile(rb"^(?:\xef\xbb\xbf)?[ \t\f\v]*#[ \t]*(?:if|ifdef|ifndef|elif|elifdef|elifndef)\b")


# ---------------------------------------------------------------- the corpus


def fetch(cache: Path) -> list[Path]:
    """Download and unpack each release once; return the unpacked folders."""
    downloads = cache / "downloads"
    corpus = cache / "corpus"
    downloads.mkdir(parents=True, exist_ok=True)
    folders = []
    for name, version in RELEASES:
        stem = f"{name.replace('-', '_')}-{version}"
        dest = corpus / stem
        if not (dest / ".complete").exists():
            found = _archive(downloads, name, version)
            if found is None:
                subprocess.run(
                    [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(downloads), f"{name}=={version}"],
                    check=True,
                )
                found = _archive(downloads, name, version)
            if found is None:
                raise SystemExit(f"pip download {name}=={version} left no archive in {downloads}")
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            if found.suffix == ".whl" or found.suffix == ".zip":
                with zipfile.ZipFile(found) as archive:
                    archive.extractall(dest)
            else:
                with tarfile.open(found) as archive:
                    archive.extractall(dest, filter="data")
            (dest / ".complete").write_text("ok\n")
        folders.append(dest)
    return folders


def _archive(downloads: Path, name: str, version: str) -> Path | None:
    prefixes = {f"{name.replace('-', '_')}-{version}", f"{name}-{version}"}
    for path in sorted(downloads.iterdir()):
        if any(path.name.lower().startswith(p.lower()) for p in prefixes) and path.name.endswith(
            (".whl", ".tar.gz", ".zip")
        ):
            return path
    return None


# ---------------------------------------------------------------- running and measuring


def _rss_tree(pid: int) -> tuple[int, int]:
    """Resident memory (KiB) of a process and all its descendants, and of the largest of them."""
    total = largest = 0
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            with open(f"/proc/{current}/status") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1])
                        total += rss
                        largest = max(largest, rss)
                        break
            with open(f"/proc/{current}/task/{current}/children") as handle:
                stack += [int(child) for child in handle.read().split()]
        except (OSError, ValueError):
            continue
    return total, largest


def run(command: list[str], env: dict | None = None, out: Path | None = None) -> tuple[float, int, int]:
    """Run once: (wall seconds, peak RSS of the largest process, peak RSS of the process tree), KiB sampled every 20 ms."""
    sink = open(out, "wb") if out is not None else subprocess.DEVNULL
    peak_tree = peak_one = 0
    try:
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.PIPE, env=env)
        done = threading.Event()

        def sample() -> None:
            nonlocal peak_tree, peak_one
            while not done.is_set():
                total, largest = _rss_tree(proc.pid)
                peak_tree, peak_one = max(peak_tree, total), max(peak_one, largest)
                done.wait(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, stderr = proc.communicate()
        wall = time.perf_counter() - started
        done.set()
        sampler.join()
    finally:
        if out is not None:
            sink.close()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command[:4])} ... failed ({proc.returncode}): {stderr.decode()[-2000:]}")
    return wall, peak_one, peak_tree


def find_ast_grep() -> str | None:
    for candidate in (shutil.which("ast-grep"), str(Path(sys.executable).parent / "ast-grep")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None  # not `sg`: on Debian that is shadow's setgroups tool


# ---------------------------------------------------------------- recall


def guard_lines(rg: str, folders: list[Path]) -> set[tuple[str, str, int]]:
    """(repo, file, line) of every #if-style logical line naming an arch macro, from rg's matches."""
    proc = subprocess.run(
        [rg, "-l", "--null", "-e", ARCH_MACRO, *map(str, folders)], capture_output=True, check=False
    )
    found = set()
    for name in proc.stdout.split(b"\0"):
        if not name:
            continue
        path = Path(os.fsdecode(name))
        folder = next(f for f in folders if f == path or f in path.parents)
        data = path.read_bytes()
        lines = data.split(b"\n")
        start = 0
        while start < len(lines):
            end = start
            while lines[end].rstrip(b"\r").endswith(b"\\") and end + 1 < len(lines):
                end += 1
            logical = _COMMENT_RE.sub(b" ", b" ".join(lines[start : end + 1]))  # a macro named in a comment is no guard
            if _DIRECTIVE_RE.match(logical) and _MACRO_RE.search(logical):
                found.add((str(folder), path.relative_to(folder).as_posix(), start + 1))
            start = end + 1
    return found


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "codemod-bench")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ast-grep-runs", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--arch", default="sm_120")
    parser.add_argument("--baseline", type=Path, help="another codemod checkout whose cold scan is timed too")
    args = parser.parse_args()

    folders = fetch(args.cache)
    total = sum(1 for folder in folders for _ in folder.rglob("*"))
    print(f"corpus: {len(folders)} projects, {total} paths under {args.cache / 'corpus'}", file=sys.stderr)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # codemod as pip installs it, its modules compiled (`.pyc`): without, each run compiles some 130 modules again
    # (0.2-0.25 s, a tenth of a warm scan)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "codemods")], check=True, env=env)
    home = Path(tempfile.mkdtemp(prefix="codemod-bench-home-"))
    env["CODEMOD_HOME"] = str(home)
    repos = [arg for folder in folders for arg in ("--repo", str(folder))]
    scan = [sys.executable, "-m", "codemods.cli.app", "scan", *repos, "--arch", args.arch, "--format", "json", "--jobs", str(args.jobs)]
    out = home / "scan.json"

    rows: dict[str, dict] = {}

    def measure(label: str, command: list[str], runs: int, prime: bool = False, output: Path | None = None) -> None:
        if prime:
            run(command, env, output)
        samples = [run(command, env, output) for _ in range(runs)]
        rows[label] = {
            "walls": [s[0] for s in samples],
            "rss": max(s[1] for s in samples),
            "tree": max(s[2] for s in samples),
            "command": command,
        }
        print(f"{label}: {', '.join(f'{s[0]:.2f}s' for s in samples)}", file=sys.stderr)

    measure("codemod scan (cold, --no-cache)", [*scan, "--no-cache"], args.runs, output=out)
    if args.baseline is not None:
        before = {**env, "PYTHONPATH": str(args.baseline.resolve())}
        label = f"baseline {args.baseline.name}: codemod scan (cold, --no-cache)"
        samples = [run([*scan, "--no-cache"], before, home / "baseline.json") for _ in range(args.runs)]
        rows[label] = {"walls": [s[0] for s in samples], "rss": max(s[1] for s in samples), "tree": max(s[2] for s in samples),
                       "command": [*scan, "--no-cache"]}
        print(f"{label}: {', '.join(f'{s[0]:.2f}s' for s in samples)}", file=sys.stderr)
    # the first scan with a cache writes it: each run starts from an empty one
    firsts = []
    for n in range(args.runs):
        fresh = {**env, "CODEMOD_HOME": str(home / f"first-{n}")}
        firsts.append(run(scan, fresh))
    rows["codemod scan (first, empty cache)"] = {
        "walls": [s[0] for s in firsts], "rss": max(s[1] for s in firsts), "tree": max(s[2] for s in firsts), "command": scan,
    }
    print(f"codemod scan (first, empty cache): {', '.join(f'{s[0]:.2f}s' for s in firsts)}", file=sys.stderr)
    measure("codemod scan (warm cache)", scan, args.runs, prime=True)
    measure("codemod scan --gates-only (cold, --no-cache)", [*scan, "--gates-only", "--no-cache"], args.runs)
    # the floor: only the parses the cold scan's gates cannot be found and named without, one process per CPU
    floor = [sys.executable, str(ROOT / "bench" / "parse_floor.py"), str(out), "--repo", str(folders[0])]
    measure("parse floor: ast of the Python files + lexer naming of the C files the gates need (bench/parse_floor.py)", floor, args.runs)
    rg = shutil.which("rg") or shutil.which("rg", path=os.path.dirname(sys.executable))  # the ripgrep wheel: in the venv
    if rg:
        rg_command = [rg, "-n", "--no-heading", *[a for t in RG_TOKENS for a in ("-e", t)], *map(str, folders)]
        measure("rg (same tokens)", rg_command, args.runs)
    else:
        print("rg not found: apt-get install -y ripgrep, or pip install ripgrep", file=sys.stderr)
    ast_grep = find_ast_grep()
    if ast_grep and args.ast_grep_runs > 0:
        measure("ast-grep run -p __CUDA_ARCH__ -l cpp", [ast_grep, "run", "-p", "__CUDA_ARCH__", "-l", "cpp", *map(str, folders)], args.ast_grep_runs)
    elif not ast_grep:
        print("ast-grep not found: pip install ast-grep-cli", file=sys.stderr)

    rg_median = statistics.median(rows["rg (same tokens)"]["walls"]) if "rg (same tokens)" in rows else None
    sg_key = "ast-grep run -p __CUDA_ARCH__ -l cpp"
    sg_median = statistics.median(rows[sg_key]["walls"]) if sg_key in rows else None
    print(f"\n{len(folders)} projects ({', '.join(f.name for f in folders)}); arch {args.arch}; "
          f"{os.cpu_count()} CPUs; medians of the runs shown\n")
    print("| tool | runs | median wall (s) | x rg | ast-grep / this | peak RSS largest process (MB) | peak RSS process tree (MB) |")
    print("|---|---|---|---|---|---|---|")
    for label, row in rows.items():
        median = statistics.median(row["walls"])
        vs_rg = f"{median / rg_median:.1f}x" if rg_median else "-"
        vs_sg = f"{sg_median / median:.1f}x" if sg_median else "-"
        print(f"| {label} | {len(row['walls'])} | {median:.2f} | {vs_rg} | {vs_sg} | {row['rss'] / 1024:.0f} | {row['tree'] / 1024:.0f} |")

    first_key, warm_key = "codemod scan (first, empty cache)", "codemod scan (warm cache)"
    if first_key in rows and warm_key in rows:
        speedup = statistics.median(rows[first_key]["walls"]) / statistics.median(rows[warm_key]["walls"])
        print(f"\nsecond (cached) scan vs the first, which wrote the cache: {speedup:.1f}x faster")

    data = json.loads(out.read_bytes())
    stats = {k: len(v) for k, v in data.items() if isinstance(v, (list, dict))}
    print(f"\ncodemod scan (cold) output: {stats}")
    if args.baseline is not None:
        base = json.loads((home / "baseline.json").read_bytes())
        differing = [key for key in ("gates", "hazards", "skipped", "modules") if base.get(key) != data.get(key)]
        print(f"baseline's output: {'the same gates, hazards, skipped files and modules' if not differing else 'differs in ' + ', '.join(differing)}")
    if rg:
        reference = guard_lines(rg, folders)
        several = len(folders) > 1
        found = {
            (g.get("repo", str(folders[0])) if several else str(folders[0]), g["file"], g["line"])
            for g in data["gates"]
            if g["kind"] == "cuda_guard"
        }
        hit = reference & found
        print(f"recall against rg's guard lines: {len(hit)}/{len(reference)} = {100 * len(hit) / max(1, len(reference)):.2f}%")
        missed = sorted(reference - found)
        for repo, file, line in missed[:20]:
            print(f"  missed: {Path(repo).name}/{file}:{line}")
        extra = sorted(found - reference)
        print(f"cuda_guard gates not among rg's guard lines: {len(extra)}")
        for repo, file, line in extra[:10]:
            print(f"  extra: {Path(repo).name}/{file}:{line}")
        skipped = data.get("skipped", [])
        print(f"skipped files: {len(skipped)}")
        for item in skipped[:10]:
            print(f"  {item.get('repo', '')} {item['file']}: {item['reason']}")
    print("\ncommands:")
    for label, row in rows.items():
        command = row["command"]
        shown = [c if len(c) < 120 else c[:117] + "..." for c in command]
        print(f"  {label}: {' '.join(shown)}")
    print(f"  (codemod runs with PYTHONPATH={ROOT} and CODEMOD_HOME={home})")
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
