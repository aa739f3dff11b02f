// Owns the LAMB update on the CPU (You et al. 2020): Adam's moments give each parameter a direction, and each
// tensor's step is scaled by the ratio of its weight norm to its direction's norm.
#pragma once
#include <cstdint>

#include "kernels/optimizer_step.h"

namespace ringtrain::kernels::cpu {

// Per tensor: m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  r = (m / c1) / (sqrt(v) / sqrt(c2) + eps) + wd w;
// trust = |w| / |r| (1 where either is 0);  w -= lr * trust * r. A tensor whose range does not adapt (biases,
// batch norm) takes trust 1 and no weight decay. Norms are summed in double in index order (deterministic).
void lamb_update(int tensors, const TensorRange* ranges, const AdamStep& step, float* grad, float* m, float* v,
                 float* param);

}  // namespace ringtrain::kernels::cpu
