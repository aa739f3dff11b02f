// Owns the CPU's fp32 <-> bf16 / fp16 conversion loops.
#include "kernels/cpu/element_conversion.h"

#include <cstring>

#include "kernels/cpu/bf16.h"

namespace ringtrain::kernels::cpu {
namespace {

void fp16_to_float(const uint16_t* __restrict x, int64_t n, float* __restrict y) {
  for (int64_t i = 0; i < n; ++i) {
    _Float16 h;
    std::memcpy(&h, x + i, sizeof h);
    y[i] = static_cast<float>(h);
  }
}

void float_to_fp16(const float* __restrict x, int64_t n, uint16_t* __restrict y) {
  for (int64_t i = 0; i < n; ++i) {
    const auto h = static_cast<_Float16>(x[i]);
    std::memcpy(y + i, &h, sizeof h);
  }
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

}  // namespace ringtrain::kernels::cpu
