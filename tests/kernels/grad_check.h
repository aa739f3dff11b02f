// Shared helpers for the CPU kernel tests: seeded random tensors and a central-difference gradient check.
//
// Every gradient test uses the scalar loss L = sum(y * R) for a fixed random R, so dL/dy = R is what the
// backward kernel receives, and compares each analytic gradient element with
//   (L(p + h) - L(p - h)) / 2h,
// evaluating the float kernel and summing L in double.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace ringtrain::kernels::cpu::testing {

inline std::vector<float> random_vector(std::size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Values in random order whose pairwise gaps are at least `gap`, so a max (or ReLU) decision cannot flip
// under a finite-difference step smaller than gap / 2.
inline std::vector<float> distinct_vector(std::size_t n, uint32_t seed, float gap) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = (static_cast<float>(i) - static_cast<float>(n) / 2.0f) * gap;
  std::mt19937 gen(seed);
  std::shuffle(v.begin(), v.end(), gen);
  return v;
}

inline double weighted_sum(const std::vector<float>& y, const std::vector<float>& r) {
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * r[i];
  return s;
}

// The central difference of `loss` with respect to one value (restored afterwards).
inline double central_difference(float& value, float h, const std::function<double()>& loss) {
  const float saved = value;
  value = saved + h;
  const double plus = loss();
  value = saved - h;
  const double minus = loss();
  value = saved;
  // The step actually taken in float, not the nominal h, is the denominator.
  return (plus - minus) / (static_cast<double>(saved + h) - static_cast<double>(saved - h));
}

// Central differences of `loss` with respect to every element of `param`.
inline std::vector<double> numeric_gradient(std::vector<float>& param, float h, const std::function<double()>& loss) {
  std::vector<double> g(param.size());
  for (std::size_t i = 0; i < param.size(); ++i) g[i] = central_difference(param[i], h, loss);
  return g;
}

// |analytic - numeric| <= atol + rtol * |numeric| for every element; reports the worst offender.
inline void expect_gradient_near(const std::vector<float>& analytic, const std::vector<double>& numeric, double rtol,
                                 double atol, const std::string& what) {
  ASSERT_EQ(analytic.size(), numeric.size()) << what;
  double worst = 0;
  std::size_t worst_at = 0;
  for (std::size_t i = 0; i < numeric.size(); ++i) {
    double excess = std::abs(analytic[i] - numeric[i]) - (atol + rtol * std::abs(numeric[i]));
    if (std::isnan(excess)) excess = std::numeric_limits<double>::infinity();  // a NaN gradient is the worst
    if (i == 0 || excess > worst) worst = excess, worst_at = i;
  }
  EXPECT_LE(worst, 0.0) << what << ": element " << worst_at << " analytic " << analytic[worst_at] << " numeric "
                        << numeric[worst_at] << " (rtol " << rtol << ", atol " << atol << ")";
  // A check that compares zeros with zeros proves nothing: the test shapes must give real gradients.
  double norm = 0;
  for (double v : numeric) norm = std::max(norm, std::abs(v));
  EXPECT_GT(norm, 1e-3) << what << ": numeric gradient is all zero, the check is vacuous";
}

}  // namespace ringtrain::kernels::cpu::testing
