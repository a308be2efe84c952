"""Replay upstream FlashInfer gate edits with the recipes under tests/replay/recipes, against a local clone.

For each recipe (by default the BENCH_ONLY ones of tests/replay/replays.py,
which have no PyPI release pair; `--all` for every one), it plans the recipe
on the tree of the upstream commit's parent (read with `git show`, nothing is
checked out or written) and compares each file it changes with the commit's
own: line for line when every line the recipe writes is one upstream wrote
at that place and every line it rewrites is one upstream rewrote there.

    git clone -q /work/.mirror/flashinfer-ai+flashinfer/repo /tmp/fi
    python bench/replay.py --clone /tmp/fi [--all] [--json]

Exit 0 when every replay comes out line for line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "replay"))
sys.path.insert(0, str(HERE.parent))

from replays import BENCH_ONLY, RECIPES, RELEASES, replay  # noqa: E402


def _reader(clone: Path, rev: str):
    def read(rel: str) -> bytes:
        proc = subprocess.run(["git", "-C", str(clone), "show", f"{rev}:{rel}"], capture_output=True)
        if proc.returncode != 0:
            raise FileNotFoundError(rel)
        return proc.stdout

    return read


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clone", type=Path, required=True, help="a local clone of flashinfer-ai/flashinfer")
    parser.add_argument("--all", action="store_true", help="replay every recipe, not only those without a release pair")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from codemods.recipes import load as recipes
    from codemods.recipes.model import ProjectTree

    project = recipes.projects()["flashinfer"]
    layout = next(layout for layout in project.layouts if layout.name == "checkout")
    target = ProjectTree(project, layout, args.clone)
    chosen = {**({k: v[0] for k, v in RELEASES.items()} if args.all else {}), **BENCH_ONLY}
    rows = []
    for recipe_id, commit in sorted(chosen.items()):
        recipe = recipes.load_recipe(RECIPES / f"{recipe_id}.toml")
        result = replay(recipe, target, _reader(args.clone, f"{commit}^"), _reader(args.clone, commit))
        rows.append({"recipe": recipe_id, "commit": commit, **result})
    good = sum(row["line_for_line"] for row in rows)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            verdict = "line for line" if row["line_for_line"] else "DIFFERS"
            print(f"{row['recipe']:<28} {row['commit']}  {verdict}")
            for change, (outcome, reason) in row["outcomes"].items():
                if outcome != "changed":
                    print(f"    {change}: {outcome}: {reason}")
            for file, (added, removed) in row["extra"].items():
                for line in added:
                    print(f"    {file}: + {line.strip()}")
                for line in removed:
                    print(f"    {file}: - {line.strip()}")
        print(f"{good} of {len(rows)} line for line")
    return 0 if good == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
