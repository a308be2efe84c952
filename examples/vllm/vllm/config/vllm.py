"""Engine configuration, in the shape of vLLM's vllm/config/vllm.py (own text)."""

from vllm.platforms import current_platform


def has_flashinfer() -> bool:
    return True


def enable_allreduce_rms_fusion(tensor_parallel_size: int) -> bool:
    """Enable if TP > 1 and Hopper/Blackwell and flashinfer installed."""
    return (
        tensor_parallel_size > 1
        and current_platform.is_cuda()
        and has_flashinfer()
        and (
            current_platform.is_device_capability_family(100)
            or current_platform.is_device_capability(90)
        )
    )
