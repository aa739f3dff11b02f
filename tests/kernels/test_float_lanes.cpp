// Tests for kernels/cpu/float_lanes.h's e^x: within 2 ulp of the correctly rounded value (std::exp in double) over
// [-87, 88] at a million points, 0 below -87, e^88 above 88, NaN kept; and the partial loads' fill.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/float_lanes.h"

namespace ringtrain::kernels::cpu {
namespace {

// The distance in units in the last place between two positive floats.
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, sizeof ia);
  std::memcpy(&ib, &b, sizeof ib);
  return std::abs(int64_t{ia} - int64_t{ib});
}

TEST(FloatLanes, ExpIsWithinTwoUlpOverTheNormalRange) {
  constexpr int kPoints = 1 << 20;
  int64_t worst = 0;
  float worst_at = 0;
  for (int i = 0; i < kPoints; i += kFloatLanes) {
    FloatLanes x;
    for (int l = 0; l < kFloatLanes; ++l) x[l] = -87.0f + 175.0f * static_cast<float>(i + l) / kPoints;
    const FloatLanes e = exp_lanes(x);
    for (int l = 0; l < kFloatLanes; ++l) {
      const auto want = static_cast<float>(std::exp(static_cast<double>(x[l])));
      if (const int64_t d = ulps(e[l], want); d > worst) worst = d, worst_at = x[l];
    }
  }
  EXPECT_LE(worst, 2) << "at x = " << worst_at;
}

TEST(FloatLanes, ExpEdgesAndNaN) {
  FloatLanes x = FloatLanes{} - 87.5f;
  x[1] = -INFINITY;
  x[2] = 0;
  x[3] = 100;
  x[4] = std::numeric_limits<float>::quiet_NaN();
  x[5] = -1e-30f;
  const FloatLanes e = exp_lanes(x);
  EXPECT_EQ(e[0], 0.0f);
  EXPECT_EQ(e[1], 0.0f);
  EXPECT_EQ(e[2], 1.0f);
  EXPECT_EQ(e[3], static_cast<float>(std::exp(88.0)));
  EXPECT_TRUE(std::isnan(e[4]));
  EXPECT_EQ(e[5], 1.0f);
}

TEST(FloatLanes, PartialLoadsFillTheRestAndPartialStoresWriteOnlyTheirPart) {
  const float values[3] = {1, 2, 3};
  const FloatLanes v = load_part(values, 3, -5);
  EXPECT_EQ(v[2], 3.0f);
  EXPECT_EQ(v[3], -5.0f);
  EXPECT_EQ(v[15], -5.0f);
  float out[4] = {9, 9, 9, 9};
  store_part(v, 3, out);
  EXPECT_EQ(out[2], 3.0f);
  EXPECT_EQ(out[3], 9.0f);
  EXPECT_EQ(sum_lanes(v), 6.0f - 5.0f * 13);
  EXPECT_EQ(max_lanes(v), 3.0f);
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
