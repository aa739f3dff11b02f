// Owns the CPU's fp32 <-> bf16 / fp16 conversion loops.
#include "kernels/cpu/element_conversion.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/stored_values.h"
#include "kernels/cpu/thread_runs.h"

namespace ringtrain::kernels::cpu {
namespace {

void fp16_to_float(const uint16_t* __restrict x, int64_t n, float* __restrict y) {
  for (int64_t i = 0; i < n; ++i) y[i] = Fp16Values::load(x[i]);
}

void float_to_fp16(const float* __restrict x, int64_t n, uint16_t* __restrict y) {
  for (int64_t i = 0; i < n; ++i) y[i] = Fp16Values::store(x[i]);
}

// Below this many values a second thread costs more than it converts (a few microseconds to wake).
constexpr int64_t kValuesPerThread = 1 << 16;

// Calls convert(first, count) for the runs of [0, n) the compute threads take.
template <class Convert>
void on_threads(int64_t n, Convert&& convert) {
  const int64_t runs = std::clamp<int64_t>(n / kValuesPerThread, 1, compute_threads());
  for_each_thread_run(static_cast<int>(runs), runs, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) convert(n * r / runs, n * (r + 1) / runs - n * r / runs);
  });
}

}  // namespace

void widen(Elements x, const void* x_data, float* y) {
  if (x.n <= 0) return;
  switch (x.type) {
    case ElementType::f32: std::memcpy(y, x_data, x.bytes()); break;
    case ElementType::bf16: bf16_to_float(static_cast<const uint16_t*>(x_data), x.n, y); break;
    case ElementType::f16: fp16_to_float(static_cast<const uint16_t*>(x_data), x.n, y); break;
  }
}

void narrow(const float* x, Elements y, void* y_data) {
  if (y.n <= 0) return;
  switch (y.type) {
    case ElementType::f32: std::memcpy(y_data, x, y.bytes()); break;
    case ElementType::bf16: float_to_bf16(x, y.n, static_cast<uint16_t*>(y_data)); break;
    case ElementType::f16: float_to_fp16(x, y.n, static_cast<uint16_t*>(y_data)); break;
  }
}

void widen_on_threads(Elements x, const void* x_data, float* y) {
  on_threads(x.n, [&](int64_t first, int64_t count) {
    widen({count, x.type}, static_cast<const std::byte*>(x_data) + first * static_cast<int64_t>(element_bytes(x.type)),
          y + first);
  });
}

void narrow_on_threads(const float* x, Elements y, void* y_data) {
  on_threads(y.n, [&](int64_t first, int64_t count) {
    narrow(x + first, {count, y.type},
           static_cast<std::byte*>(y_data) + first * static_cast<int64_t>(element_bytes(y.type)));
  });
}

}  // namespace ringtrain::kernels::cpu
