"""The four SGLang 0.5.8 items issue 34 names, scanned for sm_120 on the real wheel: none is widenable, and each
reason is true (an if inside `__init__` does not stop `__init__`; a predicate's definition is a definition; an
assert stating an arch range is a requirement; a block-size branch is tuning)."""

from __future__ import annotations

import pytest

from codemods.audit.scan import scan
from codemods.core.arch import Arch
from conftest import unpack_wheel

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def gates():
    root = unpack_wheel("sglang", "0.5.8")
    return {(g["file"].split("/")[-1], g["line"]): g for g in scan(root, Arch.parse("sm_120"), jobs=1).gates
            if g["excludes_arch"]}


def test_the_named_items_come_out_right(gates):
    hopper = gates[("interface.py", 125)]
    assert hopper["classification"] == "definition" and "`is_hopper`" in hopper["reason"]
    fa3 = gates[("attention_registry.py", 131)]
    assert fa3["classification"] == "needs-human" and fa3["reason"].startswith("a stated requirement")
    init = gates[("flashinfer_backend.py", 241)]
    assert init["classification"] == "needs-human" and "does not run" not in init["reason"]
    assert "keeps `fmha_backend` as set before the `if`" in init["reason"]
    tuning = gates[("extend_attention.py", 76)]
    assert tuning["classification"] == "tuning" and "BLOCK_M, BLOCK_N" in tuning["reason"]
    assert not any(g["reason"].endswith("does not run on sm_120") and g["classification"] == "widenable"
                   and g["symbol"].endswith("__init__") for g in gates.values())


def test_sglang_0_5_23_for_sm_121_widens_only_the_sm120_family_gates():
    """bench/precision after fix 4: the real items stay widenable, per-arch code for other kinds is other-arch, and
    what SGLang excludes on purpose (is_sm120, the paged-decode comment) needs a human."""
    root = unpack_wheel("sglang", "0.5.23")
    gates = scan(root, Arch.parse("sm_121"), jobs=1).gates
    by_place = {(g["file"].split("/")[-1], g["line"]): g for g in gates if g["excludes_arch"]}
    for place in (("sm120_fp8_skinny_gemm_sm120.py", 52), ("moe_fused_gate.py", 418), ("cuda.py", 311)):
        assert by_place[place]["classification"] == "widenable", by_place[place]
    for place in (("k3_ar_fusion.py", 69), ("mimo_v2.py", 27), ("flashinfer_backend.py", 502), ("cuda.py", 217)):
        assert by_place[place]["classification"] == "other-arch", by_place[place]
    assert by_place[("common.py", 343)]["classification"] == "definition"
    for place in (("flashinfer_cutlass.py", 322), ("qwen_sparse_attn_backend.py", 72)):
        assert by_place[place]["classification"] == "needs-human", by_place[place]
    listed = [g for g in gates if g["classification"] in ("blocker", "widenable")]
    assert {g["admits"][-1] for g in listed if g["admits"]} == {"sm_120"}  # every one leaves sm_121 out of the family
