// Tests kernels/cpu/ema against the weights' moving average as PyTorch and timm define it, written out here in
// double: ema = decay * ema + (1 - decay) * param (1 - decay in Python's double), over several steps whose parameters
// change, on one thread and on several; and that a parameter which does not move keeps its average exactly, as the
// lerp form (get_ema_multi_avg_fn, ModelEmaV3) does in float.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/ema.h"
#include "kernels/cpu/gemm.h"
#include "tests/kernels/grad_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::random_vector;

// Five steps of the average from ema = the first parameters (timm's copy at creation), each step's parameters
// fresh; the reference in double, the kernel in float.
std::vector<float> average_five_steps(int64_t n, double decay, std::vector<double>& reference) {
  std::vector<float> ema = random_vector(static_cast<size_t>(n), 1, -1.0f, 1.0f);
  reference.assign(ema.begin(), ema.end());
  for (unsigned step = 0; step < 5; ++step) {
    const std::vector<float> param = random_vector(static_cast<size_t>(n), 20 + step, -2.0f, 2.0f);
    ema_update(n, ema_step(decay), param.data(), ema.data());
    for (size_t i = 0; i < reference.size(); ++i) reference[i] = decay * reference[i] + (1.0 - decay) * param[i];
  }
  return ema;
}

TEST(Ema, MatchesTimmFormulaOverFiveSteps) {
  for (const double decay : {0.5, 0.9, 0.9999}) {
    std::vector<double> want;
    const std::vector<float> got = average_five_steps(1000, decay, want);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "decay " << decay << " [" << i << "]";
  }
}

// The parameters' weight is 1 - decay worked out in double, then rounded, as Python computes it: from the rounded
// decay in float it would be 1.3 % off at 0.999999 (DeiT-style decays are 0.99996).
TEST(Ema, TheParametersWeightIsOneMinusTheDecayInDouble) {
  for (const double decay : {0.999, 0.99996, 0.999999})
    EXPECT_EQ(ema_step(decay).param_weight, static_cast<float>(1.0 - decay)) << decay;
  EXPECT_GT(std::abs((1.0f - 0.999999f) / static_cast<float>(1.0 - 0.999999) - 1), 0.01) << "what float would give";
}

// A parameter that does not move (a frozen layer's) keeps an average equal to it, bit for bit: decay * ema +
// (1 - decay) * param, each weight rounded, walked about 150 of these 1,000 away from it within 20,000 steps.
TEST(Ema, AParameterThatDoesNotMoveKeepsItsAverageExactly) {
  const std::vector<float> param = random_vector(1000, 7, -2.0f, 2.0f);
  for (const double decay : {0.999, 0.9999, 0.99996, 0.999999}) {
    std::vector<float> ema = param;
    for (int step = 0; step < 20000; ++step)
      ema_update(static_cast<int64_t>(param.size()), ema_step(decay), param.data(), ema.data());
    EXPECT_EQ(ema, param) << "decay " << decay;
  }
}

TEST(Ema, SameBitsOnAnyThreadCount) {
  const int before = compute_threads();
  std::vector<double> unused;
  set_compute_threads(1);
  const std::vector<float> one = average_five_steps(10007, 0.99, unused);
  set_compute_threads(4);
  const std::vector<float> four = average_five_steps(10007, 0.99, unused);
  set_compute_threads(before);
  EXPECT_EQ(one, four);
}

// n = 0 touches nothing: the buffers past it stay as they were.
TEST(Ema, AnEmptyRangeChangesNothing) {
  std::vector<float> average{1.0f, 2.0f}, params{5.0f, 6.0f};
  ema_update(0, ema_step(0.9), average.data(), params.data());
  EXPECT_EQ(average, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(params, (std::vector<float>{5.0f, 6.0f}));
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
