// Tests for kernels/cpu/attention: the (sample, head) pairs shared among the compute threads give the same bits on one
// thread and three, forward (output and kept probabilities) and backward, in both layouts; the kept probabilities
// are each row's softmax (rows sum to one); and every output against a double reference written out here, at a shape
// whose tokens and head width are no whole number of the kernel's 16-value chunks, from tiles left full of NaN; and
// NCHW and NHWC tensors giving the same bits, in fp32 and bf16. The layer tests (tests/layers) hold the layer, the
// projections included, to theirs in every element type.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/gemm.h"
#include "tests/kernels/grad_check.h"
#include "tests/kernels/stored_tensors.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::random_vector;
using testing::stored;
using testing::widened;

struct Passes {
  std::vector<float> y, probabilities, dqkv;
};

Passes run_on(int threads, const AttentionShape& s, ActivationLayout layout, const std::vector<float>& qkv,
              const std::vector<float>& dy) {
  const int before = compute_threads();
  set_compute_threads(threads);
  Passes out{std::vector<float>(dy.size()), std::vector<float>(static_cast<size_t>(s.probabilities())),
             std::vector<float>(qkv.size())};
  AttentionWorkspace ws;
  // Stale tiles full of NaN: what the padding of a tile holds must reach no stored value.
  ws.tiles.assign(size_t{1} << 18, std::numeric_limits<float>::quiet_NaN());
  attention_forward(s, layout, qkv.data(), out.y.data(), out.probabilities.data(), ws);
  attention_backward(s, layout, qkv.data(), out.probabilities.data(), dy.data(), out.dqkv.data(), ws);
  set_compute_threads(before);
  return out;
}

// The passes of attention.h in double, from the tensors' values as the kernel reads them, in either layout.
struct Reference {
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

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 2e-5 + 2e-5 * std::abs(want[i])) << what << " value " << i;
}

class AttentionCpu : public ::testing::TestWithParam<ActivationLayout> {};

TEST_P(AttentionCpu, PairsSharedAmongThreadsGiveTheSameBitsOnAnyCount) {
  const AttentionShape s{.batch = 5, .heads = 3, .tokens = 17, .head_dim = 8};
  const auto tokens = static_cast<size_t>(s.batch) * s.tokens * s.width();
  const auto qkv = random_vector(3 * tokens, 11), dy = random_vector(tokens, 12);
  const Passes one = run_on(1, s, GetParam(), qkv, dy), three = run_on(3, s, GetParam(), qkv, dy);
  EXPECT_EQ(three.y, one.y);
  EXPECT_EQ(three.probabilities, one.probabilities);
  EXPECT_EQ(three.dqkv, one.dqkv);
  for (int64_t row = 0; row < s.probabilities() / s.tokens; ++row) {
    double sum = 0;
    for (int j = 0; j < s.tokens; ++j) sum += one.probabilities[static_cast<size_t>(row * s.tokens + j)];
    ASSERT_NEAR(sum, 1.0, 1e-5) << "row " << row;
  }
}

// 33 tokens (two whole chunks and one value) and a head width of 20 (one chunk and a part): every padded edge.
TEST_P(AttentionCpu, MatchesADoubleReferenceWhereTilesArePadded) {
  const AttentionShape s{.batch = 2, .heads = 3, .tokens = 33, .head_dim = 20};
  const auto tokens = static_cast<size_t>(s.batch) * s.tokens * s.width();
  const auto qkv = random_vector(3 * tokens, 21, -2, 2), dy = random_vector(tokens, 22);
  const Passes got = run_on(2, s, GetParam(), qkv, dy), want = Reference{s, GetParam()}.run(qkv, dy);
  expect_close(got.probabilities, want.probabilities, "probabilities");
  expect_close(got.y, want.y, "y");
  expect_close(got.dqkv, want.dqkv, "dqkv");
}

// Token tensors of `channels` channels between NCHW (N x C x T) and NHWC (N x T x C).
std::vector<float> relaid(const std::vector<float>& x, int n, int channels, int tokens, bool to_nhwc) {
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

// The passes over tensors stored in s.data, given and returned as their fp32 values.
Passes run_stored(const AttentionShape& s, ActivationLayout layout, const std::vector<float>& qkv,
                  const std::vector<float>& dy) {
  const std::vector<std::byte> q = stored(qkv, s.data), d = stored(dy, s.data);
  std::vector<std::byte> y(d.size()), kept(s.probabilities_bytes()), dq(q.size());
  AttentionWorkspace ws;
  attention_forward(s, layout, q.data(), y.data(), kept.data(), ws);
  attention_backward(s, layout, q.data(), kept.data(), d.data(), dq.data(), ws);
  return {widened(y, s.data), widened(kept, s.data), widened(dq, s.data)};
}

// Each output value is the same sum in the same order in either layout: the same bits, in fp32 and in bf16.
TEST(AttentionCpuLayouts, NchwAndNhwcGiveTheSameBits) {
  for (const ElementType type : {ElementType::f32, ElementType::bf16}) {
    SCOPED_TRACE(type == ElementType::f32 ? "fp32" : "bf16");
    const AttentionShape s{.batch = 2, .heads = 3, .tokens = 33, .head_dim = 20, .data = type};
    const int d = s.width();
    const auto tokens = static_cast<size_t>(s.batch) * s.tokens * d;
    const auto qkv = random_vector(3 * tokens, 31, -2, 2), dy = random_vector(tokens, 32);
    const Passes nchw = run_stored(s, ActivationLayout::nchw, qkv, dy);
    const Passes nhwc = run_stored(s, ActivationLayout::nhwc, relaid(qkv, s.batch, 3 * d, s.tokens, true),
                                   relaid(dy, s.batch, d, s.tokens, true));
    EXPECT_EQ(nhwc.probabilities, nchw.probabilities);
    EXPECT_EQ(relaid(nhwc.y, s.batch, d, s.tokens, false), nchw.y);
    EXPECT_EQ(relaid(nhwc.dqkv, s.batch, 3 * d, s.tokens, false), nchw.dqkv);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, AttentionCpu, ::testing::Values(ActivationLayout::nchw, ActivationLayout::nhwc));

}  // namespace
}  // namespace ringtrain::kernels::cpu
