// Owns the fused SGD-with-momentum update: one pass reading grad, velocity and param, writing the latter two.
#include "kernels/cpu/sgd.h"

namespace ringtrain::kernels::cpu {

void sgd_momentum_update(int64_t n, float lr, float momentum, float weight_decay, const float* grad,
                         float* velocity, float* param) {
  // Distinct buffers by contract; __restrict lets the loop vectorise without run-time overlap checks.
  const float* __restrict g = grad;
  float* __restrict v = velocity;
  float* __restrict p = param;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + weight_decay * p[i];
    const float vi = momentum * v[i] + gi;
    v[i] = vi;
    p[i] -= lr * vi;
  }
}

}  // namespace ringtrain::kernels::cpu
