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
  const Passes got = run_on(2, s, GetParam(), qkv, dy), want = AttentionReference{s, GetParam()}.run(qkv, dy);
  expect_close(got.probabilities, want.probabilities, "probabilities");
  expect_close(got.y, want.y, "y");
  expect_close(got.dqkv, want.dqkv, "dqkv");
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
