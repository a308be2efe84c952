"""Replay every upstream gate edit of tests/replay/replays.py and print the score: how many come out line for line.

Each replay plans its recipe on the earlier tree and judges every file it
changes against upstream's (replays.replay: every line the recipe writes is one
upstream wrote at that place, every line it rewrites one upstream rewrote
there). Replays with a PyPI release pair run on the wheels (downloaded once
into the test cache, as the `real` tests do); the others, and with `--all`
every FlashInfer replay again, run against a local FlashInfer clone (the
commit's parent against the commit, read with `git show`; nothing is checked
out or written).

    git clone -q /work/.mirror/flashinfer-ai+flashinfer/repo /tmp/fi
    python bench/replay.py --clone /tmp/fi [--all] [--json] [--only RECIPE ...]

Exit 0 when every replay not marked `fails` comes out line for line, and every
one marked `fails` still does not (so the list stays honest both ways).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "replay"))
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))

from replays import RECIPES, REPLAYS, on_release_pair, replay  # noqa: E402


def _reader(clone: Path, rev: str):
    def read(rel: str) -> bytes:
        proc = subprocess.run(["git", "-C", str(clone), "show", f"{rev}:{rel}"], capture_output=True)
        if proc.returncode != 0:
            raise FileNotFoundError(rel)
        return proc.stdout

    return read


def _on_clone(entry, clone: Path) -> dict:
    from codemods.recipes import load as recipes
    from codemods.recipes.model import ProjectTree

    project = recipes.projects()["flashinfer"]
    layout = next(layout for layout in project.layouts if layout.name == "checkout")
    target = ProjectTree(project, layout, clone)
    recipe = recipes.load_recipe(RECIPES / f"{entry.recipe}.toml")
    parent = _reader(clone, f"{entry.commit}^")
    was = dict(entry.moved)  # a file the commit also moved is read at the parent's path

    def before(rel: str) -> bytes:
        return parent(was.get(rel, rel))

    return replay(recipe, target, before, _reader(clone, entry.commit), force=bool(entry.force))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clone", type=Path, help="a local clone of flashinfer-ai/flashinfer (for replays without a release pair)")
    parser.add_argument("--all", action="store_true", help="also replay every FlashInfer commit against the clone")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", action="append", default=[], metavar="RECIPE",
                        help="replay only this recipe (repeatable); the score then counts these alone")
    args = parser.parse_args()

    from conftest import fetch_wheel

    rows = []
    unknown = sorted(set(args.only) - {entry.recipe for entry in REPLAYS})
    if unknown:
        parser.error(f"not in tests/replay/replays.py: {', '.join(unknown)}")
    for entry in REPLAYS:
        if args.only and entry.recipe not in args.only:
            continue
        runs = []
        if entry.releases:
            runs.append((f"{entry.releases[0]} -> {entry.releases[1]}", lambda e=entry: on_release_pair(e, fetch_wheel)))
        if entry.commit and args.clone and (args.all or not entry.releases):
            runs.append((f"{entry.commit}^ -> {entry.commit}", lambda e=entry: _on_clone(e, args.clone)))
        if not runs:
            rows.append({"recipe": entry.recipe, "on": f"{entry.commit} (no --clone)", "run": False, "named": entry.named, "fails": entry.fails,
                         "beyond_archs": entry.beyond_archs})
        for on, run in runs:
            result = run()
            rows.append({"recipe": entry.recipe, "on": on, "run": True, "named": entry.named, "fails": entry.fails,
                         "beyond_archs": entry.beyond_archs, **result})

    ran = [row for row in rows if row["run"]]
    good = [row for row in ran if row["line_for_line"]]
    beyond = [row for row in ran if not row["named"]]
    surprises = [row for row in ran if row["line_for_line"] == bool(row["fails"])]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            if not row["run"]:
                print(f"{row['recipe']:<32} {row['on']:<22}  not run")
                continue
            verdict = "line for line" if row["line_for_line"] else "DIFFERS"
            print(f"{row['recipe']:<32} {row['on']:<22}  {verdict}{'  (expected: ' + row['fails'] + ')' if row['fails'] else ''}")
            for change, (outcome, reason) in row["outcomes"].items():
                if outcome != "changed":
                    print(f"    {change}: {outcome}: {reason}")
            for file, (added, removed) in row["extra"].items():
                for line in added:
                    print(f"    {file}: + {line.strip()}")
                for line in removed:
                    print(f"    {file}: - {line.strip()}")
        print(
            f"score: {len(good)} of {len(ran)} replays line for line"
            f" ({sum(r['line_for_line'] for r in beyond)} of {len(beyond)} beyond the edits issue 17 names);"
            f" {len(rows) - len(ran)} not run"
        )
        mechanical = [row for row in ran if not row["beyond_archs"]]
        done = sum(row["line_for_line"] for row in mechanical)
        print(
            f"mechanical gate edits (issue 17: nothing else changed on their lines): {done} of {len(mechanical)} line for line"
            f" ({100 * done / max(1, len(mechanical)):.1f}%); apart: "
            + "; ".join(f"{row['recipe']} ({row['beyond_archs']})" for row in ran if row["beyond_archs"])
        )
        for row in surprises:
            print(f"unexpected: {row['recipe']} on {row['on']}: {'line for line, but listed as failing' if row['line_for_line'] else 'differs'}")
    return 0 if not surprises else 1


if __name__ == "__main__":
    sys.exit(main())
