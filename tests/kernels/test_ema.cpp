// Tests kernels/cpu/ema against the weights' moving average as timm's ModelEmaV2 defines it, written out here:
// ema = decay * ema + (1 - decay) * param (ModelEmaV2._update with update_fn = lambda e, m: decay * e + (1 -
// decay) * m), over several steps whose parameters change, on one thread and on several.
#include <gtest/gtest.h>

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
std::vector<float> average_five_steps(int64_t n, float decay, std::vector<double>& reference) {
  std::vector<float> ema = random_vector(static_cast<size_t>(n), 1, -1.0f, 1.0f);
  reference.assign(ema.begin(), ema.end());
  for (unsigned step = 0; step < 5; ++step) {
    const std::vector<float> param = random_vector(static_cast<size_t>(n), 20 + step, -2.0f, 2.0f);
    ema_update(n, decay, param.data(), ema.data());
    for (size_t i = 0; i < reference.size(); ++i)
      reference[i] = double{decay} * reference[i] + (1.0 - double{decay}) * param[i];
  }
  return ema;
}

TEST(Ema, MatchesTimmFormulaOverFiveSteps) {
  for (const float decay : {0.5f, 0.9f, 0.9999f}) {
    std::vector<double> want;
    const std::vector<float> got = average_five_steps(1000, decay, want);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "decay " << decay << " [" << i << "]";
  }
}

TEST(Ema, SameBitsOnAnyThreadCount) {
  const int before = compute_threads();
  std::vector<double> unused;
  set_compute_threads(1);
  const std::vector<float> one = average_five_steps(10007, 0.99f, unused);
  set_compute_threads(4);
  const std::vector<float> four = average_five_steps(10007, 0.99f, unused);
  set_compute_threads(before);
  EXPECT_EQ(one, four);
}

// n = 0 touches nothing: the buffers past it stay as they were.
TEST(Ema, AnEmptyRangeChangesNothing) {
  std::vector<float> average{1.0f, 2.0f}, params{5.0f, 6.0f};
  ema_update(0, 0.9f, average.data(), params.data());
  EXPECT_EQ(average, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(params, (std::vector<float>{5.0f, 6.0f}));
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
