// Owns the element-wise kernels declared in elementwise.h.
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.cuh"

namespace ringtrain::kernels::cuda {
namespace {

using detail::global_index;
using detail::grid_stride;

__global__ void add_kernel(int64_t n, const float* a, const float* b, float* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = a[i] + b[i];
}
__global__ void accumulate_kernel(int64_t n, const float* x, float* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] += x[i];
}
__global__ void fill_kernel(int64_t n, float value, float* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = value;
}
__global__ void scale_kernel(int64_t n, float factor, float* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] *= factor;
}
// Threads that see a non-finite value all write the same 1, so the race is harmless.
__global__ void unscale_kernel(int64_t n, float factor, float* y, int32_t* nonfinite) {
  bool bad = false;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    bad |= !isfinite(y[i]);
    y[i] *= factor;
  }
  if (bad) *nonfinite = 1;
}
__global__ void relu_forward_kernel(int64_t n, const float* x, float* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
__global__ void relu_backward_kernel(int64_t n, const float* y, const float* dy, float* dx) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}
__global__ void add_bias_rows_kernel(int64_t n, int units, const float* bias, float* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] += bias[i % units];
}
__global__ void bias_grad_rows_kernel(int rows, int units, const float* dy, float* dbias) {
  for (int64_t u = global_index(); u < units; u += grid_stride()) {
    float sum = 0.0f;
    for (int r = 0; r < rows; ++r) sum += dy[static_cast<int64_t>(r) * units + u];  // coalesced across threads
    dbias[u] += sum;
  }
}

}  // namespace

using detail::blocks_for;
using detail::kThreads;

void add(int64_t n, const float* a, const float* b, float* y, Stream stream) {
  if (n <= 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, a, b, y);
  RT_CHECK_LAUNCH();
}
void accumulate(int64_t n, const float* x, float* y, Stream stream) {
  if (n <= 0) return;
  accumulate_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x, y);
  RT_CHECK_LAUNCH();
}
void fill(int64_t n, float value, float* y, Stream stream) {
  if (n <= 0) return;
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, value, y);
  RT_CHECK_LAUNCH();
}
void scale(int64_t n, float factor, float* y, Stream stream) {
  if (n <= 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, factor, y);
  RT_CHECK_LAUNCH();
}
void unscale(int64_t n, float factor, float* y, int32_t* nonfinite, Stream stream) {
  if (n <= 0) return;
  unscale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, factor, y, nonfinite);
  RT_CHECK_LAUNCH();
}
void relu_forward(int64_t n, const float* x, float* y, Stream stream) {
  if (n <= 0) return;
  relu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x, y);
  RT_CHECK_LAUNCH();
}
void relu_backward(int64_t n, const float* y, const float* dy, float* dx, Stream stream) {
  if (n <= 0) return;
  relu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, y, dy, dx);
  RT_CHECK_LAUNCH();
}
void add_bias_rows(int rows, int units, const float* bias, float* y, Stream stream) {
  const int64_t n = static_cast<int64_t>(rows) * units;
  if (n <= 0) return;
  add_bias_rows_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, units, bias, y);
  RT_CHECK_LAUNCH();
}
void bias_grad_rows(int rows, int units, const float* dy, float* dbias, Stream stream) {
  if (rows <= 0 || units <= 0) return;
  bias_grad_rows_kernel<<<blocks_for(units), kThreads, 0, stream>>>(rows, units, dy, dbias);
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
