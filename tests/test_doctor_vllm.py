"""doctor on vLLM server logs (examples/logs/vllm-*.log): the FlashInfer JIT refusing SM12x is a crash with the same
cause and remedy as SGLang's, and the fusion disabled for want of a size-table row is a known warning with its fix."""

from __future__ import annotations

import json

from conftest import EXAMPLES

REFUSED = EXAMPLES / "logs" / "vllm-tp4-sm120-fusion-jit-refused.log"
NO_ROW = EXAMPLES / "logs" / "vllm-tp4-sm120-fusion-size-missing.log"
COMMAND = "codemod run sm120-enable --package vllm --package flashinfer"


def test_the_jit_refusal_is_a_crash_with_the_recipe_as_remedy(cli):
    result = cli("doctor", REFUSED)
    assert result.exit_code == 1, result.output
    assert result.output.startswith("verdict: crashed (line 16:")
    assert "(vllm-jit-gate-excludes-major-9-10)" in result.output
    assert "cause: vLLM turned FlashInfer's allreduce fusion on" in result.output
    assert "remedy: Upgrade to FlashInfer 0.6.17 or later first." in result.output
    assert f"run: {COMMAND}" in result.output


def test_the_missing_row_is_a_known_warning_on_a_server_that_is_ready(cli):
    result = cli("doctor", NO_ROW, "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["verdict"] == "ready" and report["fatal"] is None
    assert report["benign"] == {"vllm-fusion-size-missing": 4}
    known = report["known"]["vllm-fusion-size-missing"]
    assert known["cause"].startswith("FI_ALLREDUCE_FUSION_MAX_SIZE_MB has no row for this GPU's capability")
    assert known["remedy"].startswith("Upgrade to FlashInfer 0.6.17 or later first.") and known["command"] == COMMAND
    text = cli("doctor", NO_ROW)
    assert "known: (vllm-fusion-size-missing)\n  cause: FI_ALLREDUCE_FUSION_MAX_SIZE_MB" in text.output
    assert f"  run: {COMMAND}" in text.output


def test_the_same_failure_in_sglang_keeps_sglangs_rule(cli):
    """vLLM's rules come first but match only vLLM's process prefixes: SGLang's log keeps its own rule and remedy."""
    result = cli("doctor", EXAMPLES / "logs" / "sglang-tp4-sm120-capture-arch-9-10.log")
    assert "(jit-gate-excludes-major-9-10)" in result.output and "--package vllm" not in result.output
