// Owns the CPU twin's GELU kernels; see gelu.h.
#include "kernels/cpu/gelu.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <tuple>

#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/float_lanes.h"
#include "kernels/cpu/thread_runs.h"

namespace ringtrain::kernels::cpu {
namespace {

constexpr int64_t kChunk = 1024;  // values widened at a time: three operands' fp32 chunks stay in L1

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

// out[i] = f(in...) over count fp32 values, whole vectors and then the rest.
template <class F>
void fp32_run(int64_t count, F f, float* out, const auto*... in) {
  const int64_t whole = count / kFloatLanes * kFloatLanes;
  for (int64_t i = 0; i < whole; i += kFloatLanes) store_lanes(f(load_lanes(in + i)...), out + i);
  const int rest = static_cast<int>(count - whole);
  if (rest > 0) store_part(f(load_part(in + whole, rest, 0.0f)...), rest, out + whole);
}

const std::byte* at(const void* base, ElementType type, int64_t i) {
  return static_cast<const std::byte*>(base) + static_cast<std::ptrdiff_t>(element_bytes(type)) * i;
}
std::byte* at(void* base, ElementType type, int64_t i) {
  return static_cast<std::byte*>(base) + static_cast<std::ptrdiff_t>(element_bytes(type)) * i;
}

// y = f(inputs...) over n values, chunks of kChunk shared among the threads; fp32 read and written in place,
// 16-bit types widened into each thread's own chunk buffers and rounded back.
template <std::size_t Inputs, class F>
void on_chunks(int threads, Elements n, const std::array<const void*, Inputs>& inputs, void* y, F f) {
  const int64_t chunks = (n.n + kChunk - 1) / kChunk;
  for_each_thread_run(threads, chunks, [&](int64_t first_chunk, int64_t end_chunk, int) {
    std::array<std::array<float, kChunk>, Inputs> wide;
    std::array<float, kChunk> out;
    for (int64_t c = first_chunk; c < end_chunk; ++c) {
      const int64_t first = c * kChunk, count = std::min(kChunk, n.n - first);
      if (n.type == ElementType::f32) {
        std::apply([&](auto... in) { fp32_run(count, f, reinterpret_cast<float*>(at(y, n.type, first)),
                                              reinterpret_cast<const float*>(at(in, n.type, first))...); },
                   inputs);
        continue;
      }
      for (std::size_t i = 0; i < Inputs; ++i) widen({count, n.type}, at(inputs[i], n.type, first), wide[i].data());
      std::apply([&](auto&... in) { fp32_run(count, f, out.data(), static_cast<const float*>(in.data())...); },
                 wide);
      narrow(out.data(), {count, n.type}, at(y, n.type, first));
    }
  });
}

}  // namespace

void gelu_forward(int threads, Elements n, const void* x, void* y) {
  on_chunks<1>(threads, n, {x}, y, [](FloatLanes v) { return gelu_lanes(v); });
}

void gelu_backward(int threads, Elements n, const void* x, const void* dy, void* dx) {
  on_chunks<2>(threads, n, {x, dy}, dx, [](FloatLanes v, FloatLanes g) { return gelu_slope_lanes(v) * g; });
}

}  // namespace ringtrain::kernels::cpu
