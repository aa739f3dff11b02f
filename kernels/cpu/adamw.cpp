// Owns the fused AdamW update: one pass reading grad, both moments and param, writing the latter three and zeroing
// grad.
#include "kernels/cpu/adamw.h"

#include <cmath>

#include "kernels/cpu/decay_spans.h"
#include "kernels/cpu/gemm.h"
#include "kernels/update_scalars.h"

namespace ringtrain::kernels::cpu {
namespace {

struct AdamScalars {
  float decay_factor, beta1, beta2, weight1, weight2, step_size, inv_sqrt_c2, epsilon;
};

inline void update_span(int64_t begin, int64_t end, const AdamScalars& s, float* __restrict g,
                        float* __restrict m, float* __restrict v, float* __restrict p) {
  for (int64_t i = begin; i < end; ++i) {
    const float gi = g[i];
    const float mi = s.beta1 * m[i] + s.weight1 * gi;
    const float vi = s.beta2 * v[i] + s.weight2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    g[i] = 0.0f;
    p[i] = p[i] * s.decay_factor - s.step_size * mi / (std::sqrt(vi) * s.inv_sqrt_c2 + s.epsilon);
  }
}

}  // namespace

void adamw_update(int64_t n, const AdamStep& step, const uint32_t* decay_mask, float* grad, float* m, float* v,
                  float* param) {
  const UpdateScalars scalars = update_scalars(step);
  const AdamScalars common{1.0f,
                           step.beta1,
                           step.beta2,
                           step.gradient_weight1,
                           step.gradient_weight2,
                           scalars.step_size,
                           scalars.inv_sqrt_c2,
                           step.epsilon};
  AdamScalars decaying = common;
  decaying.decay_factor = scalars.decay_factor;
  for_each_decay_span_on(compute_threads(), n, decay_mask, [&](int64_t begin, int64_t end, bool decays) {
    update_span(begin, end, decays ? decaying : common, grad, m, v, param);
  });
}

}  // namespace ringtrain::kernels::cpu
