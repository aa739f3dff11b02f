// Owns the moving-average kernel declared in ema.h: one read of param and ema, one write of ema, per element.
#include "kernels/cuda/ema.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/optimizer_step.h"

namespace ringtrain::kernels::cuda {
namespace {

__global__ void ema_kernel(int64_t n, EmaStep step, const float* param, float* ema) {
  for (int64_t i = detail::global_index(); i < n; i += detail::grid_stride())
    ema[i] = ema_blend(step, ema[i], param[i]);
}

}  // namespace

void ema_update(int64_t n, const EmaStep& step, const float* param, float* ema, Stream stream) {
  if (n <= 0) return;
  ema_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(n, step, param, ema);
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
