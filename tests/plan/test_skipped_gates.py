"""A gate codemod cannot evaluate, which may have the change's shape, is never passed over in silence.

A guard nested 1,000 parentheses deep does not parse (scan calls it unknown):
`run` leaves it alone, names it as skipped with the reason in the text and the
JSON plan, and widens the gates it can read.
"""

from __future__ import annotations

import json

import jsonschema

from conftest import git

HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"
GUARD = "(defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"
DEPTH = 1000


def deep_repo(example_repo):
    repo = example_repo("flashinfer")
    path = repo / HEADER
    text = path.read_text()
    assert text.count(f"\n#if {GUARD}\n") == 4
    path.write_text(text.replace(f"\n#if {GUARD}\n", f"\n#if {'(' * DEPTH}{GUARD}{')' * DEPTH}\n", 1))
    git(repo, "commit", "-qam", "a guard nested deeper than codemod reads")
    return repo


def test_run_names_the_gate_it_skipped_and_why(cli, example_repo):
    repo = deep_repo(example_repo)
    line = next(i for i, text in enumerate((repo / HEADER).read_text().splitlines(), 1) if text.startswith("#if ((("))
    result = cli("run", "sm120-enable", "--repo", repo, "--dry-run")
    assert result.exit_code == 0, result.output
    shown = [text for text in result.output.splitlines() if text.startswith(f"  {HEADER}:{line}  ")]
    assert len(shown) == 1 and "(skipped: cannot tell whether it admits sm_90, sm_100 (the change's shape), so it is left as it is: cannot parse the condition" in shown[0]
    assert "widen it by hand)" in shown[0]
    assert sum(text.startswith(f"  {HEADER}:") and "->" in text for text in result.output.splitlines()) == 3, "the three readable guards are widened"

    data = json.loads(cli("run", "sm120-enable", "--repo", repo, "--dry-run", "--format", "json").stdout)
    jsonschema.validate(data, json.loads(cli("schema", "run").stdout))
    (plan,) = data["results"]
    rows = [g for change in plan["changes"] for g in change["gates"] if g["file"] == HEADER and g["line"] == line]
    assert len(rows) == 1 and rows[0]["outcome"] == "skipped" and rows[0]["after"] is None
    assert rows[0]["reason"].startswith("cannot tell whether it admits sm_90, sm_100")

    assert cli("run", "sm120-enable", "--repo", repo).exit_code == 0
    assert f"#if {'(' * DEPTH}{GUARD}" in (repo / HEADER).read_text(), "left byte for byte"
