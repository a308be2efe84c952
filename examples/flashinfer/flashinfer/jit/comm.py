"""JIT specs for the communication kernels (example tree in FlashInfer's shape)."""

from .core import JitSpec, gen_jit_spec, current_compilation_context
from . import env as jit_env


def gen_vllm_comm_module() -> JitSpec:
    return gen_jit_spec(
        "vllm_comm",
        [jit_env.FLASHINFER_CSRC_DIR / "vllm_custom_all_reduce.cu"],
    )


def gen_trtllm_mnnvl_comm_module() -> JitSpec:
    # MNNVL needs multicast memory: Hopper and datacenter Blackwell only.
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[9, 10]
    )
    return gen_jit_spec(
        "trtllm_mnnvl_comm",
        [jit_env.FLASHINFER_CSRC_DIR / "trtllm_mnnvl_allreduce.cu"],
        extra_cuda_cflags=nvcc_flags,
    )


def gen_trtllm_comm_module() -> JitSpec:
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[9, 10]
    )
    return gen_jit_spec(
        "trtllm_comm",
        [
            jit_env.FLASHINFER_CSRC_DIR / "trtllm_allreduce.cu",
            jit_env.FLASHINFER_CSRC_DIR / "trtllm_allreduce_fusion.cu",
        ],
        extra_cuda_cflags=nvcc_flags,
    )
