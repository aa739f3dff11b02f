// Owns the AdamW update on the CPU: Adam's moments with decoupled weight decay, fused into one pass over the flat
// parameter buffer (the CUDA twin does the same in one kernel).
#pragma once
#include <cstdint>

#include "kernels/optimizer_step.h"

namespace ringtrain::kernels::cpu {

// As PyTorch's AdamW: p *= 1 - lr * wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
// p -= (lr / c1) * m / (sqrt(v) / sqrt(c2) + eps), with c1, c2 the bias corrections of step and wd applied where
// decay_mask's bit is set (kernels/optimizer_step.h).
void adamw_update(int64_t n, const AdamStep& step, const uint32_t* decay_mask, float* grad, float* m, float* v,
                  float* param);

}  // namespace ringtrain::kernels::cpu
