// Owns the element-wise kernels (activation, dropout, sums, fills). Plain index loops over contiguous arrays
// so -O3 -march=native turns each into AVX2 code; dropout's mask comes from a stateless counter-based hash.
#include "kernels/cpu/elementwise.h"

#include <cmath>
#include <cstring>
#include <type_traits>

namespace ringtrain::kernels::cpu {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

uint64_t mix64(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Keep element i iff the top 24 bits of its hash, read as u in [0, 1), are >= p. The seed is mixed once so
// that seeds differing by the golden-ratio increment do not give shifted copies of one stream.
struct DropoutDraw {
  uint64_t key;
  uint64_t threshold;  // keep iff (hash >> 40) >= threshold, i.e. u >= p
  DropoutDraw(uint64_t seed, float p)
      : key(mix64(seed + kGolden)),
        threshold(static_cast<uint64_t>(std::ceil(static_cast<double>(p) * static_cast<double>(1u << 24)))) {}
  bool keep(int64_t i) const { return (mix64(key + (static_cast<uint64_t>(i) + 1) * kGolden) >> 40) >= threshold; }
};

float keep_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

// Calls f with the activation as a compile-time constant, so each loop is specialised to one formula.
template <class F>
void with_activation(Activation a, F f) {
  switch (a) {
    case Activation::silu: return f(std::integral_constant<Activation, Activation::silu>{});
    case Activation::gelu: return f(std::integral_constant<Activation, Activation::gelu>{});
    case Activation::sigmoid: return f(std::integral_constant<Activation, Activation::sigmoid>{});
    case Activation::hard_swish: return f(std::integral_constant<Activation, Activation::hard_swish>{});
    case Activation::relu6: return f(std::integral_constant<Activation, Activation::relu6>{});
    case Activation::hard_sigmoid: return f(std::integral_constant<Activation, Activation::hard_sigmoid>{});
  }
}

}  // namespace

void relu_forward(int64_t n, const float* x, float* y) {
  // Written so a NaN passes through (NaN < 0 is false): the trainer's non-finite-loss check must still see it.
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

void relu_backward(int64_t n, const float* y, const float* dy, float* dx) {
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void activation_forward(Activation a, int64_t n, const float* x, float* y) {
  with_activation(a, [&](auto kind) {
    for (int64_t i = 0; i < n; ++i) y[i] = activation_value(kind(), x[i]);
  });
}

void activation_backward(Activation a, int64_t n, const float* x, const float* dy, float* dx) {
  with_activation(a, [&](auto kind) {
    for (int64_t i = 0; i < n; ++i) dx[i] = activation_slope(kind(), x[i]) * dy[i];
  });
}

void add(int64_t n, const float* a, const float* b, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void accumulate(int64_t n, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void fill(int64_t n, float value, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = value;
}

void scale(int64_t n, float factor, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] *= factor;
}

// An infinity or a NaN is an all-ones exponent: an integer OR over the elements, which vectorises where a float
// test reduced in order would not.
void unscale(int64_t n, float factor, float* y, int32_t* nonfinite) {
  uint32_t all_ones_exponent = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &y[i], sizeof bits);
    all_ones_exponent |= (bits & 0x7f800000u) == 0x7f800000u ? 1u : 0u;
    y[i] *= factor;
  }
  if (all_ones_exponent) *nonfinite = 1;
}

void dropout_forward(int64_t n, float p, uint64_t seed, const float* x, float* y, uint8_t* mask,
                     NchwIndex order) {
  if (p <= 0.0f) p = 0.0f;
  const DropoutDraw draw(seed, p);
  const float s = keep_scale(p);
  for (int64_t i = 0; i < n; ++i) {
    const bool kept = p < 1.0f && draw.keep(order.of(i));
    mask[i] = kept ? 1 : 0;
    y[i] = kept ? x[i] * s : 0.0f;
  }
}

void dropout_backward(int64_t n, float p, const uint8_t* mask, const float* dy, float* dx) {
  const float s = keep_scale(p);
  for (int64_t i = 0; i < n; ++i) dx[i] = mask[i] ? dy[i] * s : 0.0f;
}

}  // namespace ringtrain::kernels::cpu
