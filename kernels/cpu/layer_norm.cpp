// Owns the CPU layer normalisation declared in layer_norm.h: single loops on the calling thread, as the other
// per-element kernels run, each position's values read with the layout's strides.
#include "kernels/cpu/layer_norm.h"

#include <vector>

namespace ringtrain::kernels::cpu {
namespace {

// Position i of sample n: its first value and the step between its channels.
struct PositionAt {
  int64_t base, step;
};
PositionAt position_at(const Planes& p, PlaneStrides st, int64_t n, int64_t i) {
  return {n * p.c * p.hw + i * st.position, st.channel};
}

}  // namespace

void layer_norm_forward(const Planes& p, ActivationLayout layout, float epsilon, const float* x,
                        const LayerNormTensors& t, float* y) {
  const PlaneStrides st = plane_strides(p, layout);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t i = 0; i < p.hw; ++i) {
      const PositionAt at = position_at(p, st, n, i);
      const float* xs = x + at.base;
      const LayerNormStats s = layer_norm_stats(p.c, epsilon, [&](int64_t c) { return xs[c * at.step]; });
      t.mean[n * p.hw + i] = s.mean, t.rstd[n * p.hw + i] = s.rstd;
      for (int64_t c = 0; c < p.c; ++c)
        y[at.base + c * at.step] = layer_norm_output(xs[c * at.step], s, t.gamma[c], t.beta[c]);
    }
}

void layer_norm_backward(const Planes& p, ActivationLayout layout, const float* x, const float* dy,
                         const LayerNormTensors& t, float* dx, float* dgamma, float* dbeta) {
  const PlaneStrides st = plane_strides(p, layout);
  std::vector<double> dgamma_sum(static_cast<size_t>(p.c)), dbeta_sum(static_cast<size_t>(p.c));
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t i = 0; i < p.hw; ++i) {
      const PositionAt at = position_at(p, st, n, i);
      const float *xs = x + at.base, *dys = dy + at.base;
      const LayerNormStats s{t.mean[n * p.hw + i], t.rstd[n * p.hw + i]};
      for (int64_t c = 0; c < p.c; ++c) {
        const float d = dys[c * at.step];
        dgamma_sum[static_cast<size_t>(c)] += layer_norm_gamma_gradient_term(xs[c * at.step], d, s);
        dbeta_sum[static_cast<size_t>(c)] += d;
      }
      if (!dx) continue;
      const LayerNormGradientMeans m = layer_norm_gradient_means(
          p.c, s, [&](int64_t c) { return xs[c * at.step]; }, [&](int64_t c) { return dys[c * at.step]; },
          [&](int64_t c) { return t.gamma[c]; });
      for (int64_t c = 0; c < p.c; ++c)
        dx[at.base + c * at.step] = layer_norm_input_gradient(xs[c * at.step], dys[c * at.step], t.gamma[c], s, m);
    }
  for (int64_t c = 0; c < p.c; ++c) {
    dgamma[c] += static_cast<float>(dgamma_sum[static_cast<size_t>(c)]);
    dbeta[c] += static_cast<float>(dbeta_sum[static_cast<size_t>(c)]);
  }
}

}  // namespace ringtrain::kernels::cpu
