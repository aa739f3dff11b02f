// Owns FastDivide: unsigned 32-bit division by a divisor fixed at set-up, as one high multiply, an add and a shift
// (Granlund and Montgomery's method for invariant divisors). Our GPU kernels that turn a flat index into a channel
// divide once per element, and a hardware integer division there costs tens of instructions; the host computes the
// multiplier once, and the same quotient() serves the host's tests.
#pragma once
#include <cstdint>

#include "kernels/host_device.h"

namespace ringtrain::kernels {

class FastDivide {
 public:
  // Numerators must stay below 2^31 (the add after the high multiply stays in 32 bits then).
  static constexpr uint32_t kNumeratorLimit = 1u << 31;

  FastDivide() = default;
  explicit FastDivide(uint32_t divisor) : divisor_(divisor) {
    while ((uint64_t{1} << shift_) < divisor) ++shift_;  // shift = ceil(log2(divisor))
    multiplier_ = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift_) - divisor)) / divisor + 1);
  }

  RT_HOST_DEVICE uint32_t quotient(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t high = __umulhi(n, multiplier_);
#else
    const auto high = static_cast<uint32_t>((uint64_t{n} * multiplier_) >> 32);
#endif
    return (high + n) >> shift_;
  }
  RT_HOST_DEVICE uint32_t divisor() const { return divisor_; }

 private:
  uint32_t divisor_ = 1, multiplier_ = 1, shift_ = 0;
};

}  // namespace ringtrain::kernels
