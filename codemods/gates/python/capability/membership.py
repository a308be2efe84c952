"""How a file writes its membership tests' literal collections: the brackets a new one takes."""

from __future__ import annotations

import ast


def membership_brackets(tree: ast.AST, default: str = "") -> tuple[str, str]:
    """The brackets a file writes its membership tests' literal collections in: `[`/`]` when more of its
    one-line `in`/`not in` collections of constants (numbers or strings) are lists than tuples, `(`/`)` when
    fewer; on a tie or with none, `default` ("list" or "tuple": for numbers, the project's
    targets/projects/*.toml `[style] number_membership`), else a tuple.

    One-line ones only, the shape of the test being written: SGLang 0.5.10's deepseek_v2.py has `not in
    ["correction_bias"]` and a black-exploded tuple of quantization names, and upstream wrote `_device_sm in
    [100, 103]`; 0.5.15's unquant.py has only an exploded `in [` list of activation names, and upstream wrote
    `not in (9, 12)`. FlashInfer writes numbers in lists (0.6.10: 64 of 75 one-line ones in the package, 32 of
    37 in its tests; beebc6074 and b9720052f wrote `not in [10, 11, 12]` in test files with none) but strings
    either way (9a463df0d wrote `not in ("sm_120", "sm_121")` in a file with none); SGLang has no one style
    across releases (0.5.9 mostly lists, 0.5.20 mostly tuples), so its files with none get a tuple.
    """
    counts = membership_counts(tree)
    if counts["list"] != counts["tuple"]:
        return ("[", "]") if counts["list"] > counts["tuple"] else ("(", ")")
    return ("[", "]") if default == "list" else ("(", ")")


def membership_counts(tree: ast.AST, numbers: bool = False) -> dict[str, int]:
    """How many one-line `in`/`not in` literal collections of constants `tree` writes as lists and as tuples
    (of numbers only, with `numbers`)."""
    counts = {"list": 0, "tuple": 0}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators):
                if (
                    isinstance(op, (ast.In, ast.NotIn))
                    and isinstance(right, (ast.List, ast.Tuple))
                    and right.elts
                    and right.lineno == right.end_lineno
                    and all(isinstance(e.operand if isinstance(e, ast.UnaryOp) else e, ast.Constant) for e in right.elts)
                    and not (numbers and any(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in right.elts))
                ):
                    counts["list" if isinstance(right, ast.List) else "tuple"] += 1
    return counts
