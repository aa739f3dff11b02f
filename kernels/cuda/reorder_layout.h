// Owns reordering a 4-D activation between NCHW and NHWC on the GPU (kernels/activation_layout.h), the CUDA twin of
// kernels/cpu/reorder_layout.h: a permutation of whole values, bit for bit whatever the element type.
#pragma once
#include "kernels/activation_layout.h"
#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

// y = x laid out as `to` (x is in the other layout), in stream order. x and y do not overlap.
void reorder_layout(const Planes& p, ActivationLayout to, const void* x, void* y, Stream stream);

}  // namespace ringtrain::kernels::cuda
