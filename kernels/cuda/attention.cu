// Owns the softmax kernels declared in attention.h, instantiated for the three element types.
#include <cfloat>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/launch.cuh"

namespace ringtrain::kernels::cuda {
namespace {

using detail::load;
using detail::store;

constexpr int kRowThreads = 256;

__device__ inline int64_t row_start(const SquareRows& r, int64_t row) {
  return row / r.tokens * r.square.sample_stride + r.square.offset + row % r.tokens * r.square.ld;
}

// The block's reduction of `mine` by `combine`, in a fixed tree order, returned to every thread.
template <class Combine>
__device__ float block_reduce(float mine, Combine combine) {
  __shared__ float values[kRowThreads];
  values[threadIdx.x] = mine;
  __syncthreads();
  for (int half = kRowThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) values[threadIdx.x] = combine(values[threadIdx.x], values[threadIdx.x + half]);
    __syncthreads();
  }
  const float total = values[0];
  __syncthreads();  // every thread has read the total before the array is written again
  return total;
}

template <class T>
__global__ void softmax_rows_kernel(SquareRows scores, const float* s, SquareRows probabilities, T* p) {
  const float* in = s + row_start(scores, blockIdx.x);
  T* out = p + row_start(probabilities, blockIdx.x);
  float row_max = -FLT_MAX;
  for (int j = threadIdx.x; j < scores.tokens; j += kRowThreads) row_max = fmaxf(row_max, in[j]);
  row_max = block_reduce(row_max, [](float a, float b) { return fmaxf(a, b); });
  float sum = 0;
  for (int j = threadIdx.x; j < scores.tokens; j += kRowThreads) sum += softmax_term(in[j], row_max);
  sum = block_reduce(sum, [](float a, float b) { return a + b; });
  // Divided, not multiplied by 1 / sum, as the CPU twin (kernels/cpu/attention.cpp) does: one rounding fewer apart
  // (the sums still add in another order).
  for (int j = threadIdx.x; j < scores.tokens; j += kRowThreads) store(out + j, softmax_term(in[j], row_max) / sum);
}

template <class T>
__global__ void softmax_backward_rows_kernel(SquareRows probabilities, const T* p, SquareRows gradients,
                                             const float* dp, T* ds) {
  const T* p_row = p + row_start(probabilities, blockIdx.x);
  const int64_t at = row_start(gradients, blockIdx.x);
  float dot = 0;
  for (int j = threadIdx.x; j < gradients.tokens; j += kRowThreads) dot += load(p_row + j) * dp[at + j];
  dot = block_reduce(dot, [](float a, float b) { return a + b; });
  for (int j = threadIdx.x; j < gradients.tokens; j += kRowThreads)
    store(ds + at + j, softmax_gradient(load(p_row + j), dp[at + j], dot));
}

}  // namespace

void softmax_rows(const SquareRows& scores, const float* score_data, const SquareRows& probabilities, ElementType type,
                  void* probability_data, Stream stream) {
  if (scores.rows() <= 0) return;
  detail::with_element(type, [&](auto t) {
    using T = decltype(t);
    softmax_rows_kernel<<<static_cast<unsigned>(scores.rows()), kRowThreads, 0, stream>>>(
        scores, score_data, probabilities, static_cast<T*>(probability_data));
  });
  RT_CHECK_LAUNCH();
}

void softmax_backward_rows(const SquareRows& probabilities, ElementType type, const void* probability_data,
                           const SquareRows& gradients, const float* dp_data, void* d_score_data, Stream stream) {
  if (gradients.rows() <= 0) return;
  detail::with_element(type, [&](auto t) {
    using T = decltype(t);
    softmax_backward_rows_kernel<<<static_cast<unsigned>(gradients.rows()), kRowThreads, 0, stream>>>(
        probabilities, static_cast<const T*>(probability_data), gradients, dp_data, static_cast<T*>(d_score_data));
  });
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
