// Owns spatial batch normalisation on the CPU.
//
// Per-channel sums run over N planes of H x W. They are taken in two steps so every hot loop is a plain
// element-wise loop the compiler vectorises under strict IEEE rules: first the N planes are added element by
// element into a float row of H x W partial sums (N terms each, 64 in the model), then that row is summed in
// double. A float reduction written directly (s += x[i]) is left scalar without -ffast-math, and eight
// hand-made float lanes were vectorised across the wrong loop and ran ~5x slower than this.
// The variance is a second pass over centred values, because E[x^2] - E[x]^2 cancels when |mean| >> std.
#include "kernels/cpu/batchnorm.h"

#include <cmath>
#include <cstddef>
#include <vector>

namespace ringtrain::kernels::cpu {
namespace {

const float* plane(const BatchNormShape& s, const float* base, int n, int c) {
  return base + (std::ptrdiff_t{n} * s.channels + c) * s.spatial;
}

// Four independent double chains: enough to hide the add latency, exact enough for 10^5-10^6 terms.
double sum_row(const float* v, int n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int i = 0;
  for (; i + 4 <= n; i += 4) s0 += v[i], s1 += v[i + 1], s2 += v[i + 2], s3 += v[i + 3];
  for (; i < n; ++i) s0 += v[i];
  return (s0 + s1) + (s2 + s3);
}

// Per-channel sum of x: partial[i] = sum over n of x[n][c][i], then summed.
double channel_sum(const BatchNormShape& s, const float* x, int c, float* __restrict partial) {
  const float* __restrict first = plane(s, x, 0, c);
  for (int i = 0; i < s.spatial; ++i) partial[i] = first[i];
  for (int n = 1; n < s.batch; ++n) {
    const float* __restrict p = plane(s, x, n, c);
    for (int i = 0; i < s.spatial; ++i) partial[i] += p[i];
  }
  return sum_row(partial, s.spatial);
}

double channel_centred_squares(const BatchNormShape& s, const float* x, int c, float mean, float* __restrict partial) {
  for (int i = 0; i < s.spatial; ++i) partial[i] = 0.0f;
  for (int n = 0; n < s.batch; ++n) {
    const float* __restrict p = plane(s, x, n, c);
    for (int i = 0; i < s.spatial; ++i) {
      const float d = p[i] - mean;
      partial[i] += d * d;
    }
  }
  return sum_row(partial, s.spatial);
}

// y = x * scale + shift over every plane of channel c; with relu, then max(y, 0) written as relu_forward writes
// it (a NaN passes through), so the fused pass gives relu_forward's bits.
void affine_channel(const BatchNormShape& s, int c, const float* x, float scale, float shift, float* y, bool relu) {
  for (int n = 0; n < s.batch; ++n) {
    const float* __restrict src = plane(s, x, n, c);
    float* __restrict dst = y + (std::ptrdiff_t{n} * s.channels + c) * s.spatial;
    if (relu) {
      for (int i = 0; i < s.spatial; ++i) {
        const float v = src[i] * scale + shift;
        dst[i] = v < 0.0f ? 0.0f : v;
      }
    } else {
      for (int i = 0; i < s.spatial; ++i) dst[i] = src[i] * scale + shift;
    }
  }
}

// The output gradient as the layer after a fused ReLU passes it: dy where the output is positive, else 0.
inline float masked(const float* relu_y, const float* dy, std::ptrdiff_t i) {
  return relu_y[i] > 0.0f ? dy[i] : 0.0f;
}

}  // namespace

void batchnorm_forward_train(const BatchNormShape& s, const float* x, const float* gamma, const float* beta,
                             float momentum, float eps, float* running_mean, float* running_var, float* y,
                             float* saved_mean, float* saved_inv_std, bool relu) {
  const double count = static_cast<double>(s.batch) * s.spatial;
  if (count <= 0) return;
  std::vector<float> partial(static_cast<std::size_t>(s.spatial));
  for (int c = 0; c < s.channels; ++c) {
    const double mean = channel_sum(s, x, c, partial.data()) / count;
    const double var = channel_centred_squares(s, x, c, static_cast<float>(mean), partial.data()) / count;
    const double inv_std = 1.0 / std::sqrt(var + eps);  // biased variance: what the batch is normalised with
    saved_mean[c] = static_cast<float>(mean);
    saved_inv_std[c] = static_cast<float>(inv_std);
    const double unbiased = count > 1 ? var * count / (count - 1) : var;
    running_mean[c] = static_cast<float>((1.0 - momentum) * running_mean[c] + momentum * mean);
    running_var[c] = static_cast<float>((1.0 - momentum) * running_var[c] + momentum * unbiased);
    const double scale = gamma[c] * inv_std;
    affine_channel(s, c, x, static_cast<float>(scale), static_cast<float>(beta[c] - mean * scale), y, relu);
  }
}

void batchnorm_forward_infer(const BatchNormShape& s, const float* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, float eps, float* y, bool relu) {
  for (int c = 0; c < s.channels; ++c) {
    const double scale = gamma[c] / std::sqrt(static_cast<double>(running_var[c]) + eps);
    affine_channel(s, c, x, static_cast<float>(scale), static_cast<float>(beta[c] - running_mean[c] * scale), y,
                   relu);
  }
}

void batchnorm_backward(const BatchNormShape& s, const float* x, const float* dy, const float* gamma,
                        const float* saved_mean, const float* saved_inv_std, float* dx, float* dgamma,
                        float* dbeta, const float* relu_y) {
  const double count = static_cast<double>(s.batch) * s.spatial;
  if (count <= 0) return;
  std::vector<float> partial_dy(static_cast<std::size_t>(s.spatial)), partial_dy_xc(partial_dy.size());
  for (int c = 0; c < s.channels; ++c) {
    const float mean = saved_mean[c];
    const double inv_std = saved_inv_std[c];
    // One pass for both sums: sum(dy) and sum(dy * (x - mean)).
    float* __restrict pa = partial_dy.data();
    float* __restrict pb = partial_dy_xc.data();
    for (int i = 0; i < s.spatial; ++i) pa[i] = 0.0f, pb[i] = 0.0f;
    for (int n = 0; n < s.batch; ++n) {
      const float* __restrict xs = plane(s, x, n, c);
      const float* __restrict g = plane(s, dy, n, c);
      if (relu_y) {
        const float* __restrict ys = plane(s, relu_y, n, c);
        for (int i = 0; i < s.spatial; ++i) {
          const float gi = masked(ys, g, i);
          pa[i] += gi;
          pb[i] += gi * (xs[i] - mean);
        }
      } else {
        for (int i = 0; i < s.spatial; ++i) {
          pa[i] += g[i];
          pb[i] += g[i] * (xs[i] - mean);
        }
      }
    }
    const double sum_dy = sum_row(pa, s.spatial);
    const double sum_dy_xhat = sum_row(pb, s.spatial) * inv_std;
    dbeta[c] += static_cast<float>(sum_dy);
    dgamma[c] += static_cast<float>(sum_dy_xhat);
    // dx = gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat)), expanded into dx = a dy + b (x - mean) + k
    // so the per-element loop is a subtraction and two fused multiply-adds; x stays centred so a large mean
    // does not cancel.
    const double a = gamma[c] * inv_std;
    const double b = -a * inv_std * sum_dy_xhat / count;
    const double k = -a * sum_dy / count;
    const float af = static_cast<float>(a), bf = static_cast<float>(b), kf = static_cast<float>(k);
    for (int n = 0; n < s.batch; ++n) {
      const float* __restrict xs = plane(s, x, n, c);
      const float* __restrict g = plane(s, dy, n, c);
      float* __restrict d = dx + (std::ptrdiff_t{n} * s.channels + c) * s.spatial;
      if (relu_y) {
        const float* __restrict ys = plane(s, relu_y, n, c);
        for (int i = 0; i < s.spatial; ++i) d[i] = af * masked(ys, g, i) + bf * (xs[i] - mean) + kf;
      } else {
        for (int i = 0; i < s.spatial; ++i) d[i] = af * g[i] + bf * (xs[i] - mean) + kf;
      }
    }
  }
}

}  // namespace ringtrain::kernels::cpu
