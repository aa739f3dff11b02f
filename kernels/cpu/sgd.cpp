// Owns the fused SGD-with-momentum update: one pass reading grad, velocity and param, writing the latter two.
#include "kernels/cpu/sgd.h"

namespace ringtrain::kernels::cpu {
namespace {

// Distinct buffers by contract; __restrict lets the loop vectorise without run-time overlap checks.
inline void update_span(int64_t begin, int64_t end, float lr, float momentum, float weight_decay,
                        const float* __restrict g, float* __restrict v, float* __restrict p) {
  for (int64_t i = begin; i < end; ++i) {
    const float gi = g[i] + weight_decay * p[i];
    const float vi = momentum * v[i] + gi;
    v[i] = vi;
    p[i] -= lr * vi;
  }
}

}  // namespace

void sgd_momentum_update(int64_t n, const SgdStep& step, const uint32_t* decay_mask, const float* grad,
                         float* velocity, float* param) {
  // Parameter tensors are long runs of one kind, so nearly every 32-parameter word of the mask is all ones or
  // all zeros: those spans run as one vectorised loop; only words that straddle two tensors go element by element.
  // Runs of uniform words are merged so the loop sees long spans.
  int64_t begin = 0;
  while (begin < n) {
    const uint32_t word = decay_mask[begin >> 5];
    const int64_t word_end = begin + 32 < n ? begin + 32 : n;
    if (word != 0u && word != ~0u) {
      for (int64_t i = begin; i < word_end; ++i)
        update_span(i, i + 1, step.lr, step.momentum, decays(decay_mask, i) ? step.weight_decay : 0.0f, grad,
                    velocity, param);
      begin = word_end;
      continue;
    }
    int64_t end = word_end;
    while (end < n && decay_mask[end >> 5] == word) end = end + 32 < n ? end + 32 : n;
    update_span(begin, end, step.lr, step.momentum, word ? step.weight_decay : 0.0f, grad, velocity, param);
    begin = end;
  }
}

}  // namespace ringtrain::kernels::cpu
