"""The allreduce + RMSNorm fusion pass, in the shape of vLLM's (own text)."""

from vllm.platforms import current_platform

# Max size of the input tensor per world size per device capability
# to use flashinfer fused allreduce
FI_ALLREDUCE_FUSION_MAX_SIZE_MB: dict[int, dict[int, float]] = {
    90: {
        2: 64,  # 64MB
        4: 2,  # 2MB
        8: 0.5,  # 0.5MB
    },
    100: {
        2: 64,  # 64MB
        4: 32,  # 32MB
        8: 1,  # 1MB
    },
    103: {
        2: 64,  # 64MB
        4: 64,  # 64MB
        8: 2,  # 2MB
    },
}

# Max size of the input tensor per world size per device capability
# to use flashinfer one shot fused allreduce
_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB: dict[int, dict[int, float]] = {
    90: {
        2: 32,  # 32MB
        4: 2,  # 2MB
        8: 0.5,  # 0.5MB
    },
    100: {
        2: 32,  # 32MB
        4: 4,  # 4MB
        8: 1,  # 1MB
    },
}

MiB = 1024 * 1024


def use_oneshot(world_size: int, tensor_size: int) -> bool:
    capability = current_platform.get_device_capability()
    device_capability = capability.to_int() if capability is not None else None
    max_one_shot_size = _FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB.get(device_capability, {}).get(world_size)
    return max_one_shot_size is None or tensor_size <= max_one_shot_size * MiB


def register_patterns(patterns: list) -> None:
    patterns.append("allreduce_rms")
    if current_platform.has_device_capability(100):
        patterns.append("allreduce_rms_nvfp4_quant")
