// Owns the CPU twin's GELU kernels; see gelu.h.
#include "kernels/cpu/gelu.h"

#include "kernels/cpu/float_lanes.h"
#include "kernels/cpu/stored_lanes.h"

namespace ringtrain::kernels::cpu {
namespace {

// Phi(x) and phi(x) / x's factor e^(-x^2 / 2) in each lane. For x < 0, Phi(x) = erfc(|x| / sqrt 2) / 2 is taken as
// that product itself rather than as 1 minus a value near 1, which would lose the left tail's digits.
struct NormalLanes {
  FloatLanes cdf;      // Phi(x)
  FloatLanes density;  // phi(x)
};
[[gnu::always_inline]] inline NormalLanes normal_lanes(FloatLanes x) {
  const FloatLanes z = (x < 0 ? -x : x) * 0.70710678118654752f;
  const FloatLanes e = exp_lanes(-z * z);
  const FloatLanes t = 1.0f / (1.0f + 0.3275911f * z);
  FloatLanes p = FloatLanes{} + 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const FloatLanes half_erfc = 0.5f * (p * t) * e;  // erfc(z) / 2
  return {x < 0 ? half_erfc : 1.0f - half_erfc, 0.39894228040143268f * e};
}

[[gnu::always_inline]] inline FloatLanes gelu_lanes(FloatLanes x) { return x * normal_lanes(x).cdf; }
[[gnu::always_inline]] inline FloatLanes gelu_slope_lanes(FloatLanes x) {
  const NormalLanes n = normal_lanes(x);
  return n.cdf + x * n.density;
}

}  // namespace

void gelu_forward(int threads, Elements n, const void* x, void* y) {
  for_each_stored_lanes<1>(threads, n, {x}, y, [](FloatLanes v) { return gelu_lanes(v); });
}

void gelu_backward(int threads, Elements n, const void* x, const void* dy, void* dx) {
  for_each_stored_lanes<2>(threads, n, {x, dy}, dx,
                           [](FloatLanes v, FloatLanes g) { return gelu_slope_lanes(v) * g; });
}

}  // namespace ringtrain::kernels::cpu
