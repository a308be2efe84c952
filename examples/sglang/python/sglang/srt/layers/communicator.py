"""Layer communicator (example tree in SGLang's shape)."""

from sglang.srt.server_args import get_global_server_args
from sglang.srt.utils import (
    is_cuda,
    is_flashinfer_available,
    is_sm90_supported,
    is_sm100_supported,
)

_is_cuda = is_cuda()
_is_flashinfer_available = is_flashinfer_available()
_is_sm90_supported = _is_cuda and is_sm90_supported()
_is_sm100_supported = _is_cuda and is_sm100_supported()

FUSE_ALLREDUCE_MAX_BATCH_SIZE = 2048


def apply_flashinfer_allreduce_fusion(batch_size: int):
    return (
        # Hopper and datacenter Blackwell only, for now.
        (_is_sm90_supported or _is_sm100_supported)
        and _is_flashinfer_available
        and batch_size > 0
        and batch_size <= FUSE_ALLREDUCE_MAX_BATCH_SIZE
        and get_global_server_args().enable_flashinfer_allreduce_fusion
    )


def use_fused_qk_norm():
    # Same predicates, different feature: not part of the recipe.
    return _is_sm90_supported or _is_sm100_supported
