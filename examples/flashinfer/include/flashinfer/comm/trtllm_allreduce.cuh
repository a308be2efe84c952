// Example header in the shape of FlashInfer's trtllm_allreduce.cuh: one-shot and
// two-shot lamport allreduce kernels that use programmatic dependent launch (PDL)
// where the guard admits the arch.
#pragma once

#include <cuda_runtime.h>

namespace flashinfer {
namespace trtllm_allreduce {

__device__ __forceinline__ void st_flag_release(unsigned int flag, unsigned int* addr) {
#if __CUDA_ARCH__ >= 700
  asm volatile("st.global.release.sys.b32 [%1], %0;" ::"r"(flag), "l"(addr));
#else
  __threadfence_system();
  asm volatile("st.global.volatile.b32 [%1], %0;" ::"r"(flag), "l"(addr));
#endif
}

template <typename T>
__global__ void oneshot_lamport_allreduce(T* out, T const* in, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))
  cudaGridDependencySynchronize();
#endif
  if (idx < n) {
    out[idx] = in[idx];
  }
#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

template <typename T>
__global__ void twoshot_lamport_allreduce(T* out, T const* in, int n) {
  // A guard quoted in a comment is not a gate:
  // #if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))
  cudaGridDependencySynchronize();
#endif
  for (int i = idx; i < n; i += gridDim.x * blockDim.x) {
    out[i] = in[i] + in[i];
  }
#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

}  // namespace trtllm_allreduce
}  // namespace flashinfer
