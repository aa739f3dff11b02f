// Owns the dropout kernels declared in dropout.h.
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/launch.cuh"

namespace ringtrain::kernels::cuda {
namespace {

using detail::global_index;
using detail::grid_stride;

__global__ void dropout_forward_kernel(int64_t n, float p, float keep_scale, uint64_t seed, const float* x, float* y,
                                       uint8_t* mask) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const bool keep = dropout_keeps(seed, static_cast<uint64_t>(i), p);
    mask[i] = keep ? 1 : 0;
    y[i] = keep ? x[i] * keep_scale : 0.0f;
  }
}

__global__ void dropout_backward_kernel(int64_t n, float keep_scale, const uint8_t* mask, const float* dy, float* dx) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) dx[i] = mask[i] ? dy[i] * keep_scale : 0.0f;
}

// 1/(1-p); p >= 1 keeps nothing, and a scale of 0 keeps the arithmetic finite.
float keep_scale_for(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

}  // namespace

void dropout_forward(int64_t n, float p, uint64_t seed, const float* x, float* y, uint8_t* mask, Stream stream) {
  if (n <= 0) return;
  dropout_forward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(n, p, keep_scale_for(p), seed, x, y,
                                                                                  mask);
  RT_CHECK_LAUNCH();
}

void dropout_backward(int64_t n, float p, const uint8_t* mask, const float* dy, float* dx, Stream stream) {
  if (n <= 0) return;
  dropout_backward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(n, keep_scale_for(p), mask, dy, dx);
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
