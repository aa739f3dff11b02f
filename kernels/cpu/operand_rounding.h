// Owns the emulation of reduced-precision products on the CPU: each operand of a convolution or a dense product
// rounded to fp16 or bf16 (round to nearest, ties to even), then multiplied and accumulated in fp32. A product of
// two fp16 or bf16 values is exact in fp32, so this gives the numbers of a tensor-core product with fp32
// accumulation up to the order of the sums, including fp16's overflow to infinity past 65504 and its gradual
// underflow below 2^-14, which is what dynamic loss scaling exists for.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/cpu/bf16.h"

namespace ringtrain::kernels::cpu {

enum class OperandRounding { none, bf16, fp16 };

const char* operand_rounding_name(OperandRounding rounding);  // "none", "bf16", "fp16"

// The fp16 value nearest x (ties to even), as an fp32: infinity from 65520 up, multiples of 2^-24 below 2^-14,
// a NaN stays a NaN.
inline float round_to_fp16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) return x;  // infinity or NaN
  const uint32_t sign = bits & 0x80000000u;
  if (magnitude >= 0x477ff000u) {  // 65520, halfway past fp16's largest 65504: the tie goes to the even 2^16
    const uint32_t infinity = sign | 0x7f800000u;
    std::memcpy(&x, &infinity, sizeof x);
    return x;
  }
  if (magnitude < 0x38800000u) {  // below 2^-14: fp16's subnormals, a fixed spacing of 2^-24
    uint32_t scaled_bits = magnitude;
    float scaled;
    std::memcpy(&scaled, &scaled_bits, sizeof scaled);
    // x * 2^24 is exact and below 2^10, so adding and taking away 2^23 rounds it to an integer, ties to even.
    const float whole = (scaled * 0x1p24f + 0x1p23f) - 0x1p23f;
    float rounded = whole * 0x1p-24f;
    uint32_t out;
    std::memcpy(&out, &rounded, sizeof out);
    out |= sign;
    std::memcpy(&x, &out, sizeof x);
    return x;
  }
  bits += 0xfffu + ((bits >> 13) & 1u);  // fp16 keeps 10 of fp32's 23 mantissa bits
  bits &= ~0x1fffu;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

inline float round_to_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

// y[i] = x[i] rounded as `rounding` says (none: copied); y may be x.
void round_operands(OperandRounding rounding, int64_t n, const float* x, float* y);

}  // namespace ringtrain::kernels::cpu
