"""Widening a Python gate that selects a JIT module is checked for the instructions the arch lacks.

Hand-written trees in FlashInfer's shape: prefill.py's get_fmha_module picks
gen_fmha_cutlass_sm100a_module (re-exported by jit/__init__.py and
jit/attention/__init__.py) behind an is_smXXa_supported or-chain; the spec's
source includes a FlashInfer header that uses tcgen05.mma, UMMA:: and SM100_MMA_
atoms, and CuTe's <cute/tensor.hpp> from 3rdparty/cutlass (a stub with CuTe's own
feature switch, or an empty folder as on a clone without submodules). Upstream
made this widening in 9f4fd04ac and reverted it in 74e99e8bb; the last test
replays it on the real FlashInfer 0.6.3.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from textwrap import dedent

import pytest

from conftest import git, init_repo, tree_digest
from codemods.cpp import hazards
from codemods.cpp.closures import Closures
from codemods.cpp.instructions import lacking
from codemods.cpp.structure import structure
from codemods.core.arch import Arch
from codemods.audit.scan import check, scan
from codemods.render.sarif import to_sarif
from codemods.render.scan_json import to_json
from codemods.render.scan_text import to_text

SM120 = Arch.parse("sm_120")
RECIPE = Path(__file__).parent / "data" / "fmha-sm120.toml"

PREFILL = """\
import functools

from .jit import gen_fa2_module, gen_fmha_cutlass_sm100a_module
from .utils import is_sm100a_supported, is_sm110a_supported


@functools.cache
def get_fmha_module(dtype_q, dtype_kv, head_dim, device):
    if {chain}:
        return gen_fmha_cutlass_sm100a_module(dtype_q, dtype_kv, head_dim).build_and_load()
    else:
        return gen_fa2_module(dtype_q, head_dim).build_and_load()
"""
NARROW = "is_sm100a_supported(device) or is_sm110a_supported(device)"
WIDE = "is_sm100a_supported(device) or is_sm110a_supported(device) or is_sm120a_supported(device)"
# what `run` writes: the widened `if` is past the file's line length (92, its longest line), split as black splits it
WIDENED_IF = (
    "    if (\n        is_sm100a_supported(device)\n        or is_sm110a_supported(device)\n"
    "        or is_sm120a_supported(device)\n        or is_sm121a_supported(device)\n    ):\n"
)

UTILS = """\
def is_sm100a_supported(device):
    return get_compute_capability(device)[0] == 10


def is_sm110a_supported(device):
    return get_compute_capability(device)[0] == 11


def is_sm120a_supported(device):
    return get_compute_capability(device) == (12, 0)


def is_sm121a_supported(device):
    return get_compute_capability(device) == (12, 1)
"""

JIT_INIT = """\
from .attention import gen_fmha_cutlass_sm100a_module as gen_fmha_cutlass_sm100a_module
from .attention import gen_fa2_module as gen_fa2_module
"""

ATTENTION_INIT = """\
from .modules import *
"""

MODULES = """\
from .. import env as jit_env
from ..core import JitSpec, current_compilation_context, gen_jit_spec


def gen_fmha_cutlass_sm100a_module(dtype_q, dtype_kv, head_dim) -> JitSpec:
    uri = f"fmha_cutlass_sm100a_{{dtype_q}}_{{dtype_kv}}_{{head_dim}}"
    source_paths = [
        jit_env.FLASHINFER_CSRC_DIR / "fmha_cutlass_sm100.cu",
        jit_env.FLASHINFER_CSRC_DIR / "fmha_cutlass_sm100_binding.cu",
    ]
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions={majors}
    )
    return gen_jit_spec(uri, source_paths, extra_cuda_cflags=nvcc_flags)


def gen_fa2_module(dtype_q, head_dim) -> JitSpec:
    return gen_jit_spec("fa2", [jit_env.FLASHINFER_CSRC_DIR / "fa2.cu"])
"""

FMHA_CU = """\
#include <flashinfer/attention/blackwell/fmha_cutlass_sm100.cuh>
#include "tvm_ffi_utils.h"

void run_fmha(void* q) { flashinfer::launch_fmha(q); }
"""

# The kernel header: UMMA:: and SM100_MMA_ atoms at file level, inline tcgen05.mma under a guard
# written as `>= 1000` (which sm_120 passes), as a header written before SM12x existed.
FMHA_CUH = """\
#pragma once
#include <cute/tensor.hpp>

namespace flashinfer {

using Mma = SM100_MMA_F16BF16_SS<half_t, half_t, float, 128, 128>;

__device__ inline void mma(unsigned long long desc_a, unsigned long long desc_b, unsigned d_tmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  asm volatile("tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, 0;" :: "r"(d_tmem), "l"(desc_a), "l"(desc_b));
#endif
}

template <class Params>
__global__ void fmha_kernel(Params params) {
  auto scale = UMMA::ScaleOut::Zero;
  mma(params.a, params.b, params.tmem);
}

inline void launch_fmha(void* q) {}

}  // namespace flashinfer
"""
TCGEN05_LINE = FMHA_CUH.splitlines().index(next(l for l in FMHA_CUH.splitlines() if "tcgen05.mma" in l)) + 1

# The same header with everything SM100-only behind guards sm_120 and sm_121 do not take.
FMHA_CUH_GUARDED = """\
#pragma once
#include <cute/tensor.hpp>

namespace flashinfer {

#if defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM110_ALL)
using Mma = SM100_MMA_F16BF16_SS<half_t, half_t, float, 128, 128>;

__device__ inline void mma(unsigned long long desc_a, unsigned long long desc_b, unsigned d_tmem) {
  asm volatile("tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, 0;" :: "r"(d_tmem), "l"(desc_a), "l"(desc_b));
}
#endif

template <class Params>
__global__ void fmha_kernel(Params params) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000 && __CUDA_ARCH__ < 1200
  auto scale = UMMA::ScaleOut::Zero;
  mma(params.a, params.b, params.tmem);
#endif
}

inline void launch_fmha(void* q) {}

}  // namespace flashinfer
"""

# CuTe in miniature: the atom is defined (not used) here, its tcgen05 behind CuTe's own feature switch,
# with the trap's message naming the instruction in the #else.
CUTE_TENSOR = """\
#pragma once
#include <cute/arch/mma_sm100_umma.hpp>
"""
CUTE_UMMA = """\
#pragma once
namespace cute {
template <class A, class B, class C, int M, int N>
struct SM100_MMA_F16BF16_SS {
  __device__ static void fma(unsigned long long a, unsigned long long b, unsigned c) {
#if defined(CUTE_ARCH_TCGEN05_F16F32_MMA_ENABLED)
    asm volatile("tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, 0;" :: "r"(c), "l"(a), "l"(b));
#else
    CUTE_INVALID_CONTROL_PATH("Attempting to use SM100_MMA_F16BF16_SS (tcgen05.mma) without CUTE_ARCH_TCGEN05_F16F32_MMA_ENABLED");
#endif
  }
};
namespace UMMA { enum class ScaleOut { Zero, One }; }
}
"""


def fmha_tree(
    root: Path, *, chain: str = NARROW, header: str = FMHA_CUH, majors: str = "[10, 11]", cutlass: bool = True
) -> Path:
    """A FlashInfer checkout in miniature, committed; without `cutlass`, 3rdparty/cutlass is an
    uninitialised submodule (an empty folder, as a plain clone has it)."""
    files = {
        "include/flashinfer/attention/blackwell/fmha_cutlass_sm100.cuh": header,
        "csrc/fmha_cutlass_sm100.cu": FMHA_CU,
        "csrc/fmha_cutlass_sm100_binding.cu": '#include "tvm_ffi_utils.h"\n',
        "csrc/tvm_ffi_utils.h": "#pragma once\n#include <dlpack/dlpack.h>\n",
        "csrc/fa2.cu": "#include <flashinfer/attention/prefill.cuh>\n",
        "include/flashinfer/attention/prefill.cuh": "#pragma once\n",
        "flashinfer/__init__.py": "",
        "flashinfer/utils.py": UTILS,
        "flashinfer/prefill.py": PREFILL.format(chain=chain),
        "flashinfer/jit/__init__.py": JIT_INIT,
        "flashinfer/jit/attention/__init__.py": ATTENTION_INIT,
        "flashinfer/jit/attention/modules.py": MODULES.format(majors=majors),
        "version.txt": "0.3.1\n",
    }
    if cutlass:
        files["3rdparty/cutlass/include/cute/tensor.hpp"] = CUTE_TENSOR
        files["3rdparty/cutlass/include/cute/arch/mma_sm100_umma.hpp"] = CUTE_UMMA
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if not cutlass:
        (root / "3rdparty/cutlass").mkdir(parents=True)
        (root / ".gitmodules").write_text(
            '[submodule "3rdparty/cutlass"]\n\tpath = 3rdparty/cutlass\n\turl = https://github.com/NVIDIA/cutlass.git\n'
        )
    init_repo(root)
    if not cutlass:  # the gitlink a clone has for a submodule it did not check out
        git(root, "update-index", "--add", "--cacheinfo", f"160000,{git(root, 'rev-parse', 'HEAD').strip()},3rdparty/cutlass")
        git(root, "commit", "-qm", "cutlass submodule")
    return root


def branches(repo: Path) -> list[str]:
    return git(repo, "branch", "--format=%(refname:short)").split()


# ---------------------------------------------------------------- run / --dry-run


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_or_chain_selecting_tcgen05_kernels_is_refused(cli, tmp_path, dry_run):
    repo = fmha_tree(tmp_path / "fi")
    before = tree_digest(repo)
    result = cli("run", RECIPE, "--repo", repo, *(["--dry-run"] if dry_run else []))
    assert result.exit_code == 3, result.output
    message = " ".join(result.stderr.split())
    assert "flashinfer/prefill.py:9: cannot widen" in message and "not widenable" in message
    # names the instruction, the file and line it is on, and the module that compiles it
    assert f"tcgen05.mma (include/flashinfer/attention/blackwell/fmha_cutlass_sm100.cuh:{TCGEN05_LINE}" in message
    assert "compiled by gen_fmha_cutlass_sm100a_module as sm_120f" in message and "not on sm_120, sm_121" in message
    assert "SM100_MMA_F16BF16_SS" in message and "UMMA" in message
    assert "(--force overrides)" in message
    assert tree_digest(repo) == before and branches(repo) == ["main"]


def test_force_widens_and_records_the_blockers_in_the_commit(cli, tmp_path):
    repo = fmha_tree(tmp_path / "fi")
    result = cli("run", RECIPE, "--repo", repo, "--force")
    assert result.exit_code == 0, result.output
    assert WIDENED_IF in (repo / "flashinfer/prefill.py").read_text()
    message = git(repo, "log", "-1", "--format=%B")
    forced = message.split("Widened with --force despite these blockers:\n", 1)[1].split("\n\n", 1)[0]
    assert forced.startswith("  flashinfer/prefill.py:9: tcgen05.mma (include/flashinfer/attention/blackwell/")
    assert f"fmha_cutlass_sm100.cuh:{TCGEN05_LINE}" in forced
    assert "Codemod-Change: flashinfer.fmha-module" in message
    assert "Codemod-Forced: flashinfer.fmha-module widened gates around instructions sm_120, sm_121 lack" in message


def test_spec_list_of_the_selected_module_is_checked_too(cli, tmp_path):
    repo = fmha_tree(tmp_path / "fi")
    recipe = tmp_path / "fmha-jit.toml"
    recipe.write_text(dedent("""\
        id = "fmha-jit-sm120"
        summary = "Build the SM100 FMHA module for compute capability 12"
        arch = "sm_120"

        [[change]]
        id = "flashinfer.fmha-jit"
        project = "flashinfer"
        file = "{python}/jit/attention/modules.py"
        kind = "python_arch_list"
        function = "gen_fmha_cutlass_sm100a_module"
        """))
    result = cli("run", recipe, "--repo", repo, "--dry-run")
    assert result.exit_code == 3, result.output
    message = " ".join(result.stderr.split())
    assert "flashinfer/jit/attention/modules.py:12: cannot widen `[10, 11]`: not widenable: tcgen05.mma" in message


def test_missing_cutlass_is_potential_and_warns_without_refusing(cli, tmp_path):
    repo = fmha_tree(tmp_path / "fi", header=FMHA_CUH_GUARDED, cutlass=False)
    assert list((repo / "3rdparty/cutlass").iterdir()) == []

    dry = cli("run", RECIPE, "--repo", repo, "--dry-run")
    assert dry.exit_code == 0, dry.output
    [warning] = [line.strip() for line in dry.stderr.splitlines() if line.strip().startswith("warning:")]
    assert warning.startswith("warning: potential: gen_fmha_cutlass_sm100a_module: ")
    assert "could not read cute/tensor.hpp (from include/flashinfer/attention/blackwell/fmha_cutlass_sm100.cuh)" in warning
    assert "3rdparty/cutlass/include" in warning and "CUTLASS is not in the tree" in warning
    assert "dlpack" not in warning  # the toolkit's and other packages' headers are not ours to follow

    result = cli("run", RECIPE, "--repo", repo, "--format", "json")
    assert result.exit_code == 0, result.output
    [gate] = json.loads(result.stdout)["results"][0]["changes"][0]["gates"]
    assert gate["outcome"] == "changed" and gate["warnings"] == [warning.removeprefix("warning: ")]
    message = git(repo, "log", "-1", "--format=%B")
    assert "Not fully checked (codemod could not follow these paths):" in message and "cute/tensor.hpp" in message


def test_no_finding_when_guards_exclude_the_target(cli, tmp_path):
    repo = fmha_tree(tmp_path / "fi", header=FMHA_CUH_GUARDED)
    result = cli("run", RECIPE, "--repo", repo)
    assert result.exit_code == 0, result.output
    assert "warning:" not in result.stderr and "Widened with --force" not in git(repo, "log", "-1", "--format=%B")
    assert WIDENED_IF in (repo / "flashinfer/prefill.py").read_text()


def test_a_chain_selecting_no_module_is_not_followed(cli, tmp_path):
    repo = fmha_tree(tmp_path / "fi")
    prefill = repo / "flashinfer/prefill.py"
    prefill.write_text(prefill.read_text() + dedent(f"""\


        def fmha_supported(device):
            return {NARROW}
        """))
    git(repo, "commit", "-qam", "helper")
    recipe = tmp_path / "helper.toml"
    recipe.write_text(RECIPE.read_text().replace("get_fmha_module", "fmha_supported").replace('id = "fmha-sm120"', 'id = "helper"'))
    result = cli("run", recipe, "--repo", repo, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "warning:" not in result.stderr


# ---------------------------------------------------------------- run and scan judge a JIT list alike (round 12)

MXFP8_SPEC = """\
from .. import env as jit_env
from ..core import gen_jit_spec, current_compilation_context


def gen_gemm_sm100_module_cutlass_mxfp8():
    source_paths = [
        jit_env.FLASHINFER_CSRC_DIR / "mxfp8_gemm_cutlass.cu",
    ]
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions={majors}
    )
    return gen_jit_spec("mxfp8_gemm_cutlass", source_paths, extra_cuda_cflags=nvcc_flags)
"""
MXFP8_HEADER = "include/flashinfer/gemm/mxfp8_gemm_template_sm100.h"
ARCH_TAG_SM100 = "struct G { using Arch = cutlass::arch::Sm100; };\n"
# An uncalled inline member (FlashInfer 0.6.3's deep_gemm/mma_utils.cuh): whatever builds the header never emits it.
INLINE_ASM = """\
#pragma once
struct Atom {{
  __device__ static void mma(float& d) {{
    asm volatile("{instruction} {{%0}}, 0, 0, 1, 1, 1;" : "+f"(d));
  }}
}};
"""
WGMMA_HEADER = INLINE_ASM.format(instruction="wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3")
TCGEN05_HEADER = INLINE_ASM.format(instruction="tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32")


def mxfp8_tree(root: Path, majors: str, header: str) -> Path:
    """FlashInfer 0.6.10's gen_gemm_sm100_module_cutlass_mxfp8 in miniature, committed."""
    files = {
        "flashinfer/__init__.py": "",
        "flashinfer/jit/__init__.py": "",
        "flashinfer/jit/gemm/__init__.py": "",
        "flashinfer/jit/gemm/core.py": MXFP8_SPEC.format(majors=majors),
        "csrc/mxfp8_gemm_cutlass.cu": f'#include "{MXFP8_HEADER.removeprefix("include/")}"\n',
        MXFP8_HEADER: header,
        "version.txt": "0.6.10\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return init_repo(root)


def mxfp8_recipe(tmp_path: Path, arch: str, admit: str) -> Path:
    recipe = tmp_path / "mxfp8.toml"
    recipe.write_text(dedent(f"""\
        id = "mxfp8-jit"
        summary = "x"
        arch = "{arch}"
        admit = "{admit}"

        [[change]]
        id = "flashinfer.mxfp8-jit"
        project = "flashinfer"
        title = "x"
        file = "{{python}}/jit/gemm/core.py"
        kind = "python_arch_list"
        function = "gen_gemm_sm100_module_cutlass_mxfp8"
        keyword = "supported_major_versions"
        """))
    return recipe


def mxfp8_gate(repo: Path, arch: str) -> dict:
    [found] = [g for g in scan(repo, Arch.parse(arch), jobs=1).gates if g["file"] == "flashinfer/jit/gemm/core.py"]
    return found


@pytest.mark.parametrize(
    "majors, header, arch, admit, refused",
    [
        pytest.param("[10, 11]", ARCH_TAG_SM100, "sm_120", "family", "cutlass::arch::Sm100 (" + MXFP8_HEADER + ":1",
                     id="sm100-arch-tag-refused-for-sm120"),
        pytest.param("[10, 11]", TCGEN05_HEADER, "sm_120", "family", "tcgen05.alloc (" + MXFP8_HEADER + ":4",
                     id="tcgen05-only-the-target-lacks-refused"),
        pytest.param("[9, 10]", WGMMA_HEADER, "sm_120", "family", "wgmma.mma_async (" + MXFP8_HEADER + ":4",
                     id="wgmma-sm90-admitted-has-it-refused"),
    ],
)
def test_run_refuses_what_scan_calls_needs_human(cli, tmp_path, majors, header, arch, admit, refused):
    repo = mxfp8_tree(tmp_path / "fi", majors, header)
    result = cli("run", mxfp8_recipe(tmp_path, arch, admit), "--repo", repo, "--dry-run")
    assert result.exit_code == 3, result.output
    message = " ".join(result.stderr.split())
    assert f"cannot widen `{majors}`: not widenable: {refused}, compiled by mxfp8_gemm_cutlass as sm_120f)" in message
    found = mxfp8_gate(repo, arch)
    assert found["classification"] == "needs-human", found["reason"]
    assert refused.split(" (")[0] in found["reason"]


@pytest.mark.parametrize(
    "majors, header, arch, admit, after",
    [
        pytest.param("[10]", WGMMA_HEADER, "sm_110", "exact", "[10, 11]", id="wgmma-every-admitted-arch-lacks-too"),
        pytest.param("[10, 11]", WGMMA_HEADER, "sm_120", "family", "[10, 11, 12]", id="wgmma-sm10x-sm110-lack-too"),
        pytest.param("[10, 11]", ARCH_TAG_SM100.replace("Sm100", "Sm120"), "sm_120", "family", "[10, 11, 12]",
                     id="arch-tag-of-the-target-family"),
    ],
)
def test_run_widens_what_the_admitted_archs_already_compile(cli, tmp_path, majors, header, arch, admit, after):
    repo = mxfp8_tree(tmp_path / "fi", majors, header)
    result = cli("run", mxfp8_recipe(tmp_path, arch, admit), "--repo", repo)
    assert result.exit_code == 0, result.output
    assert f"supported_major_versions={after}" in (repo / "flashinfer/jit/gemm/core.py").read_text()
    if "wgmma" in header:
        [warning] = [line.strip() for line in result.stderr.splitlines() if line.strip().startswith("warning:")]
        assert warning.startswith(f"warning: not counted: wgmma.mma_async ({MXFP8_HEADER}:4, compiled by mxfp8_gemm_cutlass)")
        assert "which the gate admits and which lack it too, so those builds never emit it" in warning
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    found = mxfp8_gate(repo, arch)
    assert found["classification"] == "widenable", found["reason"]


# ---------------------------------------------------------------- scan


def test_scan_reports_the_widened_chain(tmp_path):
    repo = fmha_tree(tmp_path / "fi", chain=WIDE)
    result = scan(repo, SM120)
    [hazard] = [h for h in result.hazards if h["file"] == "flashinfer/prefill.py"]
    assert (hazard["kind"], hazard["line"], hazard["potential"]) == ("unsupported-instruction", 9, False)
    assert hazard["module"] == "gen_fmha_cutlass_sm100a_module"
    assert hazard["tokens"][:1] == ["tcgen05.mma"] and {"UMMA", "SM100_MMA_F16BF16_SS"} <= set(hazard["tokens"])
    assert f"fmha_cutlass_sm100.cuh:{TCGEN05_LINE}" in hazard["message"]
    assert check(result) is True

    assert re.search(r"flashinfer/prefill\.py:9: unsupported-instruction: `is_sm100a_supported.*tcgen05\.mma", to_text(result))
    assert hazard in to_json(result)["hazards"]
    [sarif] = [r for r in to_sarif(result)["runs"][0]["results"] if r["ruleId"] == "unsupported-instruction"
               and r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "flashinfer/prefill.py"]
    assert sarif["level"] == "error" and "tcgen05.mma" in sarif["properties"]["tokens"]


def test_scan_follows_a_capability_test_too(tmp_path):
    repo = fmha_tree(tmp_path / "fi")
    (repo / "flashinfer/mla.py").write_text(dedent("""\
        import torch

        from .jit import gen_fa2_module, gen_fmha_cutlass_sm100a_module


        def get_mla_module(dtype, head_dim, device):
            if torch.cuda.get_device_capability(device)[0] >= 10:
                return gen_fmha_cutlass_sm100a_module(dtype, dtype, head_dim)
            return gen_fa2_module(dtype, head_dim)
        """))
    result = scan(repo, SM120)
    [hazard] = [h for h in result.hazards if h["file"] == "flashinfer/mla.py"]
    assert (hazard["line"], hazard["potential"], hazard["tokens"][0]) == (7, False, "tcgen05.mma")


def test_scan_of_the_narrow_chain_or_guarded_sources_reports_nothing(tmp_path):
    assert not [h for h in scan(fmha_tree(tmp_path / "narrow"), SM120).hazards if h["file"].endswith(".py")]
    guarded = fmha_tree(tmp_path / "guarded", chain=WIDE, header=FMHA_CUH_GUARDED)
    assert scan(guarded, SM120).hazards == []


def test_scan_header_level_wrappers_only_are_potential(tmp_path):
    header = FMHA_CUH.replace("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000\n", "#if defined(__CUDA_ARCH_FEAT_SM100_ALL)\n")
    result = scan(fmha_tree(tmp_path / "fi", chain=WIDE, header=header), SM120)
    [hazard] = result.hazards
    assert (hazard["file"], hazard["potential"]) == ("flashinfer/prefill.py", True)
    assert hazard["tokens"] == ["SM100_MMA_F16BF16_SS", "UMMA"]


# ---------------------------------------------------------------- the pure pieces


def test_compiled_skips_cute_feature_switches_and_library_definitions():
    shape = structure(CUTE_UMMA.encode())
    target = Arch.parse("sm_120a")
    assert hazards.compiled(shape, target, lacking(target), definitions=True) == ([], [])
    sure, unsure = hazards.compiled(shape, target, lacking(target))
    assert [hit.token for hit, _ in sure] == ["SM100_MMA_F16BF16_SS", "UMMA"] and unsure == []


def test_compiled_evaluates_guards_for_the_target():
    shape = structure(FMHA_CUH.encode())
    families = lacking(SM120)
    sure, _ = hazards.compiled(shape, Arch.parse("sm_120f"), families)
    assert [(hit.token, hit.line, guard is not None) for hit, guard in sure] == [
        ("SM100_MMA_F16BF16_SS", 6, False),
        ("tcgen05.mma", TCGEN05_LINE, True),
        (".cta_group::1", TCGEN05_LINE, True),
        ("UMMA", 16, False),
    ]
    assert hazards.compiled(structure(FMHA_CUH_GUARDED.encode()), Arch.parse("sm_120f"), families) == ([], [])
    undecided = FMHA_CUH.replace("__CUDA_ARCH__ >= 1000", "__CUDA_ARCH__ >= 1000 && defined(FMHA_TCGEN05)")
    _, unsure = hazards.compiled(structure(undecided.encode()), Arch.parse("sm_120f"), families)
    assert [hit.token for hit, _ in unsure] == ["tcgen05.mma", ".cta_group::1"]


def test_closures_read_through_a_function():
    files = {
        "csrc/a.cu": b'#include "b.h"\n#include <flashinfer/c.cuh>\n#include <cute/tensor.hpp>\n#include <vector>\n',
        "csrc/b.h": b"// #include <flashinfer/commented.cuh>\n",
        "include/flashinfer/c.cuh": b'#include "d.cuh"\n',
        "include/flashinfer/d.cuh": b"",
    }

    def read(rel):
        if rel not in files:
            raise FileNotFoundError(rel)
        return files[rel]

    closures = Closures("csrc", "include", lambda rel: rel in files, read, ("3rdparty/cutlass/include",))

    class Spec:
        sources = (("csrc", "a.cu"), ("csrc", "gone.cu"))
        include_dirs = ()

    closure = closures.closure(Spec)
    assert sorted(closure.files) == ["csrc/a.cu", "csrc/b.h", "include/flashinfer/c.cuh", "include/flashinfer/d.cuh"]
    assert closure.missing == ["csrc/gone.cu"] and closure.unresolved == [("csrc/a.cu", "cute/tensor.hpp")]


# ---------------------------------------------------------------- the real FlashInfer 0.6.3


def _narrowed_fmha_tree(unpacked: Path, dest: Path, layout: str) -> Path:
    """FlashInfer 0.6.3 (wheel layout, CUTLASS in flashinfer/data/cutlass; or the checkout layout with
    no CUTLASS, as a clone without submodules) with get_fmha_module's chain as it was before 9f4fd04ac."""
    from test_real_releases import flashinfer_tree

    flashinfer_tree(unpacked, dest, layout)
    prefill = dest / "flashinfer/prefill.py"
    text = prefill.read_text()
    widened = re.search(
        r"def get_fmha_module\(.*?\n    if \(\n        is_sm100a_supported\(device\)\n        or is_sm110a_supported\(device\)\n"
        r"        or is_sm120a_supported\(device\)\n        or is_sm121a_supported\(device\)\n    \):\n"
        r"        return gen_fmha_cutlass_sm100a_module\(",
        text,
        re.S,
    )
    assert widened, "0.6.3 ships get_fmha_module widened to SM12x (9f4fd04ac)"
    start = text.index("    if (\n", widened.start())
    end = text.index("    ):\n", start) + len("    ):\n")
    prefill.write_text(text[:start] + "    if is_sm100a_supported(device) or is_sm110a_supported(device):\n" + text[end:])
    git(dest, "commit", "-qam", "get_fmha_module as before FlashInfer 9f4fd04ac")
    return dest


@pytest.mark.real
@pytest.mark.parametrize("layout", ["wheel", "checkout"])
def test_replaying_9f4fd04ac_on_flashinfer_063_is_refused(cli, real_unpacked, tmp_path, layout):
    repo = _narrowed_fmha_tree(real_unpacked["flashinfer"], tmp_path / "fi", layout)
    before = tree_digest(repo)
    result = cli("run", RECIPE, "--repo", repo, "--dry-run")
    assert result.exit_code == 3, result.output
    message = " ".join(result.stderr.split())
    assert "flashinfer/prefill.py" in message and "not widenable" in message
    found = re.search(r"not widenable: (UMMA|tcgen05\.\w+) \((\S+/attention/blackwell/\S+\.hpp):(\d+), compiled by ", message)
    assert found, message
    assert found.group(1) in (repo / found.group(2)).read_text().splitlines()[int(found.group(3)) - 1]
    assert tree_digest(repo) == before


@pytest.mark.parametrize(
    ("kind", "chain"),
    [
        ("python_arch_test", "is_sm100a_supported(device)"),
        ("python_capability", "torch.cuda.get_device_capability(device)[0] == 10"),
    ],
)
def test_single_predicate_and_capability_tests_selecting_tcgen05_kernels_are_refused(cli, tmp_path, kind, chain):
    """kernel_paths.SELECTING_KINDS: an `if` of one predicate or one comparison selects its body's module too."""
    repo = fmha_tree(tmp_path / "fi", chain=chain)
    before = tree_digest(repo)
    recipe = tmp_path / "fmha-single.toml"
    recipe.write_text(RECIPE.read_text().replace('kind = "python_arch_or"', f'kind = "{kind}"'))
    result = cli("run", recipe, "--repo", repo, "--dry-run")
    assert result.exit_code == 3, result.output
    message = " ".join(result.stderr.split())
    assert "flashinfer/prefill.py:9: cannot widen" in message and "not widenable" in message
    assert f"tcgen05.mma (include/flashinfer/attention/blackwell/fmha_cutlass_sm100.cuh:{TCGEN05_LINE}" in message
    assert "compiled by gen_fmha_cutlass_sm100a_module" in message and "(--force overrides)" in message
    assert tree_digest(repo) == before

    forced = cli("run", recipe, "--repo", repo, "--force")
    assert forced.exit_code == 0, forced.output
    widened = (repo / "flashinfer/prefill.py").read_text()
    assert {
        # past the file's line length (92, its longest line): split as black splits it, one predicate a line
        "python_arch_test": "    if (\n        is_sm100a_supported(device)\n        or is_sm120a_supported(device)\n",
        # a FlashInfer file with no membership test of its own: the project's brackets for numbers (a list)
        "python_capability": "torch.cuda.get_device_capability(device)[0] in [10, 12]",
    }[kind] in widened
