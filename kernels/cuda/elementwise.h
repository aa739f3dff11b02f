// Owns the small element-wise kernels on the GPU: residual add, gradient accumulation, fill, ReLU, and the dense
// layer's bias broadcast and bias gradient. The CPU twins are in kernels/cpu/elementwise.h. All run
// asynchronously on `stream`.
#pragma once
#include <cstdint>

#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

void add(int64_t n, const float* a, const float* b, float* y, Stream stream);  // y = a + b (y may alias a or b)
void accumulate(int64_t n, const float* x, float* y, Stream stream);            // y += x
void fill(int64_t n, float value, float* y, Stream stream);
void scale(int64_t n, float factor, float* y, Stream stream);                   // y *= factor
// y *= factor, and *nonfinite = 1 (device memory) where any element is infinite or NaN, left as it is otherwise.
void unscale(int64_t n, float factor, float* y, int32_t* nonfinite, Stream stream);
void relu_forward(int64_t n, const float* x, float* y, Stream stream);          // y may alias x
void relu_backward(int64_t n, const float* y, const float* dy, float* dx, Stream stream);  // dx = y > 0 ? dy : 0

// y[r][u] += bias[u] for a rows x units row-major matrix.
void add_bias_rows(int rows, int units, const float* bias, float* y, Stream stream);
// dbias[u] += sum over r of dy[r][u] (accumulates, like every parameter gradient). Deterministic: one thread
// per unit sums its column in row order.
void bias_grad_rows(int rows, int units, const float* dy, float* dbias, Stream stream);

}  // namespace ringtrain::kernels::cuda
