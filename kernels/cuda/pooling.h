// Owns max and average pooling on the GPU for activations stored in 16 bits (bf16, fp16; the fp32 path is cuDNN's,
// in src/backend/cuda/dnn.h), NCHW, any window, stride and padding. Max pooling keeps each output's winner (its
// position in the input plane, the first largest in window order) for backward, as the CPU twin does; average
// pooling divides by the whole window, padding counted as zeros. Backward gathers: one thread per input value adds
// the gradients of the outputs whose window covers it, in a fixed order, so it is deterministic and needs no atomics.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/op_shapes.h"
#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

// The winners max pooling keeps: one int32 per output value; none for average pooling.
std::size_t pool_saved_bytes(const PoolShape& s, PoolMode mode);
void pool_forward(const PoolShape& s, PoolMode mode, const void* x, void* y, int32_t* winners, Stream stream);
// dx overwritten.
void pool_backward(const PoolShape& s, PoolMode mode, const void* dy, const int32_t* winners, void* dx,
                   Stream stream);

}  // namespace ringtrain::kernels::cuda
