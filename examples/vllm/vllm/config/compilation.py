"""Pass configuration, in the shape of vLLM's vllm/config/compilation.py (own text)."""

from vllm.platforms import current_platform

FI_SUPPORTED_WORLD_SIZES = [2, 4, 8]
MiB = 1024 * 1024


def default_fi_allreduce_fusion_max_size_mb() -> dict[int, float]:
    from vllm.compilation.passes.fusion.allreduce_rms_fusion import FI_ALLREDUCE_FUSION_MAX_SIZE_MB

    capability = current_platform.get_device_capability()
    if capability is None:
        return {}
    return FI_ALLREDUCE_FUSION_MAX_SIZE_MB.get(capability.to_int(), {})


def flashinfer_max_size(world_size: int) -> int | None:
    """None (the fusion disables itself) where the capability has no row."""
    if world_size not in FI_SUPPORTED_WORLD_SIZES:
        return None
    max_size_mb = default_fi_allreduce_fusion_max_size_mb().get(world_size)
    return int(max_size_mb * MiB) if max_size_mb is not None else None
