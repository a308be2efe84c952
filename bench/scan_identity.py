"""Is `codemod scan`'s output still byte for byte what it was? Save a baseline, then compare against it.

    python bench/scan_identity.py save DIR [--arch sm_120] [--formats text,json,sarif] [--tree PATH ...]
    python bench/scan_identity.py compare DIR [--codemod PATH]

`save` runs `codemod scan --repo TREE --arch ARCH --no-cache --format F` (cold: no cache read or written) for
each tree and format and keeps each output, with the settings, in DIR. `compare` runs the same commands again
(with this checkout's codemod, or `--codemod`) and compares each output with the saved one byte for byte. It
lists every difference: for JSON, the gates, hazards and skipped files added, removed or changed (by file, line
and kind, with the fields that changed); for text and SARIF, the first lines of a unified diff. Exit status 0
when every output is identical, 1 when one differs.

The trees default to the corpus of bench/scan.py (FlashInfer 0.6.3 and 0.7.4, SGLang 0.5.8 and 0.5.23,
nvidia-cutlass 4.2.0.0), unpacked once by the tests' wheel cache (tests/conftest.py `unpack_wheel`, which
downloads the wheel if it is missing). Each command's wall time is printed, so a baseline run is also a
before/after measurement.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = [
    ("flashinfer-python", "0.6.3"),
    ("flashinfer-python", "0.7.4"),
    ("sglang", "0.5.8"),
    ("sglang", "0.5.23"),
    ("nvidia-cutlass", "4.2.0.0"),
]
FORMATS = ("text", "json", "sarif")
_SUFFIX = {"text": "txt", "json": "json", "sarif": "sarif"}


def corpus() -> list[Path]:
    """The five releases, unpacked in the tests' wheel cache."""
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import unpack_wheel  # noqa: PLC0415 - the tests' one downloader, under its lock

    return [unpack_wheel(dist, version) for dist, version in CORPUS]


def run_scan(codemod: str, tree: Path, arch: str, fmt: str, jobs: int) -> tuple[bytes, float, int]:
    """One cold scan: (stdout, wall seconds, exit code)."""
    command = [codemod, "scan", "--repo", str(tree), "--arch", arch, "--no-cache", "--format", fmt]
    if jobs:
        command += ["--jobs", str(jobs)]
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, env={**os.environ, "NO_COLOR": "1"})
    return proc.stdout, time.perf_counter() - started, proc.returncode


def _name(tree: Path, fmt: str) -> str:
    return f"{tree.name}.{_SUFFIX[fmt]}"


def save(folder: Path, trees: list[Path], arch: str, formats: list[str], codemod: str, jobs: int) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    settings = {"arch": arch, "formats": formats, "trees": [str(tree) for tree in trees], "codemod": codemod, "runs": []}
    for tree in trees:
        for fmt in formats:
            output, seconds, code = run_scan(codemod, tree, arch, fmt, jobs)
            (folder / _name(tree, fmt)).write_bytes(output)
            settings["runs"].append({"tree": tree.name, "format": fmt, "seconds": round(seconds, 2), "exit": code})
            print(f"{tree.name} {fmt}: {seconds:.2f} s, exit {code}, {len(output)} bytes", flush=True)
    (folder / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    return 0


def compare(folder: Path, codemod: str | None, jobs: int, only: list[str] | None, formats: list[str] | None = None) -> int:
    settings = json.loads((folder / "settings.json").read_text())
    codemod = codemod or settings["codemod"]
    before = {(run["tree"], run["format"]): run for run in settings["runs"]}
    differing = 0
    for tree in map(Path, settings["trees"]):
        if only and tree.name not in only:
            continue
        for fmt in settings["formats"]:
            if formats and fmt not in formats:
                continue
            output, seconds, code = run_scan(codemod, tree, settings["arch"], fmt, jobs)
            saved = (folder / _name(tree, fmt)).read_bytes()
            was = before.get((tree.name, fmt), {})
            timing = f"{was.get('seconds', '?')} s -> {seconds:.2f} s"
            if output == saved and code == was.get("exit", code):
                print(f"{tree.name} {fmt}: identical ({timing})", flush=True)
                continue
            differing += 1
            print(f"{tree.name} {fmt}: DIFFERS ({timing}, exit {was.get('exit')} -> {code})", flush=True)
            for line in differences(saved, output, fmt):
                print("    " + line)
    return 1 if differing else 0


def differences(old: bytes, new: bytes, fmt: str, limit: int = 40) -> list[str]:
    """What changed between two outputs, at most `limit` lines."""
    if fmt == "json":
        try:
            return _json_differences(json.loads(old), json.loads(new))[:limit]
        except ValueError:
            pass
    diff = difflib.unified_diff(
        old.decode(errors="replace").splitlines(), new.decode(errors="replace").splitlines(), "before", "after", lineterm="", n=1
    )
    return list(diff)[:limit]


def _json_differences(old: dict, new: dict) -> list[str]:
    lines: list[str] = []
    for section in sorted(set(old) | set(new)):
        a, b = old.get(section), new.get(section)
        if a == b:
            continue
        if not (isinstance(a, list) and isinstance(b, list)):
            lines.append(f"{section}: {json.dumps(a)[:200]} -> {json.dumps(b)[:200]}")
            continue
        keyed_a, keyed_b = _keyed(a), _keyed(b)
        for key in sorted(set(keyed_a) | set(keyed_b), key=str):
            x, y = keyed_a.get(key), keyed_b.get(key)
            if x == y:
                continue
            if x is None:
                lines.append(f"{section} added {key}: {json.dumps(y)[:300]}")
            elif y is None:
                lines.append(f"{section} removed {key}: {json.dumps(x)[:300]}")
            elif isinstance(x, dict) and isinstance(y, dict):
                for name in sorted(set(x) | set(y)):
                    if x.get(name) != y.get(name):
                        lines.append(f"{section} {key} {name}: {json.dumps(x.get(name))[:200]} -> {json.dumps(y.get(name))[:200]}")
            else:
                lines.append(f"{section} {key}: {json.dumps(x)[:200]} -> {json.dumps(y)[:200]}")
        if not lines or not lines[-1].startswith(section):
            lines.append(f"{section}: same items, other order")
    return lines


def _keyed(items: list) -> dict:
    """Items by (file, line, kind), numbered when a key repeats, so a list's order does not hide what changed."""
    keyed: dict = {}
    for item in items:
        base = (item.get("file"), item.get("line"), item.get("kind")) if isinstance(item, dict) else (json.dumps(item),)
        key, number = base, 1
        while key in keyed:
            number += 1
            key = (*base, number)
        keyed[key] = item
    return keyed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["save", "compare"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--arch", default="sm_120")
    parser.add_argument("--formats", default=",".join(FORMATS), help="save: the formats; compare: only these")
    parser.add_argument("--tree", action="append", type=Path, help="a tree to scan (repeatable; default: the corpus)")
    parser.add_argument("--only", action="append", help="compare: only the trees with this folder name (repeatable)")
    parser.add_argument("--codemod", help="the codemod command (default: the one beside this Python)")
    parser.add_argument("--jobs", type=int, default=0)
    args = parser.parse_args()
    default = str(Path(sys.executable).with_name("codemod"))
    if args.action == "save":
        formats = [fmt for fmt in args.formats.split(",") if fmt]
        unknown = set(formats) - set(FORMATS)
        if unknown:
            parser.error(f"unknown formats {sorted(unknown)}; pick from {', '.join(FORMATS)}")
        return save(args.folder, args.tree or corpus(), args.arch, formats, args.codemod or default, args.jobs)
    only_formats = [fmt for fmt in args.formats.split(",") if fmt] if "--formats" in sys.argv else None
    return compare(args.folder, args.codemod or default, args.jobs, args.only, only_formats)


if __name__ == "__main__":
    sys.exit(main())
