// Owns fully connected layers on the CPU: three sgemm calls and a bias row-sum, W stored out x in.
#include "kernels/cpu/dense.h"

#include <algorithm>
#include <cstddef>

#include "kernels/cpu/gemm.h"

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
  if (dbias) dense_bias_gradient(batch, out, dy, dbias);
}

void dense_bias_gradient(int batch, int out, const float* dy, float* dbias) {
  for (int b = 0; b < batch; ++b) {
    const float* __restrict row = dy + std::ptrdiff_t{b} * out;
    float* __restrict acc = dbias;
    for (int o = 0; o < out; ++o) acc[o] += row[o];
  }
}

}  // namespace ringtrain::kernels::cpu
