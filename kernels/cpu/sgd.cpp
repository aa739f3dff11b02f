// Owns the fused SGD-with-momentum update: one pass reading grad, velocity and param, writing the latter two and
// zeroing grad (cheaper here than a separate zeroing pass before the next step).
#include "kernels/cpu/sgd.h"

#include "kernels/cpu/decay_spans.h"
#include "kernels/cpu/gemm.h"
#include "kernels/update_scalars.h"

namespace ringtrain::kernels::cpu {
namespace {

// Distinct buffers by contract; __restrict lets the loop vectorise without run-time overlap checks. Nesterov is a
// template argument so that neither loop tests it per element.
template <bool kNesterov>
inline void update_span(int64_t begin, int64_t end, float lr, float momentum, float weight_decay,
                        float* __restrict g, float* __restrict v, float* __restrict p) {
  for (int64_t i = begin; i < end; ++i) {
    const float gi = g[i] + weight_decay * p[i];
    const float vi = momentum * v[i] + gi;
    v[i] = vi;
    p[i] -= lr * (kNesterov ? gi + momentum * vi : vi);
    g[i] = 0.0f;
  }
}

}  // namespace

void sgd_momentum_update(int64_t n, const SgdStep& step, const uint32_t* decay_mask, float* grad,
                         float* velocity, float* param) {
  const float lr = update_scalars(step).lr;
  for_each_decay_span_on(compute_threads(), n, decay_mask, [&](int64_t begin, int64_t end, bool decays) {
    const float decay = decays ? step.weight_decay : 0.0f;
    if (step.nesterov)
      update_span<true>(begin, end, lr, step.momentum, decay, grad, velocity, param);
    else
      update_span<false>(begin, end, lr, step.momentum, decay, grad, velocity, param);
  });
}

}  // namespace ringtrain::kernels::cpu
