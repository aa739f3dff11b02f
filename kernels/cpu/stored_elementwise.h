// Owns the element-wise operations on activations in any stored element type (kernels/element_type.h): fp32 goes
// straight to kernels/cpu/elementwise.h; bf16 and fp16 take the sums in lanes (stored_lanes.h) and run the fp32
// activation kernels a chunk at a time (stored_chunks.h), each tensor crossing memory once at its own width, with the
// arithmetic of fp32 tensors holding the same values.
#pragma once
#include "kernels/activation.h"
#include "kernels/element_type.h"

namespace ringtrain::kernels::cpu {

void add(Elements n, const void* a, const void* b, void* y);  // y = a + b (y may alias a or b)
void accumulate(Elements n, const void* x, void* y);          // y += x
void relu_forward(Elements n, const void* x, void* y);        // y may alias x
void relu_backward(Elements n, const void* y, const void* dy, void* dx);
void activation_forward(Activation a, Elements n, const void* x, void* y);  // y may alias x
void activation_backward(Activation a, Elements n, const void* x, const void* dy, void* dx);

}  // namespace ringtrain::kernels::cpu
