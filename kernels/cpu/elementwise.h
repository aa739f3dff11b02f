// Owns the small element-wise operations: activation, dropout, residual add, and gradient accumulation.
#pragma once
#include <cstdint>

#include "kernels/activation.h"
#include "kernels/activation_layout.h"

namespace ringtrain::kernels::cpu {

void relu_forward(int64_t n, const float* x, float* y);
void relu_backward(int64_t n, const float* y, const float* dy, float* dx);  // uses the output y: y > 0
// y = a(x), and dx = a'(x) dy (kernels/activation.h); y may alias x, dx may alias dy.
void activation_forward(Activation a, int64_t n, const float* x, float* y);
void activation_backward(Activation a, int64_t n, const float* x, const float* dy, float* dx);
void add(int64_t n, const float* a, const float* b, float* y);               // y = a + b (y may alias a or b)
void accumulate(int64_t n, const float* x, float* y);                        // y += x
void fill(int64_t n, float value, float* y);
void scale(int64_t n, float factor, float* y);
// y *= factor, and *nonfinite = 1 where any element is infinite or NaN (left as it is otherwise): fp16's loss
// scaling takes the scale back out of the gradients and learns whether they overflowed in one pass.
void unscale(int64_t n, float factor, float* y, int32_t* nonfinite);

// Inverted dropout: keeps each element with probability 1-p and scales kept ones by 1/(1-p), so inference is
// the identity. The mask is drawn from a counter-based generator keyed by (seed, element's NCHW index: `order`)
// so a step is reproducible on any rank, thread count and layout.
void dropout_forward(int64_t n, float p, uint64_t seed, const float* x, float* y, uint8_t* mask,
                     NchwIndex order = {});
void dropout_backward(int64_t n, float p, const uint8_t* mask, const float* dy, float* dx);

}  // namespace ringtrain::kernels::cpu
