// Owns reordering a 4-D activation between NCHW and NHWC on the CPU (kernels/activation_layout.h): a pure
// permutation of whole values, so any element type reorders bit for bit.
#pragma once
#include "kernels/activation_layout.h"

namespace ringtrain::kernels::cpu {

// y = x laid out as `to` (x is in the other layout). x and y do not overlap.
void reorder_layout(const Planes& p, ActivationLayout to, const void* x, void* y);

}  // namespace ringtrain::kernels::cpu
