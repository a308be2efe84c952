"""scan as an audit (issue 18) on a real FlashInfer release: the sm_121 blockers its maintainers fixed later
(tests/audit/sm121_flashinfer.toml) are reported as excluding sm_121, the arch-specific ones first, and every
gate of a seeded random sample of those scan calls blockers or widenable there was judged by reading the code
(tests/audit/sm121_sample.toml), at least 90% of them real."""

from __future__ import annotations

import random
import tomllib
from pathlib import Path

import pytest

from codemods.core.arch import Arch
from codemods.audit.scan import scan
from codemods.render.sarif import to_sarif
from codemods.render.scan_json import to_json
from codemods.render.scan_text import groups, to_text
from conftest import unpack_wheel

pytestmark = pytest.mark.real

AUDIT = Path(__file__).parent / "audit"


@pytest.fixture(scope="module")
def audit():
    return tomllib.loads((AUDIT / "sm121_flashinfer.toml").read_text())


@pytest.fixture(scope="module")
def result(audit):
    root = unpack_wheel("flashinfer-python", audit["release"])
    return scan(root, Arch.parse(audit["arch"]), jobs=1, cache=None)


def _reported(result, entry) -> bool:
    excluding = {(g["file"], g["line"]) for g in result.gates if g["excludes_arch"]}
    return all((entry["file"], line) in excluding for line in entry["lines"])


def test_every_blocker_the_current_readers_can_see_is_reported(result, audit):
    readable = [entry for entry in audit["blocker"] if not entry["needs"]]
    assert readable and [e["id"] for e in readable if not _reported(result, e)] == []


# The items the definition readers find: a predicate's deciding return (python_predicate, read by
# gates/python/predicates/reading) and an arch-keyed map whose lookup raises (python_arch_map; its callers pass "sm_100" only,
# so it needs a human rather than blocks: audit.map_callers).
DEFINITION_ITEMS = {"is-sm120f-supported", "tmem-alloc-columns-map"}


def test_at_least_90_percent_of_the_audit_is_reported(result, audit):
    found = [entry for entry in audit["blocker"] if _reported(result, entry)]
    assert len(found) / len(audit["blocker"]) >= 0.9


def test_the_recall_today_is_what_the_audit_file_says(result, audit):
    found = {entry["id"] for entry in audit["blocker"] if _reported(result, entry)}
    assert found == {entry["id"] for entry in audit["blocker"] if not entry["needs"]}  # 7 of 7 items, 19 of 19 gates


def test_the_map_no_caller_reaches_with_sm121_needs_a_human_not_a_blocker(result, audit):
    # 5a767523c added "sm_121" to _TMEM_MAX_ALLOC_COLUMNS_MAP, whose lookup only ever sees what its callers pass
    [entry] = [e for e in audit["blocker"] if e["id"] == "tmem-alloc-columns-map"]
    assert _reported(result, entry)
    [table] = [g for g in result.gates if (g["file"], g["line"]) == (entry["file"], 29)]
    assert (table["symbol"], table["admits"], table["excludes_arch"], table["classification"]) == (
        "_TMEM_MAX_ALLOC_COLUMNS_MAP", ["sm_100", "sm_103", "sm_120"], True, "needs-human")
    assert table["reason"] == (
        "`_TMEM_MAX_ALLOC_COLUMNS_MAP` is looked up with `get_max_tmem_alloc_cols`'s `compute_capability`, and every "
        'call passes a literal: flashinfer/cute_dsl/attention/mla_decode.py:511 passes "sm_100", '
        'flashinfer/cute_dsl/attention/mla_decode_fp8.py:518 passes "sm_100"; the lookup never sees sm_121 today'
        " (a caller passing it would fail: add the key if one will)"
    )


def test_the_definition_readers_report_their_items(result, audit):
    entries = [entry for entry in audit["blocker"] if entry["id"] in DEFINITION_ITEMS]
    assert {e["id"] for e in entries} == DEFINITION_ITEMS and all(_reported(result, e) for e in entries)
    records = {(g["file"], g["line"]): g for g in result.gates if g["kind"] in ("python_predicate", "python_arch_map")}
    predicate = records[("flashinfer/utils.py", 579)]
    assert (predicate["symbol"], predicate["admits"], predicate["classification"]) == ("is_sm120f_supported", ["sm_120"], "blocker")


def test_predicates_named_for_targets_sm121_does_not_run_are_covered(result):
    covered = {g["symbol"] for g in result.gates if g["kind"] == "python_predicate" and g["classification"] == "covered"}
    assert covered == {"is_sm90a_supported", "is_sm100a_supported", "is_sm100f_supported", "is_sm110a_supported",
                       "is_sm120a_supported"}
    admitting = {g["symbol"] for g in result.gates if g["kind"] == "python_predicate" and not g["excludes_arch"]}
    assert admitting == {"is_sm121a_supported", "is_sm12x_supported"}


def test_the_cute_dsl_copy_the_wheel_ships_for_jit_builds_is_not_a_blocker(result):
    copies = [g for g in result.gates if g["kind"] == "python_arch_map" and "/data/cutlass/" in g["file"]]
    assert len(copies) == 3 and {g["classification"] for g in copies} == {"covered"}
    assert all("has no __init__.py" in g["reason"] for g in copies)


def test_the_allreduce_blockers_are_widenable_with_their_module(result):
    [jit] = [g for g in result.gates if (g["file"], g["line"]) == ("flashinfer/jit/comm.py", 181)]
    assert (jit["classification"], jit["owner"]) == ("widenable", "trtllm_comm")
    guards = [g for g in result.gates if g["file"].endswith("comm/trtllm_allreduce.cuh") and g["excludes_arch"]]
    assert len(guards) == 13 and {(g["classification"], g["owner"]) for g in guards} == {("widenable", "trtllm_comm")}


def test_bf16_fallbacks_for_older_gpus_are_not_widenable(result):
    fallbacks = [g for g in result.gates if "cudaBf16Fallbacks.cuh" in g["file"] and "< 800" in g["text"]]
    assert fallbacks and {g["classification"] for g in fallbacks} == {"covered"}
    assert all(g["widenable"] for g in fallbacks)  # no instruction in the way: still not a thing to widen


def _sample(result, audit) -> tuple[list[tuple[str, int]], dict[tuple[str, int], str]]:
    """The gates drawn from those scan calls blockers or widenable, and the verdicts given by reading the code."""
    sample = tomllib.loads((AUDIT / "sm121_sample.toml").read_text())
    judged = {(s["file"], s["line"]): s["verdict"] for s in sample["gate"]}
    # the gates the definition readers add are items of the audit list: judged real there, with the upstream fix
    found = groups(result)
    reported = [(g["file"], g["line"]) for name in ("blocker", "widenable") for g in found[name]]
    # (those it calls blockers: the compat map, whose callers pass "sm_100" only, needs a human)
    judged |= {
        (e["file"], line): "real" for e in audit["blocker"] if e["id"] in DEFINITION_ITEMS for line in e["lines"]
        if (e["file"], line) in reported
    }
    drawn = random.Random(sample["seed"]).sample(sorted(reported), min(sample["size"], len(reported)))
    return drawn, judged


def test_every_gate_of_the_random_sample_was_judged_by_reading_the_code(result, audit):
    drawn, judged = _sample(result, audit)
    assert set(drawn) == set(judged)  # every gate drawn was judged by reading the code, and nothing else
    real = [key for key in drawn if judged[key] == "real"]
    # 16 reported, all drawn, all real; before the callers' keys (audit.map_callers) 17, the compat map, judged
    # real as an audit item then, now needs-human (its callers pass "sm_100" only); before the choice/value
    # reader (gates/python/polarity.use): 21 reported (gemm_base.py:5089 twice), 20 drawn, 17 real: the three backend choices get_compute_capability
    # brought in were not (tests/audit/sm121_sample.toml)
    assert (len(real), len(drawn)) == (16, 16)


def test_a_random_sample_of_the_blockers_and_widenable_gates_is_at_least_90_percent_real(result, audit):
    drawn, judged = _sample(result, audit)
    real = [key for key in drawn if judged[key] == "real"]
    assert len(real) / len(drawn) >= 0.9


def test_a_guard_in_a_helper_nothing_in_the_wheel_calls_is_covered(result):
    # tensorrt_llm::common::elect_one_sync: the one unqualified call (quantization.cuh, inside namespace
    # tensorrt_llm::kernels) finds kernels::elect_one_sync first; the sample once judged this guard "not real"
    helper = "flashinfer/data/csrc/nv_internal/include/tensorrt_llm/common/cudaUtils.h"
    (guard,) = [g for g in result.gates if g["file"] == helper and g["line"] == 772]
    assert guard["excludes_arch"] is True and guard["classification"] == "covered"
    assert "reaches `tensorrt_llm::common::elect_one_sync`" in guard["reason"]
    assert "no kernel runs this code on any arch" in guard["reason"]


def test_jit_lists_of_modules_sm121_has_no_use_for_need_a_human(result):
    by_line = {(g["file"], g["line"]): g for g in result.gates}
    moe_utils = by_line["flashinfer/jit/moe_utils.py", 73]
    assert moe_utils["classification"] == "needs-human"
    assert "only code kept from sm_121 uses it" in moe_utils["reason"]
    assert "flashinfer/fused_moe/cute_dsl/fused_moe.py:692, [100, 103]" in moe_utils["reason"]
    mixed_comm = by_line["flashinfer/jit/comm.py", 165]
    assert mixed_comm["classification"] == "needs-human"
    assert "multimem." in mixed_comm["reason"] and "mixed_comm.cuh" in mixed_comm["reason"]


def test_text_separates_what_is_specific_to_sm121(result):
    text = to_text(result)
    head, _, rest = text.partition("== specific to sm_121 (they admit sm_120, not sm_121)")
    assert rest and "== the rest" in rest
    specific = rest.split("== the rest")[0]
    assert "mma_tensor_op.h:222" in specific and "trtllm_allreduce.cuh" not in specific
    # the two `"trtllm-gen" if get_compute_capability(...)[0] == 10 else "xqa"` (decode.py, mla/_core.py) are not
    # among them: sm_121 gets "xqa" there (needs-human), as it did before get_compute_capability was read
    assert "\nwidenable (14): sm_121 gets nothing here" in rest
    assert "sm_121 gets `'xqa'` instead: the condition picks between two values" in rest
    quiet = to_text(result, quiet=True)
    assert quiet.startswith(head.split("\n")[0]) and "== specific" not in quiet and "widenable (" not in quiet


def test_json_and_sarif_carry_the_audit_groups(result):
    found = groups(result)
    data = to_json(result)
    for name, members in found.items():
        assert sorted((g["file"], g["line"]) for g in data["gates"] if g["classification"] == name) == sorted(
            (g["file"], g["line"]) for g in members
        )
    specific = [g for g in data["gates"] if g.get("specific")]
    assert all("sm_120" in g["admits"] and "sm_121" not in g["admits"] for g in specific)
    assert sorted((g["file"].rsplit("/", 1)[-1], g["line"], g["classification"]) for g in specific) == [
        ("aot.py", 528, "unknown"),  # `if has_sm120:`: an AOT build flag, sm_121 has its own
        ("compat.py", 29, "needs-human"),  # _TMEM_MAX_ALLOC_COLUMNS_MAP: no sm_121 key, callers pass "sm_100" only
        ("dense_blockscaled_gemm_sm120_b12x.py", 1591, "widenable"),  # `if sm_version != "sm_120": raise` (audit item; a recipe widens it)
        # `is_sm120 = major == 12 and minor == 0` (get_compute_capability): b12x first for "auto" on sm_120 only
        # (sm_121 gets cutlass/cudnn): a value, not a guard; was widenable twice (sm121_sample.toml: not real)
        ("gemm_base.py", 5089, "unknown"),
        ("gemm_base.py", 5089, "unknown"),
        # CuTe DSL copy under data/ (warp MmaSM120BlockScaledOp: `if not arch == Arch.sm_120a: raise`): not a module
        ("mma.py", 138, "covered"),
        ("mma_tensor_op.h", 222, "needs-human"),  # CUTLASS: `__CUDA_ARCH__ == 1200`
        ("smem_allocator.py", 20, "covered"),  # CuTe DSL copy under data/: not a module of the package
        ("tmem.py", 28, "covered"),
        ("tmem.py", 34, "covered"),
        ("utils.py", 574, "covered"),  # is_sm120a_supported: an `a` target sm_121 cannot run
        ("utils.py", 579, "blocker"),  # is_sm120f_supported: minor == 0 (audit item)
    ]
    [run] = to_sarif(result)["runs"]
    gates = [r for r in run["results"] if r["ruleId"] == "gate-excludes-arch"]
    assert run["properties"]["classifications"] == {
        name: len(members) for name, members in found.items()
    } | {name: sum(g["classification"] == name for g in result.gates) for name in ("covered", "definition")}
    widenable = [r for r in gates if r["properties"]["classification"] == "widenable"]
    assert len(widenable) == 15 and {r["level"] for r in widenable} == {"warning"}
    allreduce = next(r for r in widenable if r["locations"][0]["physicalLocation"]["region"]["startLine"] == 711)
    assert allreduce["locations"][0]["logicalLocations"] == [
        {"name": "lamport_style_one_shot_all_reduce_norm_kernel", "kind": "function"}
    ]
    assert allreduce["properties"]["owner"] == "trtllm_comm"
