"""audit.map_callers: an arch-keyed map looked up by a function's parameter sees only the keys the function's callers
pass (issue 18, scan precision), through `scan` on trees in FlashInfer 0.6.10's shape: a compat module holding the
map (tests/fixtures/predicates.py COMPAT) and kernel modules calling its function under an alias."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from codemods.audit.scan import scan
from codemods.core.arch import Arch
from fixtures.predicates import COMPAT

SM110, SM121 = Arch.parse("sm_110"), Arch.parse("sm_121")
COMPAT_REL = "flashinfer/cute_dsl/attention/compat.py"

# mla_decode.py's shape: the function imported under another name, called with a literal from a kernel's method
DECODE = '''\
import cutlass.cute as cute

from .compat import (
    get_max_tmem_alloc_cols as _get_max_tmem_alloc_cols,
)


class DecodeKernel:
    def kernel(self, tmem):
        tmem.allocate({call})
'''
# gated_delta_net_chunked.py's shape: CuTe's own function of the same name, not the compat module's
GDN = '''\
import cutlass.cute as cute


def kernel(self, tmem):
    tmem.allocate(cute.arch.get_max_tmem_alloc_cols(self.arch))
'''


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "site-packages"
    for rel, text in {
        "flashinfer/__init__.py": "",
        "flashinfer/cute_dsl/__init__.py": "",
        "flashinfer/cute_dsl/attention/__init__.py": "",
        COMPAT_REL: COMPAT,
        "flashinfer/gdn_kernels/chunked.py": GDN,
        **files,
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _map(root: Path, arch: Arch, cache: Path | None = None) -> dict:
    [record] = [g for g in scan(root, arch, jobs=1, cache=cache).gates if g["kind"] == "python_arch_map"]
    return record


def _decode(call: str) -> dict[str, str]:
    return {"flashinfer/cute_dsl/attention/mla_decode.py": DECODE.format(call=call)}


def test_without_callers_the_map_excludes_the_arch(tmp_path):
    record = _map(_tree(tmp_path, {}), SM110)
    assert (record["excludes_arch"], record["classification"]) == (True, "blocker")
    assert record["reason"].startswith("`_TMEM_MAX_ALLOC_COLUMNS_MAP` has no key for sm_110")


@pytest.mark.parametrize("arch", [SM110, SM121], ids=["sm_110", "sm_121"])
def test_callers_passing_a_literal_other_arch_keep_the_arch_from_the_lookup(tmp_path, arch):
    root = _tree(tmp_path, {
        **_decode('_get_max_tmem_alloc_cols("sm_100")'),
        "flashinfer/cute_dsl/attention/mla_decode_fp8.py": DECODE.format(
            call='_get_max_tmem_alloc_cols(compute_capability="sm_100")'),
    })  # fmt: skip
    record = _map(root, arch)
    assert (record["file"], record["line"], record["excludes_arch"], record["classification"]) == (
        COMPAT_REL, 4, True, "needs-human")
    assert record["admits"] == ["sm_100", "sm_103", "sm_120"]  # the map's keys are what they were
    assert record["reason"] == (
        "`_TMEM_MAX_ALLOC_COLUMNS_MAP` is looked up with `get_max_tmem_alloc_cols`'s `compute_capability`, and every "
        'call passes a literal: flashinfer/cute_dsl/attention/mla_decode.py:10 passes "sm_100", '
        'flashinfer/cute_dsl/attention/mla_decode_fp8.py:10 passes "sm_100"; '
        f"the lookup never sees {arch.name} today (a caller passing it would fail: add the key if one will)"
    )


def test_a_caller_passing_the_arch_keeps_the_blocker(tmp_path):
    root = _tree(tmp_path, _decode('_get_max_tmem_alloc_cols("sm_110")'))
    record = _map(root, SM110)
    assert (record["excludes_arch"], record["classification"]) == (True, "blocker")
    assert record["reason"].endswith(
        "; `get_max_tmem_alloc_cols`'s callers pass sm_110: flashinfer/cute_dsl/attention/mla_decode.py:10 "
        'passes "sm_110"')
    # the same callers never pass sm_121
    assert (_map(root, SM121)["excludes_arch"], _map(root, SM121)["classification"]) == (True, "needs-human")


@pytest.mark.parametrize(
    ("files", "why"),
    [
        pytest.param(_decode("_get_max_tmem_alloc_cols(self.arch)"), "a variable", id="variable"),
        pytest.param(
            {**_decode('_get_max_tmem_alloc_cols("sm_100")'),
             "flashinfer/cute_dsl/attention/other.py": DECODE.format(call="_get_max_tmem_alloc_cols(f'sm_{cc}')")},
            "one caller of two passes an expression", id="one-of-two-computed"),
        pytest.param(_decode("_get_max_tmem_alloc_cols(*args)"), "a starred argument", id="starred"),
        pytest.param(_decode("_get_max_tmem_alloc_cols(**options)"), "keyword splat", id="kwargs"),
        pytest.param(
            {"flashinfer/cute_dsl/attention/table.py":
             "from .compat import get_max_tmem_alloc_cols\n\nLOOKUPS = [get_max_tmem_alloc_cols]\n"},
            "a reference that is not a call", id="callback"),
        pytest.param(
            {"flashinfer/cute_dsl/attention/mla.py":
             "from . import compat\n\n\ndef cols(cc):\n    return compat.get_max_tmem_alloc_cols(cc)\n"},
            "a call through the module", id="module-attribute"),
        pytest.param(
            {**_decode('_get_max_tmem_alloc_cols("sm_100")'),
             "flashinfer/cute_dsl/attention/__init__.py": "from .compat import get_max_tmem_alloc_cols\n"},
            "the package exports it: anyone may call it", id="exported"),
    ],
)
def test_a_caller_codemod_cannot_read_keeps_the_blocker(tmp_path, files, why):
    record = _map(_tree(tmp_path, files), SM110)
    assert (record["excludes_arch"], record["classification"]) == (True, "blocker"), why
    assert "passes" not in record["reason"]


def test_a_lookup_keyed_by_something_else_keeps_the_blocker(tmp_path):
    # the key is rebound before the lookup: the callers' literal is not what the map sees
    compat = COMPAT.replace("    if compute_capability not in", '    compute_capability = "sm_" + compute_capability\n'
                                                                  "    if compute_capability not in")
    root = _tree(tmp_path, {COMPAT_REL: compat, **_decode('_get_max_tmem_alloc_cols("100")')})
    assert (_map(root, SM110)["excludes_arch"], _map(root, SM110)["classification"]) == (True, "blocker")


def test_the_cached_map_record_follows_its_callers(tmp_path):
    # compat.py is unchanged between the scans (its record comes from the cache); only a caller changes
    cache = tmp_path / "cache"
    root = _tree(tmp_path, _decode('_get_max_tmem_alloc_cols("sm_100")'))
    for file in root.rglob("*.py"):  # written long before the scan: the cache trusts their stamps
        os.utime(file, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    assert _map(root, SM110, cache)["classification"] == "needs-human"
    assert _map(root, SM110, cache)["classification"] == "needs-human"  # answered from the snapshot
    caller = root / "flashinfer/cute_dsl/attention/mla_decode.py"
    caller.write_text(DECODE.format(call='_get_max_tmem_alloc_cols("sm_110")'))
    os.utime(caller, ns=(1_600_000_001_000_000_000, 1_600_000_001_000_000_000))
    result = scan(root, SM110, jobs=1, cache=cache)
    assert result.stats["cache_hits"] >= 1 and not result.stats["snapshot"]  # compat.py's record is the cached one
    [again] = [g for g in result.gates if g["kind"] == "python_arch_map"]
    assert (again["excludes_arch"], again["classification"]) == (True, "blocker")


def test_the_cli_lists_the_map_as_needing_a_human_not_as_a_blocker(cli, tmp_path):
    root = _tree(tmp_path, _decode('_get_max_tmem_alloc_cols("sm_100")'))
    out = cli("scan", "--repo", root, "--arch", "sm_110", "--no-cache", "--format", "json")
    assert out.exit_code == 0, out.output
    [record] = [g for g in json.loads(out.stdout)["gates"] if g["kind"] == "python_arch_map"]
    assert (record["excludes_arch"], record["classification"]) == (True, "needs-human")
    text = cli("scan", "--repo", root, "--arch", "sm_110", "--no-cache", "--verbose")
    assert text.exit_code == 0, text.output
    assert "    0 blockers" in text.stdout
    assert 'mla_decode.py:10 passes "sm_100"; the lookup never sees sm_110 today' in text.stdout


def test_scan_lists_maps_keyed_by_capability_and_arch_strings(cli, tmp_path):
    # FlashInfer 4d4e8c057's parent (deep_gemm.py): a table looked up where it is written, keyed "90a"/"100a"
    deep_gemm = 'def must_be_k_major() -> bool:\n    return {\n        "90a": True,\n        "100a": False,\n    }[get_device_arch()]\n'
    smem = 'SMEM = {"9.0": 227, "10.0": 227, "12.0": 99}\n\n\ndef smem(cc):\n    return SMEM[cc]\n'
    root = _tree(tmp_path, {"flashinfer/deep_gemm.py": deep_gemm, "flashinfer/smem.py": smem})
    out = cli("scan", "--repo", root, "--arch", "sm_103", "--no-cache", "--format", "json")
    assert out.exit_code == 0, out.output
    found = {
        (g["file"], g["line"]): (g["admits"], g["excludes_arch"], g["classification"])
        for g in json.loads(out.stdout)["gates"] if g["kind"] == "python_arch_map"
    }
    # a table bound to no name: its function's callers are not followed, so whether sm_103 reaches it is unknown
    assert found[("flashinfer/deep_gemm.py", 2)] == (["sm_90", "sm_100"], True, "unknown")
    assert found[("flashinfer/smem.py", 1)] == (["sm_90", "sm_100", "sm_120"], True, "widenable")
