// Owns what the loss needs besides its inputs, on every backend: the scale that turns summed gradients into a
// mean over the global batch, and label smoothing.
#pragma once

namespace ringtrain::kernels {

struct LossSettings {
  // dlogits are multiplied by this: 1 / (global samples contributing to one optimizer step), so that the ranks'
  // summed gradients are the mean.
  float grad_scale = 1;
  // e in [0, 1): the target is (1 - e) on the label plus e / classes on every class (Szegedy et al. 2016). 0 is
  // plain cross-entropy, computed exactly as without smoothing.
  float label_smoothing = 0;
};

}  // namespace ringtrain::kernels
