// A vLLM-shaped CUDA header (own text): no arch gate here.
#pragma once
namespace vllm {
template <typename T>
__device__ inline T add(T a, T b) { return a + b; }
}  // namespace vllm
