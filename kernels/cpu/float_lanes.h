// Owns FloatLanes, a chunk of 16 fp32 values as a GCC/Clang vector (one AVX-512 register, two AVX2 ones, as the
// target has them), with the loads, stores and element-wise functions the CPU kernels take whole chunks through.
#pragma once
#include <cstdint>
#include <cstring>

// The functions take and return whole vectors and are always inlined, so no call crosses a boundary whose calling
// convention depends on the target's vector width. GCC notes at every such call that it would (-Wpsabi, on a target
// without AVX-512: RINGTRAIN_NATIVE off), so the note is off from here to the end of every file that includes this.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace ringtrain::kernels::cpu {

constexpr int kFloatLanes = 16;
using FloatLanes = float __attribute__((vector_size(kFloatLanes * sizeof(float))));
using IntLanes = int32_t __attribute__((vector_size(kFloatLanes * sizeof(int32_t))));

[[gnu::always_inline]] inline FloatLanes load_lanes(const float* from) {
  FloatLanes v;
  std::memcpy(&v, from, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store_lanes(FloatLanes v, float* to) { std::memcpy(to, &v, sizeof v); }
// The first `count` values from `from`, the other lanes `fill`.
[[gnu::always_inline]] inline FloatLanes load_part(const float* from, int count, float fill) {
  FloatLanes v;
  for (int i = 0; i < kFloatLanes; ++i) v[i] = i < count ? from[i] : fill;
  return v;
}
[[gnu::always_inline]] inline void store_part(FloatLanes v, int count, float* to) {
  std::memcpy(to, &v, sizeof(float) * count);
}

[[gnu::always_inline]] inline float sum_lanes(FloatLanes v) {
  float sum = 0;
  for (int i = 0; i < kFloatLanes; ++i) sum += v[i];
  return sum;
}
[[gnu::always_inline]] inline float max_lanes(FloatLanes v) {
  float most = v[0];
  for (int i = 1; i < kFloatLanes; ++i) most = v[i] > most ? v[i] : most;
  return most;
}

// e^x in each lane, within 2 ulp of expf for x in [-87, 88]: x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, so
// r is exact), e^r by Cephes' expf polynomial, 2^n built in the exponent's bits. Below -87 it is 0 (e^-87 is 1.6e-38,
// the normal range's edge); above 88, e^88; a NaN stays NaN.
[[gnu::always_inline]] inline FloatLanes exp_lanes(FloatLanes x) {
  const IntLanes underflow = x < -87.0f;
  x = x > 88.0f ? FloatLanes{} + 88.0f : x;
  x = underflow ? FloatLanes{} - 87.0f : x;
  constexpr float kRound = 12582912.0f;  // 1.5 x 2^23: adding it rounds to an integer, to nearest even
  const FloatLanes n = (x * 1.44269504088896341f + kRound) - kRound;
  const FloatLanes r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  FloatLanes p = FloatLanes{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const FloatLanes e_r = p * r * r + r + 1.0f;
  const IntLanes exponent = (__builtin_convertvector(n, IntLanes) + 127) << 23;
  FloatLanes two_n;
  std::memcpy(&two_n, &exponent, sizeof two_n);
  return underflow ? FloatLanes{} : e_r * two_n;
}

}  // namespace ringtrain::kernels::cpu
