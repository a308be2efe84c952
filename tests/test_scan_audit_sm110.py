"""scan as an audit on an arch and release it was not tuned on (issue 18: "we will also check on an audit that is
not named here"): the sm_110 (Jetson Thor) blockers of FlashInfer 0.6.3 that its maintainers fixed later
(tests/audit/sm110_flashinfer.toml) are reported as excluding sm_110, and a seeded random sample of the gates scan
calls blockers or widenable for sm_110 (0.6.3 and 0.6.10) was judged by reading the code
(tests/audit/sm110_sample.toml). Mirrors tests/test_scan_audit.py (sm_121)."""

from __future__ import annotations

import random
import tomllib
from pathlib import Path

import pytest

from codemods.audit.scan import scan
from codemods.core.arch import Arch
from codemods.render.scan_text import groups
from conftest import unpack_wheel

pytestmark = pytest.mark.real

AUDIT = Path(__file__).parent / "audit"


@pytest.fixture(scope="module")
def audit():
    return tomllib.loads((AUDIT / "sm110_flashinfer.toml").read_text())


@pytest.fixture(scope="module")
def sample():
    return tomllib.loads((AUDIT / "sm110_sample.toml").read_text())


@pytest.fixture(scope="module")
def results(sample):
    arch = Arch.parse(sample["arch"])
    return {
        release: scan(unpack_wheel("flashinfer-python", release), arch, jobs=1, cache=None)
        for release in sample["releases"]
    }


def _reported(result, entry) -> bool:
    excluding = {(g["file"], g["line"]) for g in result.gates if g["excludes_arch"]}
    return all((entry["file"], line) in excluding for line in entry["lines"])


def test_the_audit_is_of_the_release_scanned(audit, sample):
    assert audit["arch"] == sample["arch"] == "sm_110" and audit["release"] == sample["releases"][0]


def test_every_blocker_of_the_held_out_audit_is_reported(results, audit):
    result = results[audit["release"]]
    assert [e["id"] for e in audit["blocker"] if not _reported(result, e)] == []  # 5 of 5 items, 5 of 5 gates


def test_at_least_90_percent_of_the_held_out_audit_is_reported(results, audit):
    found = [e for e in audit["blocker"] if _reported(results[audit["release"]], e)]
    assert len(found) / len(audit["blocker"]) >= 0.9


def test_the_held_out_items_are_decorators_scan_cannot_follow_further(results, audit):
    # cuDNN/cuBLAS backends build no JIT module: what sm_110 gets is not followed (unknown), as for sm_121's
    # cudnn-mm-bf16-requirement; they admit no sm_11x, so they are not called specific either
    records = {(g["file"], g["line"]): g for g in results[audit["release"]].gates if g["kind"] == "python_arch_list"}
    for entry in audit["blocker"]:
        [line] = entry["lines"]
        record = records[(entry["file"], line)]
        assert (record["classification"], record["excludes_arch"]) == ("unknown", True), entry["id"]
        assert "sm_110" not in record["admits"]


def _drawn(results, sample) -> tuple[list[tuple[str, str, int]], dict[tuple[str, str, int], str]]:
    judged = {(s["release"], s["file"], s["line"]): s["verdict"] for s in sample["gate"]}
    drawn = []
    for release, result in results.items():
        found = groups(result)
        reported = sorted((g["file"], g["line"]) for name in ("blocker", "widenable") for g in found[name])
        picked = random.Random(sample["seed"]).sample(reported, min(sample["size"], len(reported)))
        drawn += [(release, file, line) for file, line in picked]
    return drawn, judged


def test_every_gate_of_the_random_sample_was_judged_by_reading_the_code(results, sample):
    drawn, judged = _drawn(results, sample)
    assert set(drawn) == set(judged)  # every gate drawn was judged, and nothing else
    real = [key for key in drawn if judged[key] == "real"]
    # 2 reported (1 + 1), all drawn, both real (the trtllm_comm list); before the callers' keys (audit.map_callers)
    # 3, with the compat map whose callers pass "sm_100" (not real); before the cross-family readers
    # (sm110_sample.toml): 20 reported, 0 real: sm_120 and sm_100 modules called widenable for sm_110
    assert (len(real), len(drawn)) == (2, 2)


def test_the_map_whose_callers_pass_another_arch_needs_a_human_not_a_blocker(results):
    [table] = [g for g in results["0.6.10"].gates if (g["file"], g["line"]) == ("flashinfer/cute_dsl/attention/compat.py", 29)]
    assert (table["excludes_arch"], table["classification"]) == (True, "needs-human")
    assert 'mla_decode.py:511 passes "sm_100"' in table["reason"] and "never sees sm_110 today" in table["reason"]


def test_a_random_sample_of_the_blockers_and_widenable_gates_is_at_least_90_percent_real(results, sample):
    drawn, judged = _drawn(results, sample)
    assert len([key for key in drawn if judged[key] == "real"]) / len(drawn) >= 0.9


def test_modules_written_for_another_family_are_not_widenable(results):
    by_line = {(g["file"], g["line"], g["kind"]): g for g in results["0.6.3"].gates}
    for file, line in (("flashinfer/jit/gemm/core.py", 194), ("flashinfer/jit/gemm/core.py", 458),
                       ("flashinfer/jit/fused_moe.py", 238), ("flashinfer/jit/xqa.py", 170)):
        assert by_line[(file, line, "python_arch_list")]["classification"] == "needs-human", (file, line)
    chain = by_line[("flashinfer/gemm/gemm_base.py", 3345, "python_arch_or")]
    assert chain["classification"] == "needs-human" and "gemm_sm120 for sm_120" in chain["reason"]
