// Owns fp32 <-> bf16 on the CPU: round to nearest, ties to even, as the GPU's __float2bfloat16_rn (a NaN stays a
// quiet NaN, a value past bf16's largest finite rounds to infinity). bf16 travels as its 16-bit pattern.
#pragma once
#include <cstdint>
#include <cstring>

namespace ringtrain::kernels::cpu {

inline uint16_t float_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float bf16_to_float(uint16_t h) {  // exact: every bf16 value is an fp32 value
  const uint32_t bits = uint32_t{h} << 16;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

inline void float_to_bf16(const float* x, int64_t n, uint16_t* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_bf16(x[i]);
}

inline void bf16_to_float(const uint16_t* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_float(x[i]);
}

}  // namespace ringtrain::kernels::cpu
