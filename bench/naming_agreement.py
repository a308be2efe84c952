"""The lexer namer (codemods.cpp.functions) against tree-sitter's naming, on every `cuda_guard` of the corpus.

For each C file of each tree that holds a guard line (scan's own search:
`#if`-style lines naming an arch macro, outside comments), every guard's
offset is named twice:

- by `functions.enclosing_functions`, the one namer scan and `run` use;
- by the tree-sitter naming scan used before it, kept here as the reference
  only: the file parsed whole (no macro masking, as scan parsed it), the
  innermost `function_definition` holding the offset, its declarator as
  written.

It prints the agreement rate per tree and the disagreements by category with
a few examples each; `--show N` prints more. Files above 4 MB are not parsed by
tree-sitter (one tree of a 50 MB generated header needs > 1 GB; scan left them
unnamed) and are counted apart.

    python bench/naming_agreement.py [TREE ...] [--show N]

Without trees it takes the unpacked corpus wheels from the test cache
(~/.cache/codemod-tests/wheels/unpacked: flashinfer-python 0.6.3 and 0.7.4,
sglang 0.5.8 and 0.5.23, nvidia-cutlass 4.2.0.0).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from codemods.audit.c_files import _guard_lines  # noqa: E402
from codemods.audit.prefilter import ARCH_TOKEN  # noqa: E402
from codemods.cpp import functions, syntax  # noqa: E402
from codemods.cpp.lexer import C_SUFFIXES, Comments, language  # noqa: E402

CORPUS = (
    "flashinfer_python-0.6.3-py3-none-any",
    "flashinfer_python-0.7.4-py3-none-any",
    "sglang-0.5.8-py3-none-any",
    "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64",
    "nvidia_cutlass-4.2.0.0-py3-none-any",
)
TREE_SITTER_MAX = 4 * 1024 * 1024


def _cache() -> Path:
    base = os.environ.get("CODEMOD_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "codemod-tests"
    )
    return Path(base) / "wheels" / "unpacked"


# ---------------------------------------------------------------- the reference: tree-sitter, as scan named before


def _declarator_name(definition) -> str:
    declarator = definition.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    name = declarator.child_by_field_name("declarator") if declarator is not None else None
    return name.text.decode("utf-8", "replace") if name is not None and name.text is not None else ""


def tree_sitter_names(data: bytes, lang: str, offsets: list[int]) -> list[str | None]:
    """The innermost function_definition holding each offset, by descending from the root."""
    tree = syntax.parser(lang).parse(data)
    out: list[str | None] = []
    for offset in offsets:
        innermost = None
        cursor = tree.walk()
        while cursor.goto_first_child_for_byte(offset) is not None:
            node = cursor.node
            if node is None or node.start_byte > offset:
                break
            if node.type == "function_definition":
                innermost = node
        out.append((_declarator_name(innermost) or None) if innermost is not None else None)
    return out


# ---------------------------------------------------------------- comparison


def category(reference: str | None, lexer: str | None) -> str:
    if reference is None:
        return "tree-sitter finds no function, the lexer names one"
    if lexer is None:
        return "tree-sitter names a function, the lexer none"
    if lexer in reference:
        return "tree-sitter's name holds more text (a macro or qualifier glued on)"
    if reference in lexer:
        return "the lexer's name holds more text"
    return "different functions"


def compare(tree: Path, show: int) -> dict:
    counts: Counter = Counter()
    examples: dict[str, list[str]] = defaultdict(list)
    seconds = {"lexer": 0.0, "tree-sitter": 0.0}
    for path in sorted(tree.rglob("*")):
        if not path.name.endswith(C_SUFFIXES) or not path.is_file():
            continue
        data = path.read_bytes()
        if ARCH_TOKEN not in data:
            continue
        offsets = [start for _, _, start, _ in _guard_lines(data, Comments(data))]
        if not offsets:
            continue
        started = time.process_time()
        ours = functions.enclosing_functions(data, offsets)
        seconds["lexer"] += time.process_time() - started
        if len(data) > TREE_SITTER_MAX:
            counts["not compared (file over 4 MB)"] += len(offsets)
            continue
        started = time.process_time()
        theirs = tree_sitter_names(data, language(path.name), offsets)
        seconds["tree-sitter"] += time.process_time() - started
        for offset, reference, lexer in zip(offsets, theirs, ours):
            counts["guards"] += 1
            if reference == lexer:
                counts["agree"] += 1
                continue
            what = category(reference, lexer)
            counts[what] += 1
            if len(examples[what]) < show:
                line = data.count(b"\n", 0, offset) + 1
                examples[what].append(f"{path.relative_to(tree)}:{line}: tree-sitter {reference!r}, lexer {lexer!r}")
    return {"counts": counts, "examples": examples, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--show", type=int, default=5, help="examples per category (default 5)")
    args = parser.parse_args()
    trees = args.trees or [_cache() / name for name in CORPUS]
    total: Counter = Counter()
    for tree in trees:
        result = compare(tree, args.show)
        counts = result["counts"]
        total.update(counts)
        rate = counts["agree"] / counts["guards"] if counts["guards"] else 1.0
        print(f"## {tree.name}: {counts['agree']}/{counts['guards']} agree ({rate:.2%}); "
              f"CPU lexer {result['seconds']['lexer']:.1f} s, tree-sitter {result['seconds']['tree-sitter']:.1f} s")
        for what, n in counts.most_common():
            if what not in ("guards", "agree"):
                print(f"- {what}: {n}")
                for example in result["examples"].get(what, []):
                    print(f"    {example}")
        sys.stdout.flush()
    rate = total["agree"] / total["guards"] if total["guards"] else 1.0
    print(f"## all: {total['agree']}/{total['guards']} agree ({rate:.2%})")


if __name__ == "__main__":
    main()
