// Example translation unit in the shape of FlashInfer's csrc/trtllm_allreduce.cu: the host
// wrapper that packs the peers' buffer pointers into the kernels' parameter block.
#include <cstdint>

#include "flashinfer/comm/trtllm_allreduce.cuh"

using namespace flashinfer::trtllm_allreduce;

// Stand-ins for the parameter block the real header declares.
constexpr int MAX_RANKS_PER_NODE = 16;

struct FusionParams {
  // Three lamport buffers, each with a slot per rank: the kernels read buffer b of rank r
  // at [r + b * MAX_RANKS_PER_NODE].
  void* lamport_peer_comm_buffer_ptrs[MAX_RANKS_PER_NODE * 3];
};

struct AllReduceParams {
  void* peer_comm_buffer_ptrs[MAX_RANKS_PER_NODE];
  FusionParams fusion_params;
};

#define REQUIRE_BUFFER(ptr, name)                          \
  if ((ptr) == nullptr) {                                  \
    /* the real wrapper throws through TVM_FFI_ICHECK */   \
    return;                                                \
  }

void trtllm_lamport_initialize_all(int64_t tp_size, void** slots) {
  // Not the wrapper: the same index written here is no concern of the layout fix.
  for (int i = 0; i < tp_size; ++i) {
    slots[i + tp_size] = nullptr;
  }
}

void trtllm_custom_all_reduce(int64_t tp_size, int64_t const* peer_comm_buffer_ptrs,
                              int64_t const* lamport_peer_comm_buffer_ptrs_0,
                              int64_t const* lamport_peer_comm_buffer_ptrs_1,
                              int64_t const* lamport_peer_comm_buffer_ptrs_2) {
  AllReduceParams params{};
  for (int i = 0; i < tp_size; ++i) {
    params.peer_comm_buffer_ptrs[i] = reinterpret_cast<void*>(peer_comm_buffer_ptrs[i]);
  }
  if (lamport_peer_comm_buffer_ptrs_0 != nullptr) {
    REQUIRE_BUFFER(lamport_peer_comm_buffer_ptrs_1, "lamport_peer_comm_buffer_ptrs_1")
    REQUIRE_BUFFER(lamport_peer_comm_buffer_ptrs_2, "lamport_peer_comm_buffer_ptrs_2")
    for (int i = 0; i < tp_size; ++i) {
      params.fusion_params.lamport_peer_comm_buffer_ptrs[i] =
          reinterpret_cast<void*>(lamport_peer_comm_buffer_ptrs_0[i]);
      params.fusion_params.lamport_peer_comm_buffer_ptrs[i + tp_size] = reinterpret_cast<void*>(
          lamport_peer_comm_buffer_ptrs_1[i]);
      params.fusion_params.lamport_peer_comm_buffer_ptrs[i + tp_size * 2] =
          reinterpret_cast<void*>(lamport_peer_comm_buffer_ptrs_2[i]);
    }
  }
  (void)params;
}
