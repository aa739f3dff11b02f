// Owns how the tests measure two float vectors' largest difference. A NaN on either side counts as an infinite
// difference: std::max(x, NaN) keeps x, so a plain running maximum would let a result full of NaN pass as equal.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>

namespace ringtrain::testing {

struct LargestDifference {
  double abs = 0;        // max |got - want|, infinite where either is not a number
  double magnitude = 0;  // max |want|, the scale the difference is judged against
  double relative(double floor = 1e-30) const { return abs / std::max(magnitude, floor); }
};

inline LargestDifference largest_difference(std::span<const float> got, std::span<const float> want) {
  LargestDifference d;
  const std::size_t n = std::min(got.size(), want.size());
  for (std::size_t i = 0; i < n; ++i) {
    const double gap = std::abs(double{got[i]} - double{want[i]});
    d.abs = std::isnan(gap) ? std::numeric_limits<double>::infinity() : std::max(d.abs, gap);
    if (!std::isnan(want[i])) d.magnitude = std::max(d.magnitude, std::abs(double{want[i]}));
  }
  return d;
}

}  // namespace ringtrain::testing
