"""Upstream gate edits replayed by recipes under tests/replay/recipes: the one list, and how a replay is judged.

A replay is one upstream edit that only changes which archs a check admits
(FlashInfer commits, SGLang release diffs), and a recipe for it written from
the README alone. Where PyPI has the last release without the edit and the
first with it, tests/replay/test_replay.py applies the recipe to the earlier
wheel and judges it against the later one (`real`, runs in CI); the rest
(`releases=None`) are replayed by bench/replay.py against a local FlashInfer
clone, parent commit against commit. `replay()` is the one judgement: every
gate the recipe selects changes, and each changed file comes out line for
line with upstream's, no extra edits. `fails` says which shape codemod lacks
for a replay that does not come out line for line (kept in the list and in
the score: bench/replay.py prints it for every replay).
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

RECIPES = Path(__file__).parent / "recipes"

DIST = {"flashinfer": "flashinfer-python", "sglang": "sglang"}


@dataclass(frozen=True)
class Replay:
    recipe: str  # tests/replay/recipes/<recipe>.toml
    project: str  # flashinfer | sglang
    commit: str | None  # upstream FlashInfer commit; None for SGLang (release diffs: no git host here)
    releases: tuple[str, str] | None  # (last release without the edit, first with it) on PyPI; None: bench only
    bench_why: str = ""  # why there is no release pair
    fails: str = ""  # not line for line: the shape or selector codemod lacks
    named: bool = False  # one of the edits issue 17 names
    force: str = ""  # planned as `run --force` would, and why a user reading the refusal would pass it
    # `fails` for an edit of upstream's that no recipe makes, or one codemod rightly refuses without --force
    # (not a shape codemod lacks): the recipe's own [[test]] cases pass, the replay still differs
    upstream_only: bool = False
    # What upstream's edit changed on its lines besides which archs they admit (code moved between blocks, an
    # import of a name for something else, a layout no rule asks for): by issue 17's definition not a mechanical
    # gate edit. Kept in the list and in the score of all replays; bench/replay.py scores the mechanical ones apart.
    beyond_archs: str = ""
    # (path at the commit, path at its parent): files the commit also moved. The recipe names the new path; the
    # clone replay reads the parent's copy at the old one (bench/replay.py), which is what a user had there.
    moved: tuple[tuple[str, str], ...] = ()


def _fi(recipe, commit, releases, bench_why="", fails="", named=False, force="", upstream_only=False, beyond_archs="",
        moved=()):
    return Replay(recipe, "flashinfer", commit, releases, bench_why, fails, named, force, upstream_only, beyond_archs, moved)


def _sg(recipe, releases, fails="", named=False, upstream_only=False, beyond_archs=""):
    return Replay(recipe, "sglang", None, releases, "", fails, named, upstream_only=upstream_only, beyond_archs=beyond_archs)


# beebc6074 defined `is_sm110a_supported` in flashinfer/utils.py in the same commit as the tests that import it
_NO_SM110A = (
    "refused, rightly: beebc6074^'s flashinfer/utils.py defines no `is_sm110a_supported`, which the test imports beside"
    " `is_sm100a_supported` (upstream defined it in the same commit); before codemod checked an imported predicate's"
    " module, this replay imported it all the same"
)

REPLAYS = [
    # FlashInfer, with a PyPI release pair
    _fi("nvfp4-attention-sm121", "0f69698c7", ("0.6.15", "0.6.16"), named=True),
    _fi("fi-nvfp4-attention-aot-sm121", "0f69698c7", ("0.6.15", "0.6.16"), named=True),
    _fi("cublaslt-bf16-sm80-up", "27e035e2a", ("0.6.14", "0.6.15"), named=True),
    _fi("sm121-sm120-guards", "dd417a502", ("0.6.4", "0.6.5"), named=True),
    _fi("fi-fmha-v2-deepseek-sm121", "9e5ec6a0c", ("0.6.3", "0.6.4"), named=True),
    _fi("router-gemm-sm103", "2234bf76f", ("0.6.7", "0.6.8")),
    _fi("mxfp8-gemm-sm120", "fe0539318", ("0.6.7", "0.6.8")),
    _fi("cudnn-bf16-sm87-up", "4b02655f1", ("0.6.10", "0.6.11")),
    _fi("bmm-fp8-sm110", "002087cfd", ("0.6.3", "0.6.4")),
    _fi("cudnn-bmm-bf16-sm80-up", "f6717ff6b", ("0.6.11", "0.6.12")),
    _fi("cudnn-bmm-mxfp8-sm110-up", "f6717ff6b", ("0.6.11", "0.6.12")),
    _fi("cudnn-bf16-sm80", "e7f630c80", ("0.6.7", "0.6.8")),
    _fi("xqa-sm110", "54101e953", ("0.5.2", "0.5.3")),
    _fi("cutlass-fp4-gemm-sm110", "1e75bff99", ("0.5.0", "0.5.1")),
    _fi("trtllm-allreduce-sm12x", "2deed6c15", ("0.6.16.post4", "0.6.17")),
    _fi("sm107-router-routing", "290c09186", ("0.6.15", "0.6.16")),
    _fi("sm107-norm-quant-deepgemm", "290c09186", ("0.6.15", "0.6.16")),
    _fi("sm107-gemm-base", "290c09186", ("0.6.15", "0.6.16")),
    _fi("fa2-large-head-sm80", "5a73a36a7", ("0.6.14", "0.6.15")),
    _fi(
        "fused-moe-jit-sm120", "ad893cfab", ("0.6.6", "0.6.7"),
        force="the JIT hazard check finds wgmma in nv_internal/.../deep_gemm/mma_utils.cuh, a header member"
        " function the SM12x build never instantiates; upstream shipped the same lists",
    ),
    _fi("hash-topk-sm107", "290c09186", ("0.6.15", "0.6.16")),
    _fi("bmm-fp8-heuristic-sm107", "290c09186", ("0.6.15", "0.6.16")),
    _fi(
        "cutlass-moe-backend-sm107", "290c09186", ("0.6.15", "0.6.16"),
        force="the JIT hazard check finds wgmma in nv_internal/.../deep_gemm/mma_utils.cuh, compiled by"
        " gen_cutlass_fused_moe_sm100_module, a header member function the SM10x build never instantiates;"
        " upstream sends SM107 to that module",
    ),
    _fi(
        "b12x-dense-launch-sm121", "9a463df0d", ("0.6.11", "0.6.12"),
    ),
    # FlashInfer, against a local clone only
    _fi("cutlass-fp8-gemm-sm120", "90abf04e4", None, "0.3.0 / 0.3.1: no py3-none-any wheel on PyPI", named=True),
    _fi("xqa-sm121", "5854494a0", None, "0.4.1: no py3-none-any wheel on PyPI", named=True),
    _fi("b12x-fp4-gemm-sm121", "06cb1b764", None, "0.6.8 has no b12x backend yet; 0.6.9 is the first with both"),
    _fi("cute-dsl-moe-sm120", "eb52e19ec", None, "0.6.9 also holds 8a9970b45, which narrowed these lists again"),
    _fi("mm-fp4-sm121", "a5ff03391", None, "0.4.1: no py3-none-any wheel on PyPI"),
    _fi("svdquant-sm107", "a6dfe70b7", ("0.6.17", "0.6.18")),
    _fi("cute-dsl-sm107", "f09227492", None, "after v0.6.17, the last release tag of the clone"),
    _fi("xqa-fp8-sm100", "ef687e900", None, "0.4.1: no py3-none-any wheel on PyPI"),
    # SGLang release diffs
    _sg("sg-mxfp4-marlin-sm120", ("0.5.12", "0.5.13"), named=True),
    _sg("sg-deepgemm-ue8m0-sm121", ("0.5.20", "0.5.21")),
    _sg("sg-bf16-gemv-sm12x", ("0.5.22", "0.5.23")),
    _sg("sg-mxfp4-marlin-moe-sm12x", ("0.5.13", "0.5.14")),
    _sg("sg-blackwell-sm110", ("0.5.8", "0.5.9")),
    _sg("sg-dsv3-router-gemm-sm103", ("0.5.10", "0.5.11")),
    _sg("sg-dsv4-fp4-indexer-sm120", ("0.5.16", "0.5.17")),
    _sg(
        "sg-kimi-attn-res-sm12x", ("0.5.18", "0.5.19"),
        fails="upstream narrowed: `if major < 10:` before a raise became `if major < 10 or major == 12:`, so the kernel"
        " now refuses SM12x; python_capability reads what the code after an exit admits (major 12 already), and a"
        " recipe only widens, so run leaves it (it used to make the refusal hold on SM12x when asked to admit it)",
        upstream_only=True,
    ),
    _sg("sg-qwen-qkv-epilogue-sm90", ("0.5.19", "0.5.20")),
    _sg(
        "sg-minimax-h3-sage-sm120", ("0.5.20", "0.5.21"),
    ),
    _sg("sg-vision-fa4-sm103", ("0.5.20", "0.5.21")),
    # Held out: found after the engine was built, recipes written from the README alone, in the order examined
    _sg(
        "sg-mxfp8-block-test-sm120", ("0.5.9", "0.5.10"),
    ),
    _sg(
        "sg-moe-runner-fp4-sm110", ("0.5.21", "0.5.22"),
        fails="refused, rightly: 0.5.21 has no `is_sm110` on the platform object; upstream added the predicate"
        " (runtime_context.py) in the same release, which a recipe cannot create (its own case passes: the project's"
        " [predicates] table knows `.is_sm110` from 0.5.22 on)",
        upstream_only=True,
    ),
    _sg("sg-gdn-target-verify-sm100", ("0.5.12", "0.5.13")),
    _sg("sg-mxfp4-cutlass-moe-sm120", ("0.5.15", "0.5.16")),
    _sg(
        "sg-kvfp4-flashinfer-sm120", ("0.5.15", "0.5.16"),
        fails="both blocks are widened and quantize()'s import is split as upstream's, but in dequantize() upstream"
        " also imports `is_sm90_supported` (for a new assert, not an arch gate), so its import grew to three"
        " names and was split; codemod's `from sglang.srt.utils import is_sm100_supported, is_sm120_supported`"
        " fits on one line",
        beyond_archs="the import line also gains `is_sm90_supported`, for a new assert that is no arch gate",
        upstream_only=True,
    ),
    _sg("sg-mxfp4-marlin-sm100", ("0.5.16", "0.5.17")),
    _fi("gdn-cp-heuristic-sm100", "7dce28302", ("0.6.17", "0.6.18")),
    _sg("sg-subblock-sparse-sm120", ("0.5.19", "0.5.20")),
    _sg(
        "sg-diffusion-fa4-sm120", ("0.5.19", "0.5.20"),
    ),
    _fi("sm120f-family-sm121", "ec0178acd", ("0.6.10", "0.6.11")),
    _fi("cutlass-tile-config-sm121", "20435b409", ("0.5.2", "0.5.3")),
    _fi("fi-cutlass-gen-sm103", "20435b409", ("0.5.2", "0.5.3")),
    # Held out, second round (issue 17): FlashInfer commits found newest first, then SGLang release pairs in order
    _fi(
        "fi-tmem-map-sm121", "5a767523c", ("0.6.10", "0.6.11"),
    ),
    _fi(
        "fi-mxfp4-group-gemm-test-sm12x", "904fa8cbc", None,
        "tests/ are not in the wheel (0.6.7 / 0.6.8 would be the pair)",
    ),
    _fi(
        "fi-moe-sm100-config-on-sm110", "8f4e806e2", ("0.5.3", "0.6.0"),
        fails="cpp_runtime_check finds no gate in `TLLM_CHECK_WITH_INFO(inputs.gemm_config.sm_version / 10 == sm_ / 10,"
        " ...)` (two capability variables compared with each other, through `/ 10`), even with both named `sm`;"
        " upstream writes `TLLM_CHECK_WITH_INFO((inputs.gemm_config.sm_version / 10 == sm_ / 10) ||` + a comment +"
        " `(inputs.gemm_config.sm_version / 10 == 10 && sm_ / 10 == 11),`",
    ),
    _fi(
        "fi-cutlass-moe-tests-sm11x-sm12x", "beebc6074", None,
        "tests/ are not in the wheel (0.3.0 / 0.3.1: no py3-none-any wheel either)",
    ),
    _fi("fi-tile-config-as-int-sm121", "9c609f050", None, "0.2.8 / 0.2.9 not tried (not in the test cache); replayed on the clone"),
    _sg("sg-dsv4-mhc-prenorm-sm90", ("0.5.21", "0.5.22")),
    _sg("sg-vsa-h3-sm80", ("0.5.22", "0.5.23")),
    # (a second pass over FlashInfer, matching whole hunks token by token, found three more)
    _fi(
        "fi-gemm-allreduce-test-sm103", "b9720052f", None,
        "tests/ are not in the wheel (0.5.3 / 0.6.0 would be the pair)",
        fails="python_capability writes `not in ((10, 0), (10, 3))` where upstream wrote `not in [(10, 0), (10, 3)]` in"
        " this test file: with no membership test in the file to copy, a collection of (major, minor) pairs takes a"
        " tuple, as FlashInfer's package writes them (0.7.1: 48 one-line `in ((` against 10 `in [(`; 0.7.2's"
        " packed_kda_decode_cute.py, fi-packed-kda-decode-sm10x), not the project's list style for numbers",
    ),
    _fi(
        "fi-cutlass-fmha-module-sm12x", "9f4fd04ac", None,
        "0.3.1 / 0.4.0 not tried (not in the test cache); replayed on the clone",
        fails="refused, rightly: gen_fmha_cutlass_sm100a_module's sources hold tcgen05/TMEM (UMMA, SM100_TMEM_*),"
        " which sm_120/sm_121 lack; upstream reverted this edit in 74e99e8bb (`guard CUTLASS FMHA against SM12x`)."
        " With --force it comes out line for line: python_arch_or splits the widened `if` as black does, `if (`,"
        " one predicate a line led by `or`, `):` (the split python_arch_test makes, gates/python/layout/wrap.py)",
        upstream_only=True,
    ),
    _fi(
        "fi-cutlass-mla-test-sm110", "beebc6074", None,
        "tests/ are not in the wheel (0.3.0 / 0.3.1: no py3-none-any wheel either)",
        fails=_NO_SM110A,
        upstream_only=True,
    ),
    # (and the same pass over SGLang release pairs, one more)
    _sg(
        "sg-deepgemm-block32-sm100", ("0.5.22", "0.5.23"),
    ),
    # Held out, third round (issue 17): FlashInfer release pairs 0.6.17 -> 0.7.4, in the order examined. Three
    # edits 0.6.18 ships were replayed above from the clone (svdquant-sm107 and gdn-cp-heuristic-sm100, now on
    # this release pair too; cute-dsl-sm107's fused_moe.py decorators): counted once, there
    _fi(
        "fi-dsl-fmha-artifacts-sm107", None, ("0.6.17", "0.6.18"),
        fails="python_arch_list writes `DSL_FMHA_ARCHS: tuple[str, ...] = (\"sm_100a\", \"sm_103a\", \"sm_107a\","
        " \"sm_110a\")` on one line (84 columns, within the file's limit); upstream exploded the tuple one entry"
        " a line with a trailing comma (`(`, four lines, `)`), a reformatting no rule in the file asks for (black keeps the line as codemod writes it)",
        beyond_archs="the tuple, which still fits its line, is laid out again one entry a line",
        upstream_only=True,
    ),
    _fi("fi-cute-dsl-config-sm107", None, ("0.6.17", "0.6.18")),
    _fi("fi-cute-dsl-gemm-sm107", None, ("0.6.17", "0.6.18")),
    _fi("fi-masked-grouped-gemm-sm107", None, ("0.6.17", "0.6.18")),
    _fi("fi-router-gemm-sm90", None, ("0.6.18", "0.7.0")),
    _fi("fi-moe-utils-jit-sm90", None, ("0.6.18", "0.7.0")),
    _fi("fi-aot-sm103", None, ("0.7.0", "0.7.1")),
    _fi("fi-cake-warp-decode-sm100", None, ("0.7.0", "0.7.1")),
    _fi("fi-cute-dsl-mm-bf16-sm107", None, ("0.7.0", "0.7.1")),
    _fi("fi-cute-dsl-gemm-fp4-sm12x", None, ("0.7.0", "0.7.1")),
    _fi("fi-cake-dcp-sm107", None, ("0.7.0", "0.7.1")),
    _fi("fi-msa-blackwell-sm107", None, ("0.7.0", "0.7.1")),
    _fi(
        "fi-aot-sm110", None, ("0.7.1", "0.7.2"),
        fails="three of the four gates are refused, rightly, each needing an edit no recipe makes: in gen_attention the"
        " fmha_cutlass_sm100a block also yields gen_trtllm_gen_fmha_module() (prebuilt SM10x cubins): needs a human."
        " In gen_all_modules, the CUTLASS FP8/MXFP8 GEMM and MXFP8 quantization modules share their block with the"
        " trtllm-gen GEMM/MoE/routing modules, and dcp_alltoall with the MNNVL comm module: needs a human. Upstream"
        " split all three blocks, the other modules staying under `if has_sm100 or has_sm103:`. The MLA SM100 test"
        " comes out as upstream's, with the `has_sm110: bool` parameter added to gen_attention and passed from"
        " gen_all_modules",
        beyond_archs="three blocks are split, modules moved out of the gated block into new ones",
        upstream_only=True,
    ),
    _fi("fi-gemm-base-sm107", None, ("0.7.1", "0.7.2")),
    _fi("fi-bf16-fp4-requirement-sm107", None, ("0.7.1", "0.7.2")),
    _fi("fi-grouped-mm-sm107", None, ("0.7.1", "0.7.2")),
    _fi("fi-bsa-attn-blk64-sm107", None, ("0.7.1", "0.7.2")),
    _fi("fi-dsv4-nvfp4-cache-sm100", None, ("0.7.1", "0.7.2")),
    _fi("fi-mla-cute-dsl-plan-sm107", None, ("0.7.1", "0.7.2")),
    _fi("fi-mla-trtllm-gen-sm107", None, ("0.7.1", "0.7.2")),
    _fi("fi-vsa-sparse-sm107", None, ("0.7.1", "0.7.2")),
    _fi("fi-packed-kda-decode-sm10x", None, ("0.7.1", "0.7.2")),
    _fi("fi-recurrent-kda-fast-path-sm10x", None, ("0.7.1", "0.7.2")),
    _fi("fi-batch-mla-fp8-scale-sm10x", None, ("0.7.1", "0.7.2")),
    _fi("fi-cutile-mla-sm107", None, ("0.7.1", "0.7.2")),
    # (found while checking the list against the diff: not in the previous pass's list)
    _fi("fi-bsa-attn-blk128-sm107", None, ("0.7.1", "0.7.2")),
    # Held out, fourth round (issue 17): FlashInfer 0.7.2 -> 0.7.4, in the order examined. An edit 0.7.2.post1
    # already ships is paired (0.7.2, 0.7.2.post1), the others (0.7.2.post1, 0.7.4): bench/replay_rounds/round4-flashinfer-0.7.2-0.7.4.md
    _fi("fi-blackwell-softmax-sm107", None, ("0.7.2.post1", "0.7.4")),
    _fi("fi-aot-trtllm-utils-sm107", None, ("0.7.2", "0.7.2.post1")),
    _fi("fi-batch-hca-sm107", None, ("0.7.2", "0.7.2.post1")),
    _fi("fi-trtllm-routed-fp8-sm107", None, ("0.7.2", "0.7.2.post1")),
    _fi("fi-cudnn-frost-configs-sm120", None, ("0.7.2.post1", "0.7.4")),
    _fi("fi-fused-routing-dsv3-sm107", None, ("0.7.2.post1", "0.7.4")),
    _fi("fi-trtllm-gen-routing-sm107", None, ("0.7.2.post1", "0.7.4")),
    _fi("fi-gdn-prefill-sm8x", None, ("0.7.2.post1", "0.7.4")),
    _fi("fi-gemm-base-tinygemm-cake-sm107", None, ("0.7.2.post1", "0.7.4")),
    _fi("fi-cake-bgmv-moe-sm107", None, ("0.7.2.post1", "0.7.4")),
    _fi("fi-moe-utils-jit-sm8x-sm11x-sm12x", None, ("0.7.2.post1", "0.7.4")),
    _fi("fi-kda-prefill-cute-sm107", None, ("0.7.2.post1", "0.7.4")),
    _fi("fi-replayssm-commit-sm120", None, ("0.7.2.post1", "0.7.4")),
    #
    # Held out, fifth round (issue 17): SGLang 0.5.5 -> 0.5.8 release pairs, in the order examined (bench/replay_rounds/round5-sglang-0.5.5-0.5.8.md:
    # none in 0.5.5 -> 0.5.6; 0.5.7 -> 0.5.8's one edit narrows, which no recipe writes)
    _sg("sg-w8a8-int8-min-cap-sm80", ("0.5.6", "0.5.7")),
    #
    # Held out, sixth round (issue 17): FlashInfer 0.6.8 -> 0.6.10 and 0.6.12 -> 0.6.14 release pairs, one edit
    # (bench/replay_rounds/round6-flashinfer-0.6.8-0.6.10-0.6.12-0.6.14.md: none in 0.6.8 -> 0.6.10 or 0.6.13 -> 0.6.14)
    _fi("fi-mla-decode-fp8-softmax-sm101-sm110", "2cf8f4cc7", ("0.6.12", "0.6.13")),
    # Held out, sixth round (issue 17): SGLang 0.5.11 -> 0.5.12, 0.5.14 -> 0.5.15, 0.5.17 -> 0.5.18, in the order
    # examined (bench/replay_rounds/round6-sglang-0.5.11-0.5.12-0.5.14-0.5.15-0.5.17-0.5.18.md: none in 0.5.11 -> 0.5.12)
    _sg("sg-mla-fused-a-gemm-sm12x", ("0.5.14", "0.5.15")),
    _sg(
        "sg-cutedsl-bf16-gemm-sm107", ("0.5.17", "0.5.18"),
        fails="python_capability writes `if get_device_sm() not in (100, 103, 107):` where upstream replaced the"
        " comparison by SGLang's predicate for the whole major, `if not is_sm100_supported():` (device_capability_majors"
        "=[10]), and swapped the now unused import `from sglang.srt.utils import get_device_sm` for `... import"
        " is_sm100_supported`: codemod has no rewrite from a capability comparison to a predicate",
        beyond_archs="the comparison is replaced by a predicate call of another form, and the import line swaps"
        " get_device_sm for is_sm100_supported: lines changed beyond which archs the check admits",
        upstream_only=True,
    ),
    # Held out, seventh round (issue 17): FlashInfer 0.5.1 -> 0.5.2, 0.6.0 -> 0.6.3, 0.6.5 -> 0.6.6 release pairs, one
    # edit, in tests/ (bench/replay_rounds/round7-flashinfer-0.5.1-0.6.6.md: none in the wheels)
    _fi(
        "fi-fp4-quantize-test-sm110-sm12x", "635505f75", None,
        "tests/ are not in the wheel (0.6.5 / 0.6.6 would be the pair)",
    ),
    # Held out, seventh round (issue 17): SGLang 0.5.1 -> 0.5.5 release pairs, post releases included, in the order
    # examined (bench/replay_rounds/round7-sglang-0.5.1-0.5.5.md: none in 0.5.2 -> 0.5.3 or 0.5.3 -> 0.5.4)
    _sg("sg-deepgemm-jit-sm100-up", ("0.5.1", "0.5.1.post1")),
    _sg("sg-allreduce-fusion-sm90", ("0.5.1.post3", "0.5.2")),
    _sg("sg-is-blackwell-sm12x", ("0.5.4.post1", "0.5.4.post2")),
    # Held out, eighth round (issue 17): SGLang 0.4.7 -> 0.5.1 release pairs, post releases included, in the order
    # examined (bench/replay_rounds/round8-sglang-0.4.7-0.5.1.md: none in 0.4.8 -> 0.4.9 or 0.4.9 -> 0.4.10)
    _sg(
        "sg-shared-experts-fusion-sm80", ("0.4.7.post1", "0.4.8"),
    ),
    _sg(
        "sg-cutlass-moe-fp8-sm90", ("0.4.10.post2", "0.5.1"),
        fails="refused, rightly: 0.4.10.post2's srt/layers/utils.py, which fp8.py imports `is_sm100_supported` from,"
        " defines no `is_sm90_supported` (upstream added it there in the same release); the first pass imported it"
        " from there all the same, on the [predicates] table's word, and the patched fp8.py no longer imported",
        upstream_only=True,
    ),
    # Held out, eighth round (issue 17): FlashInfer 0.2.14 -> 0.5.0 release pairs, post releases included, in the
    # order examined (bench/replay_rounds/round8-flashinfer-0.2.14-0.5.0.md). The index has sdists only up to 0.3.1.post1
    # and no py3-none-any wheel of 0.4.1, so every pair is replayed on the clone (commit's parent vs commit)
    _fi("fi-trtllm-moe-launcher-sm10x", "beebc6074", None, "0.3.0.post1 / 0.3.1: sdists only on the package index"),
    _fi("fi-cutlass-moe-backend-sm103-sm110-sm12x", "beebc6074", None, "0.3.0.post1 / 0.3.1: sdists only on the package index"),
    _fi(
        "fi-blackwell-fmha-test-sm110", "beebc6074", None, "tests/ are not in the wheel (0.3.0.post1 / 0.3.1 would be the pair)",
        fails=_NO_SM110A,  # with `negation = "and_not"` in the recipe its lines are upstream's where the predicate exists
        upstream_only=True,
    ),
    _fi(
        "fi-deepgemm-sf-layout-sm103", "4d4e8c057", None, "0.3.1.post1 / 0.4.0: 0.3.1.post1 is an sdist only",
    ),
    _fi("fi-aot-xqa-sm100-sm12x", "ef687e900", None, "0.4.1 / 0.5.0: no py3-none-any wheel of 0.4.1"),
    _fi(
        "fi-xqa-test-sm100-sm120", "ef687e900", None, "tests/ are not in the wheel (0.4.1 / 0.5.0 would be the pair)",
        fails="the skipif comes out as upstream's (`[0] not in [9, 10, 12],`), but test_xqa's in-body duplicate skip"
        " `if compute_capability[0] != 9:` is widened too (`not in [9, 10, 12]`), where upstream deleted it with its"
        " `compute_capability = ...` line and its `pytest.skip(...)`",
        beyond_archs="the in-body duplicate skip is deleted, not widened",
        upstream_only=True,
    ),
    _fi(
        "fi-bench-mm-fp4-backends-sm121", "a5ff03391", None,
        "benchmarks/ are not in the wheel (0.4.1 / 0.5.0 would be the pair)",
    ),
    # Held out, ninth round (issue 17): FlashInfer 0.2.0 -> 0.2.14, every tag, in the order examined
    # (bench/replay_rounds/round9-flashinfer-0.2.0-0.2.14.md). No 0.2.x has a wheel on the package index
    _fi(
        "fi-cutlass-heuristic-sm12x", "9c609f050", None, bench_why="no wheel on PyPI for 0.2.x (sdists only)",
        fails="cpp_runtime_check widens get_candidate_configs' `if (sm == 120 && (config_type_param &"
        " CutlassGemmConfig::BLACKWELL))` by adding an equality, `(sm == 120 || sm == 121) && ...`; upstream opened the"
        " equality into a lower bound, `sm >= 120 && ...` (the same archs of the universe, whose top is sm_121, and any"
        " later one): codemod has no rewrite of `==` into `>=` when the old value and the targets are every arch from it up",
    ),
    _fi(
        "fi-moe-gemm-dispatch-sm121", "9c609f050", None, bench_why="no wheel on PyPI for 0.2.x (sdists only)",
        moved=tuple(
            (f"csrc/nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/{name}",
             f"csrc/nv_internal/tensorrt_llm/kernels/internal_cutlass_kernels/src/moe_gemm/{name}")
            for name in ("moe_gemm_template_dispatch.h", "moe_gemm_template_dispatch_tma_ws.h")
        ),
    ),
    # Held out, tenth round (issue 17): SGLang 0.5.8 -> 0.5.11 and 0.5.18 -> 0.5.23, every release, in the order
    # examined (bench/replay_rounds/round10-sglang-0.5.8-0.5.11-0.5.18-0.5.23.md)
    _sg(
        "sg-cutlass-fp8-moe-assert-sm120", ("0.5.9", "0.5.10"),
        fails="the assert comes out `assert is_sm100_supported() or is_sm90_supported() or is_sm120_supported()` (86"
        " columns, one line) and the import gains `is_sm120_supported,` after `is_sm100_supported,`, both as upstream's"
        " condition and import; upstream also gave the assert a message (`, \"cutlass_fp8 MoE requires SM90, SM100, or"
        " SM120 GPUs\"`), which made black split it into `assert (` / the `or` chain / `), \"...\"`",
        beyond_archs="the assert gains a message, and with it black's three-line layout",
        upstream_only=True,
    ),
    _sg(
        "sg-inkling-fa4-sm90", ("0.5.21", "0.5.22"),
        fails="the conditional expression comes out widened and split as black splits it, `inkling_attn_backend = (` /"
        " `\"fa4\" if get_platform().is_sm100 or get_platform().is_sm90 else \"triton\"` / `)`, but upstream rewrote it as"
        " an if/else (`if get_platform().is_sm90 or get_platform().is_sm100:` / `inkling_attn_backend = \"fa4\"` / `else:`"
        " / ...), which no recipe writes",
        upstream_only=True,
        beyond_archs="the conditional expression is rewritten as an if/else statement",
    ),
    # Held out, tenth round (issue 17): FlashInfer 0.6.14 -> 0.7.2 release pairs, post releases included, in the
    # order examined (bench/replay_rounds/round10-flashinfer-0.6.14-0.7.2.md): what earlier rounds left out
    _fi("fi-deepgemm-sf-layout-sm107", "290c09186", ("0.6.15.post1", "0.6.16")),
    _fi("fi-deepgemm-tables-sm107", "290c09186", ("0.6.15.post1", "0.6.16")),
    _fi(
        "fi-fmha-family-pair-sm107", "290c09186", ("0.6.15.post1", "0.6.16"),
        fails="cpp_runtime_check refuses isFamilySpecificSMPair's `(sm1 == kSM_100f && (sm2 == kSM_100 || sm2 =="
        " kSM_103)) || (...)`: it compares with named constants (constexpr int32_t kSM_100 = 100 in trtllm/common.h),"
        " not integer literals (its [[test]] case defines them beside the function, and is refused the same way);"
        " upstream wrote `|| sm2 == kSM_107` / `|| sm1 == kSM_107`. Once codemod reads such constants this replay"
        " should still be refused: 0.6.15.post1 defines no kSM_107 (upstream added it to common.h in the same"
        " commit), and the entry would become upstream_only",
    ),
    _fi("fi-cutlass-gen-sm107", "290c09186", ("0.6.15.post1", "0.6.16")),
    _fi("fi-topk-varlen-gvr-sm107", None, ("0.6.18.post1", "0.7.0")),
    _fi("fi-gated-act-mxfp8-sm107", None, ("0.7.1", "0.7.2")),
    _fi("fi-cvt-rs-guard-sm107", None, ("0.7.1", "0.7.2")),
    _fi("fi-cvt-rs-predicate-sm107", None, ("0.7.1", "0.7.2")),
]

BY_RECIPE = {r.recipe: r for r in REPLAYS}
WITH_RELEASES = [r for r in REPLAYS if r.releases]
BENCH_ONLY = [r for r in REPLAYS if not r.releases]


NEAR = 3


def extra_lines(before: bytes, ours: bytes, upstream: bytes) -> tuple[list[str], list[str]]:
    """Lines our edit adds and removes that upstream's edit of the same place does not: both empty is line for line.

    Both edits are aligned to the earlier file (difflib): each line we remove
    must be a line upstream also changed there, and each line we add must be
    among the lines upstream wrote there (within NEAR lines of it).
    """
    b, o, u = (data.decode("utf-8").splitlines() for data in (before, ours, upstream))
    theirs = [op for op in difflib.SequenceMatcher(None, b, u, autojunk=False).get_opcodes() if op[0] != "equal"]
    extra_added: list[str] = []
    extra_removed: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, b, o, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        # upstream's edits at this place: overlapping ours, or within NEAR lines (an alignment may split a hunk)
        touching = [op for op in theirs if op[1] <= i2 + NEAR and i1 - NEAR <= op[2]]
        written = Counter(line for op in touching for line in u[op[3] : op[4]])
        changed = {i for op in touching for i in range(op[1], op[2])}
        extra_removed += [b[i] for i in range(i1, i2) if i not in changed]
        extra_added += list((Counter(o[j1:j2]) - written).elements())
    return sorted(extra_added), sorted(extra_removed)


def replay(
    recipe, target, read_before: Callable[[str], bytes], read_upstream: Callable[[str], bytes], force: bool = False
) -> dict:
    """Plan `recipe` on the earlier tree and judge each file it changes against upstream's."""
    from codemods.plan import planner

    plan = planner.plan(recipe, target, read=read_before, force=force)
    outcomes = {c.id: (c.outcome, c.reason) for c in plan.changes}
    files: dict[str, tuple[bytes, bytes]] = {}
    for change in plan.changes:
        if change.outcome == "changed":
            first = files.get(change.file, (change.before, change.before))[0]
            files[change.file] = (first, change.after)
    judged = {}
    for file, (before, ours) in files.items():
        judged[file] = extra_lines(before, ours, read_upstream(file))
    line_for_line = all(o == "changed" for o, _ in outcomes.values()) and all(not a and not r for a, r in judged.values())
    return {"outcomes": outcomes, "extra": judged, "line_for_line": line_for_line}


def wheel_reader(wheel: Path) -> Callable[[str], bytes]:
    """Read a file of a wheel (site-packages layout) without unpacking it."""
    import zipfile

    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())

    def read(rel: str) -> bytes:
        if rel not in names:
            raise FileNotFoundError(rel)
        return archive.read(rel)

    return read


def on_release_pair(entry: Replay, fetch_wheel: Callable[[str, str], Path]) -> dict:
    """`replay()` of one entry on its PyPI release pair: the earlier wheel planned, the later one the reference."""
    from codemods.recipes import load as recipes
    from codemods.recipes.model import ProjectTree

    before, after = entry.releases
    earlier, later = fetch_wheel(DIST[entry.project], before), fetch_wheel(DIST[entry.project], after)
    project = recipes.projects()[entry.project]
    layout = next(layout for layout in project.layouts if layout.name == "wheel")
    target = ProjectTree(project, layout, earlier)
    recipe = recipes.load_recipe(RECIPES / f"{entry.recipe}.toml")
    return replay(recipe, target, wheel_reader(earlier), wheel_reader(later), force=bool(entry.force))
