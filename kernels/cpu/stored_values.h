// Owns how a CPU kernel that reads and writes tensors in their stored element type (kernels/element_type.h) takes one
// value: widened to fp32 exactly, and rounded back to nearest even (bf16 as kernels/cpu/bf16.h rounds it), as the
// whole-tensor conversions of element_conversion.h do. A kernel is written once over a Values type and instantiated
// for each type by with_stored_values.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/cpu/bf16.h"
#include "kernels/element_type.h"

namespace ringtrain::kernels::cpu {

struct Fp32Values {
  using Stored = float;
  static float load(float v) { return v; }
  static float store(float v) { return v; }
};
struct Bf16Values {
  using Stored = uint16_t;
  static float load(uint16_t v) { return bf16_to_float(v); }
  static uint16_t store(float v) { return float_to_bf16(v); }
};
struct Fp16Values {
  using Stored = uint16_t;
  static float load(uint16_t v) {
    _Float16 h;
    std::memcpy(&h, &v, sizeof h);
    return static_cast<float>(h);
  }
  static uint16_t store(float v) {
    const auto h = static_cast<_Float16>(v);
    uint16_t bits;
    std::memcpy(&bits, &h, sizeof bits);
    return bits;
  }
};

// body(Values{}) for the Values type of `type`.
template <class Body>
void with_stored_values(ElementType type, Body&& body) {
  switch (type) {
    case ElementType::f32: return body(Fp32Values{});
    case ElementType::bf16: return body(Bf16Values{});
    case ElementType::f16: return body(Fp16Values{});
  }
}

}  // namespace ringtrain::kernels::cpu
