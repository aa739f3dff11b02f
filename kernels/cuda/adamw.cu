// Owns the fused AdamW kernel declared in adamw.h: one read of grad, both moments, param and the decay bit, one
// write of the moments and param.
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/update_scalars.cuh"

namespace ringtrain::kernels::cuda {
namespace {

template <class Scalars>
__global__ void adamw_kernel(int64_t n, Scalars scalars, AdamStep step, const uint32_t* decay_mask, float* grad,
                             float* m, float* v, float* param) {
  const UpdateScalars s = scalars.get();
  const float decay_factor = s.decay_factor, step_size = s.step_size, inv_sqrt_c2 = s.inv_sqrt_c2;
  for (int64_t i = detail::global_index(); i < n; i += detail::grid_stride()) {
    const float g = grad[i];
    grad[i] = 0.0f;
    const float mi = step.beta1 * m[i] + step.gradient_weight1 * g;
    const float vi = step.beta2 * v[i] + step.gradient_weight2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float keep = (decay_mask[i >> 5] >> (i & 31)) & 1u ? decay_factor : 1.0f;
    param[i] = param[i] * keep - step_size * mi / (sqrtf(vi) * inv_sqrt_c2 + step.epsilon);
  }
}

template <class Scalars>
void launch_adamw(int64_t n, const AdamStep& step, Scalars scalars, const uint32_t* decay_mask, float* grad, float* m,
                  float* v, float* param, Stream stream) {
  if (n <= 0) return;
  adamw_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(n, scalars, step, decay_mask, grad, m, v,
                                                                       param);
  RT_CHECK_LAUNCH();
}

}  // namespace

void adamw_update(int64_t n, const AdamStep& step, const uint32_t* decay_mask, float* grad, float* m, float* v,
                  float* param, Stream stream) {
  launch_adamw(n, step, detail::ScalarsByValue{update_scalars(step)}, decay_mask, grad, m, v, param, stream);
}

void adamw_update(int64_t n, const AdamStep& step, const UpdateScalars* scalars, const uint32_t* decay_mask,
                  float* grad, float* m, float* v, float* param, Stream stream) {
  launch_adamw(n, step, detail::ScalarsOnDevice{scalars}, decay_mask, grad, m, v, param, stream);
}

}  // namespace ringtrain::kernels::cuda
