// Example translation unit in the shape of FlashInfer's csrc/trtllm_allreduce.cu.
#include "flashinfer/comm/trtllm_allreduce.cuh"
