// Shared by the CPU attention tests: the passes' outputs, and kernels/attention.h's passes in double, from the
// tensors' values as a kernel reads them, in either layout.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/activation_layout.h"
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu::testing {

// What forward and backward write, as fp32 values.
struct Passes {
  std::vector<float> y, probabilities, dqkv;
};

// The passes of attention.h in double, from the tensors' values as the kernel reads them, in either layout.
struct AttentionReference {
  const AttentionShape& s;
  ActivationLayout layout;
  // Where channel c of token t of sample n lies in a tensor of `channels` channels.
  size_t at(int n, int channels, int c, int t) const {
    return static_cast<size_t>(layout == ActivationLayout::nhwc ? (int64_t{n} * s.tokens + t) * channels + c
                                                                : (int64_t{n} * channels + c) * s.tokens + t);
  }
  // Value k of token t of head h's part (0 q, 1 k, 2 v) of qkv.
  double part(const std::vector<float>& qkv, int n, int which, int h, int t, int k) const {
    return qkv[at(n, 3 * s.width(), which * s.width() + h * s.head_dim + k, t)];
  }
  double token(const std::vector<float>& x, int n, int h, int t, int k) const {
    return x[at(n, s.width(), h * s.head_dim + k, t)];
  }

  Passes run(const std::vector<float>& qkv, const std::vector<float>& dy) const {
    const int T = s.tokens, d = s.head_dim;
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    const auto sq = [T](int i, int j) { return static_cast<size_t>(i * T + j); };  // of a T x T matrix
    Passes out{std::vector<float>(dy.size()), std::vector<float>(static_cast<size_t>(s.probabilities())),
               std::vector<float>(qkv.size())};
    for (int n = 0; n < s.batch; ++n)
      for (int h = 0; h < s.heads; ++h) {
        std::vector<double> p(sq(T, 0)), dp(p.size());
        for (int i = 0; i < T; ++i) {
          double row_max = -INFINITY, sum = 0;
          for (int j = 0; j < T; ++j) {
            double score = 0;
            for (int k = 0; k < d; ++k) score += part(qkv, n, 0, h, i, k) * part(qkv, n, 1, h, j, k);
            p[sq(i, j)] = score * scale;
            row_max = std::max(row_max, score * scale);
          }
          for (int j = 0; j < T; ++j) sum += p[sq(i, j)] = std::exp(p[sq(i, j)] - row_max);
          for (int j = 0; j < T; ++j) p[sq(i, j)] /= sum;
        }
        for (int i = 0; i < T; ++i)
          for (int j = 0; j < T; ++j)
            out.probabilities[static_cast<size_t>(((int64_t{n} * s.heads + h) * T + i) * T + j)] =
                static_cast<float>(p[sq(i, j)]);
        for (int i = 0; i < T; ++i)
          for (int k = 0; k < d; ++k) {
            double y = 0;
            for (int j = 0; j < T; ++j) y += p[sq(i, j)] * part(qkv, n, 2, h, j, k);
            out.y[at(n, s.width(), h * d + k, i)] = static_cast<float>(y);
          }
        for (int i = 0; i < T; ++i) {
          double dot = 0;
          for (int j = 0; j < T; ++j) {
            double g = 0;
            for (int k = 0; k < d; ++k) g += token(dy, n, h, i, k) * part(qkv, n, 2, h, j, k);
            dp[sq(i, j)] = g;
            dot += g * p[sq(i, j)];
          }
          for (int j = 0; j < T; ++j)
            dp[sq(i, j)] = p[sq(i, j)] * (dp[sq(i, j)] - dot);
        }
        for (int t = 0; t < T; ++t)
          for (int k = 0; k < d; ++k) {
            double dq = 0, dk = 0, dv = 0;
            for (int u = 0; u < T; ++u) {
              dq += dp[sq(t, u)] * part(qkv, n, 1, h, u, k);
              dk += dp[sq(u, t)] * part(qkv, n, 0, h, u, k);
              dv += p[sq(u, t)] * token(dy, n, h, u, k);
            }
            const int c = h * d + k;
            out.dqkv[at(n, 3 * s.width(), c, t)] = static_cast<float>(dq * scale);
            out.dqkv[at(n, 3 * s.width(), s.width() + c, t)] = static_cast<float>(dk * scale);
            out.dqkv[at(n, 3 * s.width(), 2 * s.width() + c, t)] = static_cast<float>(dv);
          }
      }
    return out;
  }
};

// Token tensors of `channels` channels between NCHW (N x C x T) and NHWC (N x T x C).
inline std::vector<float> relaid(const std::vector<float>& x, int n, int channels, int tokens, bool to_nhwc) {
  std::vector<float> y(x.size());
  for (int b = 0; b < n; ++b)
    for (int c = 0; c < channels; ++c)
      for (int t = 0; t < tokens; ++t) {
        const auto nchw = static_cast<size_t>((int64_t{b} * channels + c) * tokens + t),
                   nhwc = static_cast<size_t>((int64_t{b} * tokens + t) * channels + c);
        y[to_nhwc ? nhwc : nchw] = x[to_nhwc ? nchw : nhwc];
      }
  return y;
}

}  // namespace ringtrain::kernels::cpu::testing
