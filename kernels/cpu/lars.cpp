// Owns the LARS update: norms per tensor, then the momentum update scaled by each tensor's trust ratio.
#include "kernels/cpu/lars.h"

#include <cmath>

#include "kernels/update_scalars.h"

namespace ringtrain::kernels::cpu {
namespace {

struct Norms {
  double weight = 0, grad = 0;
};

Norms norms_of(int64_t count, const float* __restrict w, const float* __restrict g) {
  double ww = 0, gg = 0;
  for (int64_t i = 0; i < count; ++i) {
    ww += static_cast<double>(w[i]) * w[i];
    gg += static_cast<double>(g[i]) * g[i];
  }
  return {std::sqrt(ww), std::sqrt(gg)};
}

template <bool kNesterov>
inline void update_tensor(int64_t count, float scaled_lr, float momentum, float weight_decay, float* __restrict g,
                          float* __restrict v, float* __restrict p) {
  for (int64_t i = 0; i < count; ++i) {
    const float step = scaled_lr * (g[i] + weight_decay * p[i]);
    const float vi = momentum * v[i] + step;
    v[i] = vi;
    p[i] -= kNesterov ? momentum * vi + step : vi;
    g[i] = 0.0f;
  }
}

void update_tensor(bool nesterov, int64_t count, float scaled_lr, float momentum, float weight_decay, float* g,
                   float* v, float* p) {
  if (nesterov)
    update_tensor<true>(count, scaled_lr, momentum, weight_decay, g, v, p);
  else
    update_tensor<false>(count, scaled_lr, momentum, weight_decay, g, v, p);
}

}  // namespace

float lars_trust_ratio(const LarsStep& step, double weight_norm, double grad_norm) {
  if (weight_norm <= 0 || grad_norm <= 0) return 1.0f;
  return static_cast<float>(step.trust_coefficient * weight_norm /
                            (grad_norm + step.weight_decay * weight_norm + step.epsilon));
}

void lars_update(int tensors, const TensorRange* ranges, const LarsStep& step, float* grad, float* velocity,
                 float* param) {
  const float lr = update_scalars(step).lr;
  for (int t = 0; t < tensors; ++t) {
    const TensorRange& r = ranges[t];
    float* g = grad + r.begin;
    float* v = velocity + r.begin;
    float* p = param + r.begin;
    if (r.adapt == 0) {
      update_tensor(step.nesterov, r.count, lr, step.momentum, 0.0f, g, v, p);
      continue;
    }
    const Norms n = norms_of(r.count, p, g);
    update_tensor(step.nesterov, r.count, lr * lars_trust_ratio(step, n.weight, n.grad), step.momentum,
                  step.weight_decay, g, v, p);
  }
}

}  // namespace ringtrain::kernels::cpu
