// Tests for kernels/cpu/attention: the samples shared among the compute threads give the same bits on one thread
// and three, forward (output and kept probabilities) and backward, in both layouts; and the kept probabilities are
// each row's softmax (rows sum to one). Its values against a reference are the layer tests' (tests/layers).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/gemm.h"
#include "tests/kernels/grad_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::random_vector;

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
  attention_forward(s, layout, qkv.data(), out.y.data(), out.probabilities.data(), ws);
  attention_backward(s, layout, qkv.data(), out.probabilities.data(), dy.data(), out.dqkv.data(), ws);
  set_compute_threads(before);
  return out;
}

class AttentionCpu : public ::testing::TestWithParam<ActivationLayout> {};

TEST_P(AttentionCpu, SamplesSharedAmongThreadsGiveTheSameBitsOnAnyCount) {
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

INSTANTIATE_TEST_SUITE_P(Layouts, AttentionCpu, ::testing::Values(ActivationLayout::nchw, ActivationLayout::nhwc));

}  // namespace
}  // namespace ringtrain::kernels::cpu
