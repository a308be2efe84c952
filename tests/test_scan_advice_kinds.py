"""Scan advice on SGLang that the precision samples judged false (issue 34 part 1, bench/precision): a gate written
for another kind of arch is `other-arch`, not widenable; an exclusion a comment calls deliberate needs a human; the
`else` of a test the arch takes is covered; a parenthesised assert is read like a bare one; `not (a() or b())` is
one record. Small trees in the shapes of SGLang code."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jsonschema
import pytest

from codemods.audit import classify
from codemods.audit.scan import scan
from codemods.core.arch import Arch
from codemods.cpp.instructions import kin

SM110, SM120, SM121 = Arch.parse("sm_110"), Arch.parse("sm_120"), Arch.parse("sm_121")


def _tree(root: Path, files: dict[str, str]) -> Path:
    files = {"python/sglang/srt/__init__.py": "", **files}
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def _excluding(root: Path, arch: Arch, name: str) -> dict[int, dict]:
    return {g["line"]: g for g in scan(root, arch, jobs=1).gates if g["file"].endswith(name) and g["excludes_arch"]}


def _line(source: str, text: str) -> int:
    return textwrap.dedent(source).splitlines().index(text) + 1


# ---------------------------------------------------------------- kinship

@pytest.mark.parametrize("one, other, same", [
    pytest.param("sm_120", "sm_121", True, id="consumer-blackwell-family"),
    pytest.param("sm_100", "sm_110", True, id="tcgen05-archs-sm100-and-thor"),
    pytest.param("sm_103", "sm_100", True, id="b300-and-b200"),
    pytest.param("sm_80", "sm_89", True, id="pre-hopper"),
    pytest.param("sm_90", "sm_100", False, id="wgmma-is-not-tcgen05"),
    pytest.param("sm_90", "sm_80", False, id="hopper-is-not-ampere"),
    pytest.param("sm_120", "sm_100", False, id="block-scaled-mma-is-not-tcgen05"),
    pytest.param("sm_121", "sm_110", False, id="gb10-is-not-thor"),
])
def test_kin_follows_the_instruction_table(one, other, same):
    assert kin(Arch.parse(one), Arch.parse(other)) is same
    assert kin(Arch.parse(other), Arch.parse(one)) is same


# ---------------------------------------------------------------- other-arch

_ARGS = """\
import torch

from sglang.srt.utils import is_sm100_supported


class ServerArgs:
    def _handle_model_specific_adjustments(self):
        if is_sm100_supported():
            self.enable_flashinfer_allreduce_fusion = True
            log_backend("flashinfer_trtllm")
        self.finish()

    def _pick_kernel(self):
        if torch.cuda.get_device_capability() != (12, 0):
            raise RuntimeError("this fp8 skinny GEMM is compiled for one GPU")
        return 1


class _SpargeResolver:
    supported_capabilities = {(8, 0), (8, 9), (9, 0)}
"""


def test_a_gate_written_for_another_kind_of_arch_is_other_arch_not_widenable(tmp_path):
    root = _tree(tmp_path, {"python/sglang/srt/server_args.py": _ARGS})
    gates = _excluding(root, SM120, "server_args.py")
    default = gates[_line(_ARGS, "        if is_sm100_supported():")]
    assert default["classification"] == "other-arch", default
    assert default["reason"].startswith("written for sm_100, sm_103, another kind of arch than sm_120: the `if` body")
    sparge = gates[_line(_ARGS, "    supported_capabilities = {(8, 0), (8, 9), (9, 0)}")]
    assert sparge["classification"] == "other-arch", sparge


def test_a_gate_admitting_the_arch_s_kin_stays_widenable(tmp_path):
    root = _tree(tmp_path, {"python/sglang/srt/server_args.py": _ARGS})
    # sm_110 has the tcgen05 instructions the SM100 code is written for: widening is the fix (the SM110 audit)
    # (not other-arch; here a blocker only because this file has no predicate that admits sm_110 for run to add, and
    # scan asks run's own widen before it says widenable)
    thor = _excluding(root, SM110, "server_args.py")[_line(_ARGS, "        if is_sm100_supported():")]
    assert thor["classification"] == "blocker", thor
    assert "`codemod run` cannot widen it: no predicate admits sm_110 here" in thor["reason"]
    # `!= (12, 0)` shuts sm_121 out of an SM120 kernel: same kind, widen it
    gb10 = _excluding(root, SM121, "server_args.py")[_line(_ARGS, "        if torch.cuda.get_device_capability() != (12, 0):")]
    assert gb10["classification"] == "widenable" and "stops on sm_121" in gb10["reason"], gb10


def test_other_arch_is_a_group_in_text_json_and_sarif(cli, tmp_path):
    root = _tree(tmp_path, {"python/sglang/srt/server_args.py": _ARGS})
    text = cli("scan", "--repo", root, "--arch", "sm_120", "--no-cache").stdout
    assert "    2 other-arch" in text
    assert "other-arch (2): code written for another kind of arch than sm_120" in text
    result = cli("scan", "--repo", root, "--arch", "sm_120", "--no-cache", "--format", "json")
    data = json.loads(result.stdout)
    schema = json.loads(cli("schema", "scan").stdout)
    jsonschema.validate(data, schema)
    enum = schema["properties"]["gates"]["items"]["properties"]["classification"]["enum"]
    assert set(enum) == set(classify.CLASSIFICATIONS)
    assert sorted(g["classification"] for g in data["gates"] if g["excludes_arch"]) == ["other-arch", "other-arch"]
    [run] = json.loads(cli("scan", "--repo", root, "--arch", "sm_120", "--no-cache", "--format", "sarif").stdout)["runs"]
    other = [r for r in run["results"] if r["properties"]["classification"] == "other-arch"]
    assert len(other) == 2 and {r["level"] for r in other} == {"note"}
    assert other[0]["message"]["text"].startswith("other-arch: ")
    assert run["properties"]["classifications"]["other-arch"] == 2


# ---------------------------------------------------------------- deliberate exclusions

_COMMON = """\
from functools import lru_cache

import torch


def is_cuda():
    return torch.cuda.is_available()


# RTX Blackwell. Unlike is_sm120_supported(), this excludes SM121/GB10.
@lru_cache(maxsize=1)
def is_sm120() -> bool:
    return is_cuda() and torch.cuda.get_device_capability() == (12, 0)
"""

_SPARSE = """\
from sglang.srt.utils.common import is_sm120
from sglang.srt.utils import is_sm100_supported


def _resolve_paged_decode():
    # Validated on SM100 and SM120 only. Do not widen this to every SM12x
    # device: long-context decode goes wrong on SM121/GB10.
    if not (is_sm100_supported() or is_sm120()):
        return None
    return "trtllm"


def _run_moe(x):
    if x.is_fp4 and is_sm120():
        return fused_fp4_moe(x)
    return x
"""


def test_a_deliberate_exclusion_needs_a_human_and_is_listed_once(tmp_path):
    root = _tree(tmp_path, {"python/sglang/srt/utils/common.py": _COMMON,
                            "python/sglang/srt/layers/sparse.py": _SPARSE})
    records = [g for g in scan(root, SM121, jobs=1).gates if g["file"].endswith("sparse.py") and g["excludes_arch"]]
    line = _line(_SPARSE, "    if not (is_sm100_supported() or is_sm120()):")
    [decode] = [g for g in records if g["line"] == line]  # one record for `not (a() or b())`
    assert decode["classification"] == "needs-human", decode
    assert decode["reason"].startswith("left out on purpose") and "SM121/GB10" in decode["reason"]


def test_a_predicate_defined_to_exclude_the_arch_is_a_definition_and_its_callers_need_a_human(tmp_path):
    root = _tree(tmp_path, {"python/sglang/srt/utils/common.py": _COMMON,
                            "python/sglang/srt/layers/sparse.py": _SPARSE})
    gates = scan(root, SM121, jobs=1).gates
    [definition] = [g for g in gates if g["file"].endswith("common.py") and g["kind"] == "python_predicate"]
    assert definition["classification"] == "definition", definition
    assert "leaves sm_121 out on purpose" in definition["reason"]
    caller = {g["line"]: g for g in gates if g["file"].endswith("sparse.py")}[_line(_SPARSE, "    if x.is_fp4 and is_sm120():")]
    assert caller["classification"] == "needs-human", caller
    assert caller["reason"].startswith("`is_sm120` leaves sm_121 out on purpose (its definition says")
    # for sm_120 the predicate admits the arch: nothing to say
    assert all(not g["excludes_arch"] for g in scan(root, SM120, jobs=1).gates if g["file"].endswith("common.py"))


# ---------------------------------------------------------------- the `else` of a test the arch takes; asserts

_SELECT = """\
import torch

from sglang.srt.utils import is_sm90_supported, is_sm100_supported


def select_backend():
    major, _minor = torch.cuda.get_device_capability()
    if major >= 10:
        backend = "trtllm_mla"
    else:
        warn_old_gpu()
        if major == 9:
            backend = "fa3"
        assert major == 9, "this fallback is for Hopper only"
    return backend


def check_fp8_moe():
    assert (is_sm90_supported() or is_sm100_supported()), "cutlass fp8 MoE requires SM90 or SM100"
"""


def test_the_else_of_a_test_the_arch_takes_is_covered(tmp_path):
    root = _tree(tmp_path, {"python/sglang/srt/layers/select.py": _SELECT})
    gates = _excluding(root, SM120, "select.py")
    for text in ("        if major == 9:", "        assert major == 9, \"this fallback is for Hopper only\""):
        gate = gates[_line(_SELECT, text)]
        assert gate["classification"] == "covered", gate
        assert gate["reason"] == "inside the `else` of `if major >= 10` (line 8), whose test sm_120 takes"


def test_a_parenthesised_assert_is_read_as_a_requirement(tmp_path):
    root = _tree(tmp_path, {"python/sglang/srt/layers/select.py": _SELECT})
    [moe] = [g for line, g in _excluding(root, SM120, "select.py").items()
             if line == _line(_SELECT, '    assert (is_sm90_supported() or is_sm100_supported()), "cutlass fp8 MoE '
                                       'requires SM90 or SM100"')]
    assert moe["classification"] == "needs-human", moe
    assert moe["reason"].startswith("a stated requirement (the assert says \"cutlass fp8 MoE requires SM90 or SM100\")")


_REGISTRY = """\
import torch

from sglang.srt.utils import is_musa

_is_musa = is_musa()


def create_fa3_backend(runner):
    major, minor = torch.cuda.get_device_capability()
    if not _is_musa:
        assert major == 9, "FA3 requires SM90"
        return "fa3"
    else:
        assert major == 3 and minor >= 1, "MUSA FA3 requires MP>=31"
        return "musa_fa3"
"""


def test_a_platform_test_is_decided_for_a_cuda_arch(tmp_path):
    # SGLang 0.5.23's create_flashattention_v3_backend: the MUSA arm's capability assert is never reached on a CUDA GPU
    root = _tree(tmp_path, {"python/sglang/srt/layers/registry.py": _REGISTRY})
    gates = _excluding(root, SM121, "registry.py")
    musa = [g for line, g in gates.items() if line == _line(_REGISTRY, '        assert major == 3 and minor >= 1, '
                                                                     '"MUSA FA3 requires MP>=31"')]
    assert musa and all(g["classification"] == "covered" for g in musa), musa
    assert musa[0]["reason"] == "inside the `else` of `if not _is_musa` (line 10), whose test sm_121 takes"
    cuda = gates[_line(_REGISTRY, '        assert major == 9, "FA3 requires SM90"')]
    assert cuda["classification"] == "needs-human" and "stated requirement" in cuda["reason"], cuda
