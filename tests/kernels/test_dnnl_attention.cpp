// Tests for kernels/cpu/dnnl_attention (attention's core on oneDNN's batched bf16 products, through DnnlOps): every
// output against the double reference from the same bf16 inputs, within what bf16's roundings allow (the outputs, the
// kept probabilities and the scores gradient are rounded, as on a GPU), at a shape of odd sizes (65 tokens, a head
// width of 20) in both layouts; the same bits on one thread and three, for a sample in a batch of any size, and in
// NCHW and NHWC. Skips where the CPU has no AVX512_BF16, which oneDNN's bf16 products need.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <cstddef>
#include <vector>

#include "kernels/cpu/dnnl_ops.h"
#include "tests/kernels/attention_reference.h"
#include "tests/kernels/grad_check.h"
#include "tests/kernels/stored_tensors.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::AttentionReference;
using testing::Passes;
using testing::random_vector;
using testing::relaid;
using testing::stored;
using testing::widened;

constexpr AttentionShape kShape{.batch = 3, .heads = 2, .tokens = 65, .head_dim = 20, .data = ElementType::bf16};

Passes run_dnnl(int threads, const AttentionShape& s, ActivationLayout layout, const std::vector<float>& qkv,
                const std::vector<float>& dy) {
  DnnlOps ops(threads, DnnlMath::bf16);
  const std::vector<std::byte> q = stored(qkv, s.data), d = stored(dy, s.data);
  std::vector<std::byte> y(d.size()), kept(s.probabilities_bytes()), dq(q.size());
  ops.attention_forward(s, layout, q.data(), y.data(), kept.data());
  ops.attention_backward(s, layout, q.data(), kept.data(), d.data(), dq.data());
  return {widened(y, s.data), widened(kept, s.data), widened(dq, s.data)};
}

struct Inputs {
  std::vector<float> qkv, dy;  // bf16 values, as fp32
};
Inputs inputs(const AttentionShape& s) {
  const auto tokens = static_cast<size_t>(s.batch) * s.tokens * s.width();
  return {widened(stored(random_vector(3 * tokens, 41, -2, 2), s.data), s.data),
          widened(stored(random_vector(tokens, 42), s.data), s.data)};
}

// |got - want| within abs + rel |want| everywhere; the largest error relative to the largest value, for the message.
void expect_within(const std::vector<float>& got, const std::vector<float>& want, double abs, double rel,
                   const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], abs + rel * std::abs(want[i])) << what << " value " << i;
}

class DnnlAttention : public ::testing::TestWithParam<ActivationLayout> {
 protected:
  void SetUp() override {
    if (!DnnlOps::bf16_available()) GTEST_SKIP() << "this CPU has no AVX512_BF16: oneDNN has no bf16 products here";
  }
};

// The bounds: a bf16 output is off by up to 2^-9 of itself when rounded; the scores gradient's rounding moves dQ and
// dK by up to 2^-9 of the sum of their terms' sizes, a few times the values themselves here.
TEST_P(DnnlAttention, MatchesADoubleReferenceWithinBf16Rounding) {
  const Inputs in = inputs(kShape);
  const Passes got = run_dnnl(2, kShape, GetParam(), in.qkv, in.dy),
               want = AttentionReference{kShape, GetParam()}.run(in.qkv, in.dy);
  expect_within(got.probabilities, want.probabilities, 1e-4, 8e-3, "probabilities");
  expect_within(got.y, want.y, 2e-3, 8e-3, "y");
  expect_within(got.dqkv, want.dqkv, 2e-3, 2e-2, "dqkv");
  for (int64_t row = 0; row < kShape.probabilities() / kShape.tokens; ++row) {
    const auto first = got.probabilities.begin() + row * kShape.tokens;
    ASSERT_NEAR(std::accumulate(first, first + kShape.tokens, 0.0), 1.0, 2e-2) << "row " << row;
  }
}

TEST_P(DnnlAttention, GivesTheSameBitsOnOneThreadAndThree) {
  const Inputs in = inputs(kShape);
  const Passes one = run_dnnl(1, kShape, GetParam(), in.qkv, in.dy),
               three = run_dnnl(3, kShape, GetParam(), in.qkv, in.dy);
  EXPECT_EQ(three.probabilities, one.probabilities);
  EXPECT_EQ(three.y, one.y);
  EXPECT_EQ(three.dqkv, one.dqkv);
}

// Each sample's products are its own (the batch is oneDNN's batch dimension): a batch split in two gives every sample
// the bits it has in the whole batch, as N ranks x b must equal one rank x N b.
TEST_P(DnnlAttention, ASampleHasTheSameBitsInAnyBatch) {
  const Inputs in = inputs(kShape);
  const Passes whole = run_dnnl(2, kShape, GetParam(), in.qkv, in.dy);
  AttentionShape first = kShape, rest = kShape;
  first.batch = 1;
  rest.batch = kShape.batch - 1;
  const auto tokens = static_cast<std::ptrdiff_t>(kShape.tokens) * kShape.width();
  const auto split = [](const std::vector<float>& x, std::ptrdiff_t at) {
    return std::pair{std::vector<float>(x.begin(), x.begin() + at), std::vector<float>(x.begin() + at, x.end())};
  };
  const auto [qkv_first, qkv_rest] = split(in.qkv, 3 * tokens);
  const auto [dy_first, dy_rest] = split(in.dy, tokens);
  const Passes a = run_dnnl(2, first, GetParam(), qkv_first, dy_first),
               b = run_dnnl(2, rest, GetParam(), qkv_rest, dy_rest);
  const auto joined = [](std::vector<float> x, const std::vector<float>& y) {
    x.insert(x.end(), y.begin(), y.end());
    return x;
  };
  EXPECT_EQ(joined(a.y, b.y), whole.y);
  EXPECT_EQ(joined(a.probabilities, b.probabilities), whole.probabilities);
  EXPECT_EQ(joined(a.dqkv, b.dqkv), whole.dqkv);
}

INSTANTIATE_TEST_SUITE_P(Layouts, DnnlAttention, ::testing::Values(ActivationLayout::nchw, ActivationLayout::nhwc));

TEST(DnnlAttentionLayouts, NchwAndNhwcGiveTheSameBits) {
  if (!DnnlOps::bf16_available()) GTEST_SKIP() << "this CPU has no AVX512_BF16: oneDNN has no bf16 products here";
  const AttentionShape& s = kShape;
  const int d = s.width();
  const Inputs in = inputs(s);
  const Passes nchw = run_dnnl(2, s, ActivationLayout::nchw, in.qkv, in.dy);
  const Passes nhwc = run_dnnl(2, s, ActivationLayout::nhwc, relaid(in.qkv, s.batch, 3 * d, s.tokens, true),
                               relaid(in.dy, s.batch, d, s.tokens, true));
  EXPECT_EQ(nhwc.probabilities, nchw.probabilities);
  EXPECT_EQ(relaid(nhwc.y, s.batch, d, s.tokens, false), nchw.y);
  EXPECT_EQ(relaid(nhwc.dqkv, s.batch, 3 * d, s.tokens, false), nchw.dqkv);
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
