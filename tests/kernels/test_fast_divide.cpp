// Proves FastDivide's quotient equals integer division for every divisor a tensor's shape gives (1 to 2^20, and
// powers of two and their neighbours up to 2^30) at the numerators where an error would show first: around each
// multiple of the divisor, and near the numerator limit.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/fast_divide.h"

using ringtrain::kernels::FastDivide;

namespace {

std::vector<uint32_t> divisors() {
  std::vector<uint32_t> d;
  for (uint32_t i = 1; i <= (1u << 20); i += (i < 70000 ? 1 : 997)) d.push_back(i);
  for (int k = 1; k <= 30; ++k)
    for (const int64_t delta : {-1, 0, 1}) d.push_back(static_cast<uint32_t>((int64_t{1} << k) + delta));
  return d;
}

TEST(FastDivide, MatchesIntegerDivisionAroundMultiplesAndNearTheLimit) {
  std::mt19937 gen(3);
  const uint32_t last = FastDivide::kNumeratorLimit - 1;
  for (const uint32_t d : divisors()) {
    const FastDivide divide(d);
    ASSERT_EQ(divide.divisor(), d);
    std::vector<uint32_t> numerators{0, 1, d - 1, d, d + 1, last, last - 1, last - d};
    const uint32_t multiples = last / d;
    for (int i = 0; i < 16; ++i) {
      const uint32_t m = std::uniform_int_distribution<uint32_t>(0, multiples)(gen);
      for (const uint32_t offset : {0u, 1u, d - 1}) numerators.push_back(m * d + offset);
    }
    for (const uint32_t n : numerators) {
      if (n > last) continue;
      ASSERT_EQ(divide.quotient(n), n / d) << n << " / " << d;
    }
  }
}

TEST(FastDivide, MatchesIntegerDivisionForEveryNumeratorOfSmallTensors) {
  for (const uint32_t d : {1u, 3u, 7u, 49u, 196u, 784u, 3136u, 12544u}) {
    const FastDivide divide(d);
    for (uint32_t n = 0; n < (1u << 22); ++n) ASSERT_EQ(divide.quotient(n), n / d) << n << " / " << d;
  }
}

}  // namespace
