// Owns the tests' view of a float as its IEEE bit pattern, for rounding tests that name exact patterns.
#pragma once
#include <cstdint>
#include <cstring>

namespace ringtrain::test_support {

inline float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

inline uint32_t bits_of(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

}  // namespace ringtrain::test_support
