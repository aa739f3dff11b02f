// Owns the fp32 <-> bf16 conversion kernels declared in cast.h.
#include <cuda_bf16.h>

#include "kernels/cuda/cast.h"
#include "kernels/cuda/launch.cuh"

namespace ringtrain::kernels::cuda {
namespace {

__global__ void float_to_bf16_kernel(int64_t n, const float* x, __nv_bfloat16* y) {
  for (int64_t i = detail::global_index(); i < n; i += detail::grid_stride()) y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void bf16_to_float_kernel(int64_t n, const __nv_bfloat16* x, float* y) {
  for (int64_t i = detail::global_index(); i < n; i += detail::grid_stride()) y[i] = __bfloat162float(x[i]);
}

}  // namespace

static_assert(sizeof(__nv_bfloat16) == sizeof(uint16_t));

void float_to_bf16(int64_t n, const float* x, uint16_t* y, Stream stream) {
  if (n <= 0) return;
  float_to_bf16_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(n, x,
                                                                               reinterpret_cast<__nv_bfloat16*>(y));
  RT_CHECK_LAUNCH();
}

void bf16_to_float(int64_t n, const uint16_t* x, float* y, Stream stream) {
  if (n <= 0) return;
  bf16_to_float_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(
      n, reinterpret_cast<const __nv_bfloat16*>(x), y);
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
