// Tests for kernels/cpu/gelu.h: GELU and its derivative against the erf form evaluated in double (x in [-10, 10],
// within A&S 7.1.26's error), a NaN kept and the infinities as the erf form gives them, the stored
// 16-bit types within one rounding of the fp32 result, and the same bits on 1 and 3 threads and in place.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/gelu.h"

namespace ringtrain::kernels::cpu {
namespace {

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double normal_density(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI); }

// n points evenly over [lo, hi], n not a multiple of the lanes or the chunk, so every tail is taken.
std::vector<float> points(int n, float lo, float hi) {
  std::vector<float> x(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = lo + (hi - lo) * static_cast<float>(i) / (n - 1);
  return x;
}

TEST(Gelu, FollowsTheErfFormInFp32) {
  const auto x = points(20011, -10.0f, 10.0f);
  const std::vector<float> dy(x.size(), 1.0f);
  std::vector<float> y(x.size()), slope(x.size());
  const Elements n{static_cast<int64_t>(x.size()), ElementType::f32};
  gelu_forward(2, n, x.data(), y.data());
  gelu_backward(2, n, x.data(), dy.data(), slope.data());
  for (std::size_t i = 0; i < x.size(); ++i) {
    // Phi's error is erf's over 2 (<= 7.5e-8) plus fp32's roundings of the polynomial, whose terms alternate in
    // sign near 1 (an ulp there is 1.2e-7): under 2.3e-7 times (1 + |x|) at these points.
    const double xi = x[i], cdf = normal_cdf(xi), want_y = xi * cdf;
    ASSERT_NEAR(y[i], want_y, 3e-7 * (std::abs(xi) + std::abs(want_y))) << "x = " << xi;
    ASSERT_NEAR(slope[i], cdf + xi * normal_density(xi), 3e-7 * (1 + std::abs(xi))) << "x = " << xi;
  }
}

TEST(Gelu, KeepsNaNAndTakesTheInfinitiesLimits) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 0.0f, -0.0f, 30.0f, -30.0f};
  const std::vector<float> dy(x.size(), 2.0f);
  std::vector<float> y(x.size()), dx(x.size());
  const Elements n{static_cast<int64_t>(x.size()), ElementType::f32};
  gelu_forward(1, n, x.data(), y.data());
  gelu_backward(1, n, x.data(), dy.data(), dx.data());
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(dx[0]));
  // At an infinity the derivative's x phi(x) is infinity x 0, NaN, as kernels/activation.h's formula gives it (and
  // GELU at -infinity too): the trainer's non-finite check sees it.
  EXPECT_EQ(y[1], inf);
  EXPECT_TRUE(std::isnan(dx[1]) && std::isnan(dx[2]) && std::isnan(y[2]));
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_EQ(dx[3], 1.0f);  // Phi(0) = 1/2, times dy = 2
  EXPECT_EQ(dx[4], 1.0f);
  EXPECT_EQ(y[5], 30.0f);
  EXPECT_EQ(dx[5], 2.0f);
  EXPECT_EQ(y[6], -0.0f);
  EXPECT_EQ(dx[6], 0.0f);
}

// A 16-bit tensor's result is the fp32 kernel's on its widened values, rounded once.
TEST(Gelu, StoredSixteenBitValuesRoundTheFp32Result) {
  for (ElementType type : {ElementType::bf16, ElementType::f16}) {
    const auto x32 = points(5003, -6.0f, 6.0f), dy32 = points(5003, 1.0f, -1.0f);
    const Elements n{static_cast<int64_t>(x32.size()), type};
    std::vector<uint16_t> x(x32.size()), dy(x32.size()), y(x32.size()), dx(x32.size());
    narrow(x32.data(), n, x.data());
    narrow(dy32.data(), n, dy.data());
    std::vector<float> wide_x(x32.size()), wide_dy(x32.size()), want_y(x32.size()), want_dx(x32.size());
    widen(n, x.data(), wide_x.data());
    widen(n, dy.data(), wide_dy.data());
    const Elements fp32{n.n, ElementType::f32};
    gelu_forward(2, fp32, wide_x.data(), want_y.data());
    gelu_backward(2, fp32, wide_x.data(), wide_dy.data(), want_dx.data());
    std::vector<uint16_t> rounded_y(x32.size()), rounded_dx(x32.size());
    narrow(want_y.data(), n, rounded_y.data());
    narrow(want_dx.data(), n, rounded_dx.data());
    gelu_forward(2, n, x.data(), y.data());
    gelu_backward(2, n, x.data(), dy.data(), dx.data());
    EXPECT_EQ(y, rounded_y) << static_cast<int>(type);
    EXPECT_EQ(dx, rounded_dx) << static_cast<int>(type);
  }
}

TEST(Gelu, SameBitsOnAnyThreadCountAndInPlace) {
  const auto x = points(70001, -5.0f, 5.0f), dy = points(70001, -1.0f, 3.0f);
  const Elements n{static_cast<int64_t>(x.size()), ElementType::f32};
  std::vector<float> y1(x.size()), y3(x.size()), dx1(x.size()), dx3(x.size());
  gelu_forward(1, n, x.data(), y1.data());
  gelu_forward(3, n, x.data(), y3.data());
  gelu_backward(1, n, x.data(), dy.data(), dx1.data());
  gelu_backward(3, n, x.data(), dy.data(), dx3.data());
  EXPECT_EQ(y1, y3);
  EXPECT_EQ(dx1, dx3);
  std::vector<float> in_place = x, dx_in_place = dy;
  gelu_forward(3, n, in_place.data(), in_place.data());
  gelu_backward(3, n, x.data(), dx_in_place.data(), dx_in_place.data());
  EXPECT_EQ(in_place, y1);
  EXPECT_EQ(dx_in_place, dx1);
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
