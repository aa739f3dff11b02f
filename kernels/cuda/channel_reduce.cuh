// Owns what our NCHW kernels that reduce per channel share (a convolution's bias gradient, batch norm): blocks of
// kChannelThreads threads, each thread visiting a fixed share of a channel's batch x spatial values, and the
// block's sums added in a fixed tree order, so results are deterministic. Internal to kernels/cuda: only .cu files
// include it.
#pragma once
#include <cstdint>

namespace ringtrain::kernels::cuda::detail {

constexpr int kChannelThreads = 256;

// Calls f(index) for this thread's share of channel `c`'s values in an N x C x spatial tensor.
template <class F>
__device__ void for_channel(int batch, int channels, int spatial, int c, F&& f) {
  const int64_t count = static_cast<int64_t>(batch) * spatial;
  for (int64_t k = threadIdx.x; k < count; k += kChannelThreads) {
    const int64_t n = k / spatial, i = k % spatial;
    f((n * channels + c) * spatial + i);
  }
}

struct PairSum {
  double a = 0, b = 0;
};

// The block's sums in a fixed tree order, returned to every thread of the block.
__device__ inline PairSum block_sum(PairSum mine) {
  __shared__ double a[kChannelThreads], b[kChannelThreads];
  a[threadIdx.x] = mine.a, b[threadIdx.x] = mine.b;
  __syncthreads();
  for (int half = kChannelThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      a[threadIdx.x] += a[threadIdx.x + half];
      b[threadIdx.x] += b[threadIdx.x + half];
    }
    __syncthreads();
  }
  const PairSum total{a[0], b[0]};
  __syncthreads();  // every thread has read the total before the shared arrays are written again
  return total;
}

}  // namespace ringtrain::kernels::cuda::detail
