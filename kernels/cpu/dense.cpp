// Owns fully connected layers on the CPU: three sgemm calls and a bias row-sum, W stored out x in.
#include "kernels/cpu/dense.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/stored_lanes.h"
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

namespace {

constexpr int64_t kBiasGroup = 16;     // columns a thread's share is counted in: one vector of sums
constexpr int64_t kBiasColumns = 128;  // columns summed at a time: their sums stay in registers

// sums[i] += rows[b][i] for b = 0, 1, ... over n columns (a whole number of lanes) of a batch of rows `stride`
// values apart, in registers.
template <class Io>
void add_column_lanes(int batch, int64_t stride, int64_t n, const typename Io::Stored* rows, float* sums) {
  std::array<FloatLanes, kBiasColumns / kFloatLanes> acc;
  const int64_t vectors = n / kFloatLanes;
  for (int64_t v = 0; v < vectors; ++v) acc[v] = load_lanes(sums + v * kFloatLanes);
  for (int b = 0; b < batch; ++b)
    for (int64_t v = 0; v < vectors; ++v) acc[v] += Io::load(rows + b * stride + v * kFloatLanes);
  for (int64_t v = 0; v < vectors; ++v) store_lanes(acc[v], sums + v * kFloatLanes);
}

// The same for the last few columns (fewer than the lanes), each 16-bit row widened first.
void add_columns(int batch, int64_t stride, int64_t n, ElementType type, const std::byte* rows, float* sums) {
  float widened[kFloatLanes];
  const auto value_bytes = static_cast<int64_t>(element_bytes(type));
  for (int b = 0; b < batch; ++b) {
    const std::byte* row = rows + b * stride * value_bytes;
    const float* values = reinterpret_cast<const float*>(row);
    if (type != ElementType::f32) {
      widen({n, type}, row, widened);
      values = widened;
    }
    for (int64_t i = 0; i < n; ++i) sums[i] += values[i];
  }
}

}  // namespace

void dense_bias_gradient(int batch, int out, ElementType type, const void* dy, float* dbias) {
  if (batch <= 0 || out <= 0) return;
  const auto* rows = static_cast<const std::byte*>(dy);
  const auto value_bytes = static_cast<int64_t>(element_bytes(type));
  // Summing a few rows costs less than waking the threads (the classifier's 10 columns over a batch of 64).
  const int threads = int64_t{batch} * out < (int64_t{1} << 16) ? 1 : compute_threads();
  const int64_t groups = (out + kBiasGroup - 1) / kBiasGroup;
  for_each_thread_run(threads, groups, [&](int64_t first, int64_t end, int) {
    const int64_t last = std::min<int64_t>(end * kBiasGroup, out);
    for (int64_t column = first * kBiasGroup; column < last; column += kBiasColumns) {
      const int64_t n = std::min(kBiasColumns, last - column), in_lanes = n / kFloatLanes * kFloatLanes;
      const std::byte* block = rows + column * value_bytes;
      with_lanes_io(type, [&]<class Io>(Io) {
        add_column_lanes<Io>(batch, out, in_lanes, reinterpret_cast<const typename Io::Stored*>(block), dbias + column);
      });
      if (n > in_lanes)
        add_columns(batch, out, n - in_lanes, type, block + in_lanes * value_bytes, dbias + column + in_lanes);
    }
  });
}

}  // namespace ringtrain::kernels::cpu
