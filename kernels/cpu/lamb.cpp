// Owns the LAMB update: a first pass updates the moments and sums the norms, a second applies the scaled
// direction. The direction is recomputed in the second pass from the stored moments rather than kept, so LAMB
// needs no buffer beyond Adam's two.
#include "kernels/cpu/lamb.h"

#include <cmath>

namespace ringtrain::kernels::cpu {
namespace {

struct Direction {
  float step_scale, inv_sqrt_c2, epsilon, weight_decay;
  float at(float m, float v, float w) const { return step_scale * m / (std::sqrt(v) * inv_sqrt_c2 + epsilon) + weight_decay * w; }
};

}  // namespace

void lamb_update(int tensors, const TensorRange* ranges, const AdamStep& step, float* grad, float* m, float* v,
                 float* param) {
  for (int t = 0; t < tensors; ++t) {
    const TensorRange& r = ranges[t];
    const Direction dir{1.0f / step.bias_correction1, 1.0f / std::sqrt(step.bias_correction2), step.epsilon,
                        r.adapt ? step.weight_decay : 0.0f};
    float* __restrict g = grad + r.begin;
    float* __restrict mt = m + r.begin;
    float* __restrict vt = v + r.begin;
    float* __restrict p = param + r.begin;
    double ww = 0, dd = 0;
    for (int64_t i = 0; i < r.count; ++i) {
      mt[i] = step.beta1 * mt[i] + step.gradient_weight1 * g[i];
      vt[i] = step.beta2 * vt[i] + step.gradient_weight2 * g[i] * g[i];
      g[i] = 0.0f;
      const float d = dir.at(mt[i], vt[i], p[i]);
      ww += static_cast<double>(p[i]) * p[i];
      dd += static_cast<double>(d) * d;
    }
    const double wn = std::sqrt(ww), dn = std::sqrt(dd);
    const float trust = r.adapt && wn > 0 && dn > 0 ? static_cast<float>(wn / dn) : 1.0f;
    const float scaled_lr = step.lr * trust;
    for (int64_t i = 0; i < r.count; ++i) p[i] -= scaled_lr * dir.at(mt[i], vt[i], p[i]);
  }
}

}  // namespace ringtrain::kernels::cpu
