"""Server arguments (example tree in SGLang's shape)."""

import dataclasses

from sglang.srt.utils import (
    is_flashinfer_available,
    is_sm90_supported,
    is_sm100_supported,
    is_sm120_supported,
)

_global_server_args = None


def get_global_server_args():
    return _global_server_args


@dataclasses.dataclass
class ServerArgs:
    model_arch: str = ""
    enable_flashinfer_allreduce_fusion: bool = False
    enable_dp_attention: bool = False
    nnodes: int = 1
    moe_runner_backend: str = "auto"

    def _handle_model_specific_adjustments(self):
        if is_sm100_supported() or is_sm120_supported():
            self.moe_runner_backend = "flashinfer_cutlass"

        # TRT-LLM allreduce fusion: on by default for a few MoE models.
        if (
            not self.enable_flashinfer_allreduce_fusion
            and self.model_arch
            in [
                "DeepseekV3ForCausalLM",
                "Qwen3MoeForCausalLM",
            ]
            and (is_sm90_supported() or is_sm100_supported())
            and not self.enable_dp_attention
            and self.nnodes == 1
        ):
            self.enable_flashinfer_allreduce_fusion = True
