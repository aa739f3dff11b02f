// Owns the kernels of sum_squares.h: a fixed grid of blocks each sums a grid-stride share of the buffer into a
// partial, then one block adds the partials; both reductions run in a fixed tree order.
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/sum_squares.h"

namespace ringtrain::kernels::cuda {
namespace {

constexpr int kBlocks = 256, kThreads = 256;  // the second launch adds kBlocks partials with kThreads threads

__device__ double block_total(double mine) {
  __shared__ double sums[kThreads];
  sums[threadIdx.x] = mine;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  return sums[0];
}

__global__ void partial_squares_kernel(int64_t n, const float* x, double* partials) {
  double mine = 0;
  for (int64_t i = detail::global_index(); i < n; i += detail::grid_stride()) mine += static_cast<double>(x[i]) * x[i];
  const double total = block_total(mine);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void add_partials_kernel(const double* partials, double* total) {
  const double sum = block_total(partials[threadIdx.x]);
  if (threadIdx.x == 0) *total = sum;
}

static_assert(kBlocks == kThreads, "the second launch gives each thread one partial");

}  // namespace

std::size_t sum_squares_scratch_bytes() { return sizeof(double) * kBlocks; }

void sum_squares(int64_t n, const float* x, double* total, void* scratch, Stream stream) {
  auto* partials = static_cast<double*>(scratch);
  partial_squares_kernel<<<kBlocks, kThreads, 0, stream>>>(n, x, partials);
  RT_CHECK_LAUNCH();
  add_partials_kernel<<<1, kThreads, 0, stream>>>(partials, total);
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
