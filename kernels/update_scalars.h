// Owns the numbers of one optimizer update that change from step to step (the scheduled rate, Adam's bias
// corrections), in the form the kernels use them, worked out on the host by update_scalars(): one definition for
// both backends (kernels/cpu and kernels/cuda). The CUDA kernels take them by value, or under gpu.cuda_graphs from
// device memory (kernels/cuda/update_scalars.cuh), since a captured graph replays its launches' arguments as they
// were captured and a rate passed by value would stay the captured step's. Inline, so each kernel file computes
// them with its own compiler and flags as it did when it worked them out itself; a graphed step's table takes them
// from kernels/cuda/step_scalars.h, compiled as the CUDA kernels' files are.
#pragma once
#include <cmath>

#include "kernels/optimizer_step.h"

namespace ringtrain::kernels {

struct UpdateScalars {
  float lr = 0;            // the step's rate (SGD, LARS)
  float decay_factor = 1;  // AdamW: 1 - lr * weight_decay, what a parameter that decays is multiplied by
  float step_size = 0;     // Adam: lr / bias_correction1
  float inv_sqrt_c2 = 1;   // Adam: 1 / sqrt(bias_correction2)
  float inv_c1 = 1;        // LAMB: 1 / bias_correction1
};

inline UpdateScalars update_scalars(const SgdStep& step) {
  UpdateScalars s;
  s.lr = step.lr;
  return s;
}

inline UpdateScalars update_scalars(const LarsStep& step) {
  UpdateScalars s;
  s.lr = step.lr;
  return s;
}

inline UpdateScalars update_scalars(const AdamStep& step) {
  UpdateScalars s;
  s.lr = step.lr;
  s.decay_factor = 1.0f - step.lr * step.weight_decay;
  s.step_size = step.lr / step.bias_correction1;
  s.inv_sqrt_c2 = 1.0f / std::sqrt(step.bias_correction2);
  s.inv_c1 = 1.0f / step.bias_correction1;
  return s;
}

}  // namespace ringtrain::kernels
