"""What FlashInfer's JIT asks of the machine: its own module, read by the interpreter and given by flags' callers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Machine:
    """What FlashInfer's JIT asks of the machine it runs on."""

    cuda_home: str  # the folder above nvcc's bin/
    cuda_version: str  # "13.0"
    tvm_ffi_include: str  # apache-tvm-ffi's include folder (holds tvm/ffi and dlpack)
    python_include: str = "/usr/include/python3"
