// Owns fully connected layers on the CPU: three sgemm calls and a bias row-sum, W stored out x in.
#include "kernels/cpu/dense.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/thread_runs.h"

namespace ringtrain::kernels::cpu {

void dense_forward(int batch, int in, int out, const float* x, const float* w, const float* bias, float* y) {
  if (batch <= 0 || out <= 0) return;
  // Bias written first and accumulated into by the GEMM (beta = 1): no second pass over y.
  if (bias)
    for (int b = 0; b < batch; ++b) std::copy(bias, bias + out, y + std::ptrdiff_t{b} * out);
  sgemm(Transpose::no, Transpose::yes, batch, out, in, 1.0f, x, in, w, in, bias ? 1.0f : 0.0f, y, out);
}

void dense_backward(int batch, int in, int out, const float* x, const float* w, const float* dy, float* dx,
                    float* dw, float* dbias) {
  if (batch <= 0) return;
  if (dx) sgemm(Transpose::no, Transpose::no, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
  sgemm(Transpose::yes, Transpose::no, out, in, batch, 1.0f, dy, out, x, in, 1.0f, dw, in);
  if (dbias) dense_bias_gradient(batch, out, ElementType::f32, dy, dbias);
}

void dense_bias_gradient(int batch, int out, ElementType type, const void* dy, float* dbias) {
  if (batch <= 0 || out <= 0) return;
  constexpr int64_t kGroup = 16;    // columns a thread's share is counted in: one vector of sums
  constexpr int64_t kColumns = 128;  // columns summed at a time: their widened row sits on the stack
  const auto* rows = static_cast<const std::byte*>(dy);
  const auto value_bytes = static_cast<int64_t>(element_bytes(type));
  // Summing a few rows costs less than waking the threads (the classifier's 10 columns over a batch of 64).
  const int threads = int64_t{batch} * out < (int64_t{1} << 16) ? 1 : compute_threads();
  const int64_t groups = (out + kGroup - 1) / kGroup;
  for_each_thread_run(threads, groups, [&](int64_t first, int64_t end, int) {
    float widened[kColumns];
    const int64_t last = std::min<int64_t>(end * kGroup, out);
    for (int64_t column = first * kGroup; column < last; column += kColumns) {
      const int64_t n = std::min(kColumns, last - column);
      float* __restrict acc = dbias + column;
      for (int b = 0; b < batch; ++b) {
        const std::byte* row = rows + (int64_t{b} * out + column) * value_bytes;
        const float* __restrict values = reinterpret_cast<const float*>(row);
        if (type != ElementType::f32) {
          widen({n, type}, row, widened);
          values = widened;
        }
        for (int64_t i = 0; i < n; ++i) acc[i] += values[i];
      }
    }
  });
}

}  // namespace ringtrain::kernels::cpu
