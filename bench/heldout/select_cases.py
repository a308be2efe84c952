"""Select the held-out cases of a time split by the written rule of bench/heldout/README.md, before anyone looks.

It prints each case's id, project, files and changed-line count, never their content, and writes them to --out.

    python bench/heldout/select_cases.py --flashinfer /path/to/flashinfer.git --since 2026-12-04 \
        --sglang-after 0.5.23 --out bench/heldout/cases.json
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

SUFFIXES = (".py", ".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc")
ARCH_LINE = re.compile(
    r"__CUDA_ARCH(?:_FEAT_SM\w*|_SPECIFIC__|_FAMILY_SPECIFIC__|__)"
    r"|supported_major_versions|get_compute_capability|get_device_capability|device_capability"
    r"|\bmajor\s*(?:==|>=|<=|<|>|!=|in\b)|\bsm_version\b|\bsm_?\d{2,3}[af]?\b"
    r"|\bis_(?:sm\d+\w*|hopper|blackwell|ampere)\b"
    r"|(?:capability|cc|arch)\w*\s*(?:==|>=|<=|<|>)\s*\(\s*\d+\s*,\s*\d+\s*\)"
)
MAX_CASES = 40


def wanted(path: str) -> bool:
    return path.endswith(SUFFIXES) and not path.startswith("3rdparty/") and "/3rdparty/" not in path


def changed_gate_lines(diff_lines: list[str]) -> int:
    """How many removed or added lines of a unified diff touch an arch gate."""
    return sum(1 for line in diff_lines if line[:1] in "+-" and not line.startswith(("+++", "---")) and ARCH_LINE.search(line))


def flashinfer_cases(repo: Path, since: str) -> list[dict]:
    log = subprocess.run(
        ["git", "-C", str(repo), "log", "--all", "--no-merges", f"--since={since}", "--reverse", "--format=%H %cI"],
        check=True, capture_output=True, text=True,
    ).stdout.split("\n")
    cases = []
    for entry in filter(None, log):
        sha, date = entry.split(" ", 1)
        if date[:10] <= since:  # --since is inclusive of the split day; the split day belongs to development
            continue
        names = subprocess.run(["git", "-C", str(repo), "show", "--format=", "--name-only", sha], capture_output=True, text=True).stdout.split()
        files = [n for n in names if wanted(n)]
        if not files:
            continue
        diff = subprocess.run(
            ["git", "-C", str(repo), "show", "--format=", "--unified=0", sha, "--", *files], capture_output=True, text=True, errors="replace"
        ).stdout.splitlines()
        hits = changed_gate_lines(diff)
        if hits:
            cases.append({"id": f"flashinfer@{sha[:12]}", "project": "flashinfer", "date": date, "files": files, "gate_lines": hits})
    return cases


def _versions(dist: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", dist], capture_output=True, text=True).stdout
    found = re.search(r"Available versions: (.*)", out)
    return [v.strip() for v in found.group(1).split(",")] if found else []


def _key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.]", version.replace("post", "")))


def _files(wheel: Path) -> dict[str, list[str]]:
    with zipfile.ZipFile(wheel) as z:
        return {
            n: z.read(n).decode("utf-8", "replace").splitlines(keepends=True)
            for n in z.namelist() if wanted(n) and ".dist-info/" not in n
        }


def sglang_cases(after: str, cache: Path) -> list[dict]:
    newer = sorted((v for v in _versions("sglang") if _key(v) > _key(after)), key=_key)
    if not newer:
        return []
    chain = [after, *newer]
    wheels = {}
    for version in chain:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(cache), f"sglang=={version}"], check=True)
        wheels[version] = next(p for p in cache.glob("sglang-*.whl") if p.name.split("-")[1] == version)
    cases = []
    for old, new in zip(chain, chain[1:]):
        before, after_files = _files(wheels[old]), _files(wheels[new])
        touched, hits = [], 0
        for name in sorted(set(before) | set(after_files)):
            diff = list(difflib.unified_diff(before.get(name, []), after_files.get(name, []), n=0))
            n = changed_gate_lines([line.rstrip("\n") for line in diff])
            if n:
                touched.append(name)
                hits += n
        if hits:
            cases.append({"id": f"sglang@{old}..{new}", "project": "sglang", "files": touched, "gate_lines": hits})
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flashinfer", type=Path, required=True, help="a FRESH fetch of flashinfer-ai/flashinfer (a git directory)")
    parser.add_argument("--since", required=True, help="the split date, YYYY-MM-DD (README.md)")
    parser.add_argument("--sglang-after", required=True, help="the newest SGLang release of the development set")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    cases = flashinfer_cases(args.flashinfer, args.since)
    with tempfile.TemporaryDirectory() as cache:
        cases += sglang_cases(args.sglang_after, Path(cache))
    cases = cases[:MAX_CASES]
    for case in cases:
        print(f"{case['id']:40} {case['project']:10} {case['gate_lines']:4} line(s)  {len(case['files'])} file(s)")
    print(f"{len(cases)} case(s) after {args.since}", file=sys.stderr)
    args.out.write_text(json.dumps({"since": args.since, "sglang_after": args.sglang_after, "cases": cases}, indent=1) + "\n")


if __name__ == "__main__":
    main()
