"""Device predicates (example tree in SGLang's shape)."""

from functools import lru_cache, partial


def _check_cuda_device_version(device_capability_majors, cuda_version):
    import torch

    if not torch.cuda.is_available():
        return False
    major, _ = torch.cuda.get_device_capability()
    return major in device_capability_majors and tuple(
        int(x) for x in torch.version.cuda.split(".")[:2]
    ) >= cuda_version


def is_cuda():
    return True


def is_flashinfer_available():
    return True


is_sm120_supported = lru_cache(maxsize=1)(
    partial(_check_cuda_device_version, device_capability_majors=[12], cuda_version=(12, 8))
)
is_sm100_supported = lru_cache(maxsize=1)(
    partial(_check_cuda_device_version, device_capability_majors=[10], cuda_version=(12, 8))
)
is_sm90_supported = lru_cache(maxsize=1)(
    partial(_check_cuda_device_version, device_capability_majors=[9], cuda_version=(12, 3))
)
