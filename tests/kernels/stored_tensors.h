// Shared helpers for the CPU kernel tests over 16-bit tensors: fp32 values stored in an element type (rounded as
// kernels/cpu/element_conversion.h rounds them) and such bytes widened back.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/element_conversion.h"

namespace ringtrain::kernels::cpu::testing {

inline std::vector<std::byte> stored(const std::vector<float>& x, ElementType type) {
  std::vector<std::byte> out(Elements{static_cast<int64_t>(x.size()), type}.bytes());
  narrow(x.data(), {static_cast<int64_t>(x.size()), type}, out.data());
  return out;
}

inline std::vector<float> widened(const std::vector<std::byte>& x, ElementType type) {
  std::vector<float> out(x.size() / element_bytes(type));
  widen({static_cast<int64_t>(out.size()), type}, x.data(), out.data());
  return out;
}

}  // namespace ringtrain::kernels::cpu::testing
