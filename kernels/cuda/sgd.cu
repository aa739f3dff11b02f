// Owns the fused SGD kernel declared in sgd.h: one read of grad, velocity and param, one write of the latter two.
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/sgd.h"

namespace ringtrain::kernels::cuda {
namespace {

__global__ void sgd_momentum_kernel(int64_t n, float lr, float momentum, float weight_decay, const float* grad,
                                    float* velocity, float* param) {
  for (int64_t i = detail::global_index(); i < n; i += detail::grid_stride()) {
    const float p = param[i];
    const float g = grad[i] + weight_decay * p;
    const float v = momentum * velocity[i] + g;
    velocity[i] = v;
    param[i] = p - lr * v;
  }
}

}  // namespace

void sgd_momentum_update(int64_t n, float lr, float momentum, float weight_decay, const float* grad, float* velocity,
                         float* param, Stream stream) {
  if (n <= 0) return;
  sgd_momentum_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(n, lr, momentum, weight_decay, grad,
                                                                               velocity, param);
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
