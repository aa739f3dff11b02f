// Owns the small element-wise kernels on the GPU: residual add, gradient accumulation, fill, ReLU and the smooth
// activations, the dense layer's bias broadcast and bias gradient, and a convolution's per-channel bias and its
// gradient. Activations are in the element type their Elements (or `type`) says, computed in fp32 and stored
// rounded (element_access.cuh);
// parameters and their gradients are fp32. The CPU twins are in kernels/cpu/elementwise.h and
// kernels/cpu/stored_elementwise.h. All run asynchronously on `stream`.
#pragma once
#include <cstdint>

#include "kernels/activation.h"
#include "kernels/element_type.h"
#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

void add(Elements n, const void* a, const void* b, void* y, Stream stream);  // y = a + b (y may alias a or b)
// y = relu(a + b) in one pass: the bits add then relu_forward write (a residual join's ReLU).
void add_relu(Elements n, const void* a, const void* b, void* y, Stream stream);
void accumulate(Elements n, const void* x, void* y, Stream stream);          // y += x
// y (fp32) += x (n.type): a 16-bit gradient added into an fp32 parameter gradient.
void accumulate_into_fp32(Elements n, const void* x, float* y, Stream stream);
void fill(int64_t n, float value, float* y, Stream stream);
void scale(int64_t n, float factor, float* y, Stream stream);                   // y *= factor
// y *= factor, and *nonfinite = 1 (device memory) where any element is infinite or NaN, left as it is otherwise.
void unscale(int64_t n, float factor, float* y, int32_t* nonfinite, Stream stream);
void relu_forward(Elements n, const void* x, void* y, Stream stream);  // y may alias x
void relu_backward(Elements n, const void* y, const void* dy, void* dx, Stream stream);  // dx = y > 0 ? dy : 0
// y = a(x), dx = a'(x) dy: kernels/activation.h's formulas, which the CPU twin evaluates too. y may alias x.
void activation_forward(Activation a, Elements n, const void* x, void* y, Stream stream);
void activation_backward(Activation a, Elements n, const void* x, const void* dy, void* dx, Stream stream);

// y[r][u] += bias[u] for a rows x units row-major matrix of `type`.
void add_bias_rows(int rows, int units, const float* bias, ElementType type, void* y, Stream stream);
// dbias[u] += sum over r of dy[r][u] (accumulates, like every parameter gradient). Deterministic: one thread
// per unit sums its column in row order.
void bias_grad_rows(int rows, int units, ElementType type, const void* dy, float* dbias, Stream stream);
// The same for a tall matrix (an NHWC convolution's bias gradient: rows = N x OH x OW, often millions), where a
// thread per unit would leave all but a few of the GPU's cores idle: blocks of 32 units x 8 row lanes each add a
// chunk of rows into partials[chunk][unit] (the lanes added in order), then each unit's chunks are added in order.
// Deterministic, no atomics; `partials` holds bias_grad_tall_partials(rows, units) floats.
int64_t bias_grad_tall_partials(int rows, int units);
void bias_grad_tall_rows(int rows, int units, ElementType type, const void* dy, float* partials, float* dbias,
                         Stream stream);

// NCHW (batch x channels x spatial) of `type`: y[n][c][i] += bias[c].
void add_bias_channels(int batch, int channels, int spatial, const float* bias, ElementType type, void* y,
                       Stream stream);
// dbias[c] += the sum of dy over images and positions, in a fixed order (one block per channel): deterministic.
void bias_grad_channels(int batch, int channels, int spatial, ElementType type, const void* dy, float* dbias,
                        Stream stream);

}  // namespace ringtrain::kernels::cuda
