// Owns the fused SGD kernel declared in sgd.h: one read of grad, velocity, param and the decay bit, one write of
// velocity and param (and zero to grad), over the whole flat buffer in one launch.
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/sgd.h"
#include "kernels/cuda/update_scalars.cuh"

namespace ringtrain::kernels::cuda {
namespace {

template <bool kNesterov, class Scalars>
__global__ void sgd_momentum_kernel(int64_t n, Scalars scalars, float momentum, float weight_decay,
                                    const uint32_t* decay_mask, float* grad, float* velocity, float* param) {
  const float lr = scalars.get().lr;
  for (int64_t i = detail::global_index(); i < n; i += detail::grid_stride()) {
    const float p = param[i];
    const float wd = (decay_mask[i >> 5] >> (i & 31)) & 1u ? weight_decay : 0.0f;
    const float g = grad[i] + wd * p;
    const float v = momentum * velocity[i] + g;
    velocity[i] = v;
    param[i] = p - lr * (kNesterov ? g + momentum * v : v);
    grad[i] = 0.0f;
  }
}

template <class Scalars>
void launch_sgd(int64_t n, const SgdStep& step, Scalars scalars, const uint32_t* decay_mask, float* grad,
                float* velocity, float* param, Stream stream) {
  if (n <= 0) return;
  const auto kernel = step.nesterov ? sgd_momentum_kernel<true, Scalars> : sgd_momentum_kernel<false, Scalars>;
  kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(n, scalars, step.momentum, step.weight_decay,
                                                                 decay_mask, grad, velocity, param);
  RT_CHECK_LAUNCH();
}

}  // namespace

void sgd_momentum_update(int64_t n, const SgdStep& step, const uint32_t* decay_mask, float* grad,
                         float* velocity, float* param, Stream stream) {
  launch_sgd(n, step, detail::ScalarsByValue{update_scalars(step)}, decay_mask, grad, velocity, param, stream);
}

void sgd_momentum_update(int64_t n, const SgdStep& step, const UpdateScalars* scalars, const uint32_t* decay_mask,
                         float* grad, float* velocity, float* param, Stream stream) {
  launch_sgd(n, step, detail::ScalarsOnDevice{scalars}, decay_mask, grad, velocity, param, stream);
}

}  // namespace ringtrain::kernels::cuda
