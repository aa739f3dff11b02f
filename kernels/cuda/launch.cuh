// Owns the launch shape shared by our element-wise kernels (grid-stride loops over int64 counts) and the check
// after every launch. Internal to kernels/cuda: only .cu files include it.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"

namespace ringtrain::kernels::cuda::detail {

constexpr int kThreads = 256;

// Enough blocks to fill any current GPU several times over; grid-stride loops cover the rest, so counts past
// 2^31 need no special case.
inline unsigned blocks_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 8192));
}

__device__ inline int64_t global_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace ringtrain::kernels::cuda::detail

// Launch errors (bad configuration, no kernel image for this GPU) surface here; faults inside a kernel surface
// at the next synchronising call.
#define RT_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
