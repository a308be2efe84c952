"""jit_specs: FlashInfer's gen_jit_spec calls, their sources and the gates that pick their archs."""

from __future__ import annotations

from textwrap import dedent

from codemods.arch import Arch
from codemods.jit_specs import find

SM120 = Arch.parse("sm_120")


def _specs(text: str):
    return find(dedent(text).encode())


def test_literal_module_list_sources_and_majors():
    [spec] = _specs(
        """\
        def gen_trtllm_comm_module() -> JitSpec:
            nvcc_flags = current_compilation_context.get_nvcc_flags_list(
                supported_major_versions=[9, 10]
            )
            return gen_jit_spec(
                "trtllm_comm",
                [
                    jit_env.FLASHINFER_CSRC_DIR / "trtllm_allreduce.cu",
                    jit_env.FLASHINFER_CSRC_DIR / "nv_internal" / "cpp" / "common" / "envUtils.cpp",
                    jit_env.FLASHINFER_CSRC_DIR / "nv_internal/cpp/common/tllmException.cpp",
                ],
                extra_include_paths=[str(jit_env.FLASHINFER_CSRC_DIR / "nv_internal" / "include")],
                extra_cuda_cflags=nvcc_flags,
            )
        """
    )
    assert (spec.module, spec.function, spec.line) == ("trtllm_comm", "gen_trtllm_comm_module", 5)
    assert spec.sources == (
        ("csrc", "trtllm_allreduce.cu"),
        ("csrc", "nv_internal/cpp/common/envUtils.cpp"),
        ("csrc", "nv_internal/cpp/common/tllmException.cpp"),
    )
    assert spec.include_dirs == (("csrc", "nv_internal/include"),)
    assert (spec.gate.majors, spec.gate.text, spec.gate.line) == ((9, 10), "[9, 10]", 3)
    assert not spec.gate.admits(SM120) and spec.gate.admits(Arch.parse("sm_103"))


def test_a_spec_without_gate():
    [spec] = _specs(
        'def gen_norm_module():\n    return gen_jit_spec("norm", [jit_env.FLASHINFER_CSRC_DIR / "norm.cu"])\n'
    )
    assert spec.gate is None


def test_computed_list_is_no_gate():
    [spec] = _specs(
        """\
        def gen_m():
            flags = ctx.get_nvcc_flags_list(supported_major_versions=MAJORS)
            flags += ctx.get_nvcc_flags_list(supported_major_versions=[9, *MORE])
            return gen_jit_spec("m", [], extra_cuda_cflags=flags)
        """
    )
    assert spec.gate is None


def test_callers_give_one_variant_each_and_flag_names_are_exact_targets():
    specs = _specs(
        """\
        def gen_fused_moe_sm120_module():
            nvcc_flags = ["-DX"] + ctx.get_nvcc_flags_list(supported_major_versions=[12])
            return gen_fused_moe_module(nvcc_flags, "120")


        def gen_fused_moe_sm90_module():
            nvcc_flags = sm90a_nvcc_flags + ["-DX"]
            return gen_fused_moe_module(nvcc_flags, "90")


        def gen_fused_moe_plain_module():
            return gen_fused_moe_module([], "80")


        def gen_fused_moe_module(nvcc_flags, device_arch):
            sources = [jit_env.FLASHINFER_CSRC_DIR / "fused_moe" / "binding.cu"]
            for name in ["moe_kernels.cu"]:
                sources.append(jit_env.FLASHINFER_GEN_SRC_DIR / name)
            return gen_jit_spec(f"fused_moe_{device_arch}", sources, extra_cuda_cflags=nvcc_flags)
        """
    )
    assert [(s.module, s.gate.majors, s.gate.targets) for s in specs] == [
        ("gen_fused_moe_sm120_module", (12,), ()),
        ("gen_fused_moe_sm90_module", (), (Arch.parse("sm_90a"),)),
    ]
    assert specs[0].sources == (("csrc", "fused_moe/binding.cu"), ("csrc", "moe_kernels.cu"))
    assert specs[1].gate.admits(Arch.parse("sm_90")) and not specs[1].gate.admits(SM120)


def test_flags_added_under_an_if_make_no_gate():
    specs = _specs(
        """\
        def gen_batch_mla_module(backend):
            extra_cuda_cflags = []
            if backend == "fa3":
                extra_cuda_cflags += sm90a_nvcc_flags
            return gen_jit_spec(uri, source_paths, extra_cuda_cflags=extra_cuda_cflags)


        def gen_single_prefill_module(backend):
            if backend == "fa2":
                return gen_jit_spec(uri, ["single_prefill.cu"])
            return gen_jit_spec(uri, ["single_prefill_sm90.cu"], extra_cuda_cflags=sm90a_nvcc_flags)
        """
    )
    assert [(s.module, s.gate and s.gate.text, s.sources) for s in specs] == [
        ("gen_batch_mla_module", None, ()),
        ("gen_single_prefill_module", None, (("csrc", "single_prefill.cu"),)),
        ("gen_single_prefill_module", "sm90a_nvcc_flags", (("csrc", "single_prefill_sm90.cu"),)),
    ]


def test_no_call_no_parse():
    assert find(b"this is not python (") == []
