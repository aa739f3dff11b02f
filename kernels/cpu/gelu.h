// Owns GELU (the erf form) and its derivative on the CPU twin, 16 lanes at a time (float_lanes.h) on the compute
// threads, over values stored in any element type (converted in the lanes: stored_lanes.h). erf is Abramowitz &
// Stegun's 7.1.26 (|error| <= 1.5e-7, the approximation oneDNN's GELU kernels use), whose e^(-z^2) at
// z = |x| / sqrt(2) is also the normal density's factor, so the derivative Phi(x) + x phi(x) costs one exp: oneDNN's
// eltwise backward took 4-5x its forward's time on ViT-S/16's GELU.
#pragma once
#include <cstdint>

#include "kernels/element_type.h"

namespace ringtrain::kernels::cpu {

// y = x Phi(x); y may alias x.
void gelu_forward(int threads, Elements n, const void* x, void* y);
// dx = (Phi(x) + x phi(x)) dy, the derivative at the forward's input x; dx may alias dy.
void gelu_backward(int threads, Elements n, const void* x, const void* dy, void* dx);

}  // namespace ringtrain::kernels::cpu
