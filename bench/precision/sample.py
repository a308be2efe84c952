"""Draw the issue-34 precision sample of `codemod scan` advice on SGLang.

Rule (fixed before any item was seen): scan the unpacked wheel with
`codemod scan --repo DIR --arch ARCH --format json --no-cache`, keep the gates
classified `blocker` or `widenable` (any area), drop the four items issue 34
names (matched by file, function and text, so the same gates are dropped in
both releases), sort by (file, line), and draw 20 with
`random.Random(SEED).sample` (all of them when fewer than 20 remain).
Writes one markdown skeleton per release next to this script: file:line,
group, reason, the gate's line and 3 lines either side; the verdicts are
written into those files by hand afterwards.

    python bench/precision/sample.py [--unpacked DIR] [--codemod PATH] [--suffix -after-fix]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

SEED = 20261204
SIZE = 20
GROUPS = ("blocker", "widenable")
HERE = Path(__file__).resolve().parent
DEFAULT_UNPACKED = Path.home() / ".cache/codemod-tests/wheels/unpacked"
CASES = (
    ("sglang-0.5.8", "sglang-0.5.8-py3-none-any", "sm_120"),
    ("sglang-0.5.23", "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64", "sm_121"),
)
# The four items issue 34 names: (file suffix, function, text fragment).
NAMED = (
    ("interface.py", "is_hopper", "(9, 0)"),
    ("attention_registry.py", "create_flashattention_v3_backend", ""),
    ("flashinfer_backend.py", "__init__", "is_sm100_supported"),
    ("extend_attention.py", "", "CUDA_CAPABILITY[1] == 9"),
)


def is_named(gate: dict) -> bool:
    return any(
        gate["file"].endswith(suffix)
        and (not symbol or gate.get("symbol") == symbol)
        and fragment in gate["text"]
        for suffix, symbol, fragment in NAMED
    )


def scan(codemod: str, root: Path, arch: str) -> dict:
    out = subprocess.run(
        [codemod, "scan", "--repo", str(root), "--arch", arch, "--format", "json", "--no-cache"],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode not in (0, 1):
        sys.exit(f"codemod scan failed ({out.returncode}): {out.stderr}")
    return json.loads(out.stdout)


def context(root: Path, gate: dict, around: int = 3) -> str:
    lines = (root / gate["file"]).read_text(encoding="utf-8", errors="replace").splitlines()
    line = gate["line"]
    lo, hi = max(1, line - around), min(len(lines), line + around)
    return "\n".join(
        f"{'>' if n == line else ' '}{n:5d}  {lines[n - 1]}" for n in range(lo, hi + 1)
    )


def draw(gates: list[dict]) -> tuple[list[dict], int, int]:
    pool = [g for g in gates if g["classification"] in GROUPS]
    named = [g for g in pool if is_named(g)]
    pool = sorted((g for g in pool if not is_named(g)), key=lambda g: (g["file"], g["line"]))
    picked = random.Random(SEED).sample(pool, min(SIZE, len(pool)))
    return picked, len(pool), len(named)


def skeleton(name: str, arch: str, root: Path, gates: list[dict]) -> str:
    picked, population, named = draw(gates)
    head = [
        f"# Precision sample: {name}, `codemod scan --arch {arch}`",
        "",
        f"Rule: bench/precision/sample.py, seed {SEED}. Population: {population} blocker/widenable "
        f"items ({named} of the issue's named items left out); sample: {len(picked)}.",
        "",
        "Verdict: **real** = widening the gate would make the arch run code meant for it, or it "
        "really blocks; **false** = otherwise.",
        "",
        "Score: TODO",
        "",
    ]
    body = []
    for n, gate in enumerate(picked, 1):
        body += [
            f"## {n}. `{gate['file']}:{gate['line']}` ({gate['classification']}, {gate['area']})",
            "",
            f"- gate: `{gate['text']}` in `{gate.get('symbol') or '<module>'}`",
            f"- reason: {gate.get('reason') or '(none)'}",
            "",
            "```",
            context(root, gate),
            "```",
            "",
            "Verdict: TODO",
            "",
        ]
    return "\n".join(head + body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unpacked", type=Path, default=DEFAULT_UNPACKED)
    parser.add_argument("--codemod", default=str(Path(sys.executable).with_name("codemod")))
    parser.add_argument("--suffix", default="", help="added to the file names (`-after-fix`): a later draw, same rule")
    args = parser.parse_args()
    for name, folder, arch in CASES:
        root = args.unpacked / folder
        report = scan(args.codemod, root, arch)
        out = HERE / f"{name}-{arch}{args.suffix}.md"
        out.write_text(skeleton(name, arch, root, report["gates"]), encoding="utf-8")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
