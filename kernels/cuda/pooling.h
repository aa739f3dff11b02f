// Owns max and average pooling on the GPU for activations stored in 16 bits (bf16, fp16; the fp32 path is cuDNN's,
// in src/backend/cuda/dnn.h), NCHW or NHWC, any window, stride and padding. Max pooling keeps each output's winner (its
// place in the window, the first largest in window order) for backward, as the CPU twin keeps its position; average
// pooling divides by the whole window, padding counted as zeros. Backward gathers: one thread per input value adds
// the gradients of the outputs whose window covers it, in a fixed order, so it is deterministic and needs no atomics.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/activation_layout.h"
#include "kernels/op_shapes.h"
#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

// The winners max pooling keeps: one uint16 per output value, in the output's layout, the winner's place in its
// window (row x window + column; windows of at most 255); none for average pooling.
std::size_t pool_saved_bytes(const PoolShape& s, PoolMode mode);
// x, y, dy and dx stored in `layout`; each output value is the same in either (same window order, same arithmetic).
void pool_forward(const PoolShape& s, PoolMode mode, ActivationLayout layout, const void* x, void* y,
                  uint16_t* winners, Stream stream);
// dx overwritten.
void pool_backward(const PoolShape& s, PoolMode mode, ActivationLayout layout, const void* dy,
                   const uint16_t* winners, void* dx, Stream stream);

}  // namespace ringtrain::kernels::cuda
