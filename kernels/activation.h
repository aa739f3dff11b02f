// Owns the definition of the smooth and clipped activations (SiLU, GELU, sigmoid, hard-swish, ReLU6, and the
// hard sigmoid relu6(x + 3) / 6 of MobileNetV3's squeeze-and-excitation gate) and their
// derivatives: the CPU twin's loop and the CUDA kernel evaluate these functions alone, in fp32, so both backends
// compute one formula (except GELU, SiLU and sigmoid on the CPU backend, which run on vector kernels of the same
// definitions: oneDNN's, kernels/cpu/dnnl_eltwise.h, and GELU's derivative ours, kernels/cpu/gelu.h, their erf an
// approximation within 1.5e-7). Backward takes the derivative at the input x (PyTorch's
// definitions, GELU the exact erf form, the clipped ones' gradient zero at and beyond their corners).
#pragma once
#include <cmath>

#include "kernels/host_device.h"

namespace ringtrain::kernels {

enum class Activation { silu, gelu, sigmoid, hard_swish, relu6, hard_sigmoid };

RT_HOST_DEVICE inline float logistic(float x) { return 1.0f / (1.0f + expf(-x)); }

// v clipped to [0, 6] by comparisons, which compilers turn into vector min/max on the CPU: fminf and fmaxf are library
// calls there unless math is relaxed (measured 20x slower on MobileNetV2's ReLU6 layers). A NaN passes through, as
// through PyTorch's clamp, so the trainer's non-finite check still sees it.
RT_HOST_DEVICE inline float clip_0_6(float v) { return v < 0.0f ? 0.0f : v > 6.0f ? 6.0f : v; }

RT_HOST_DEVICE inline float activation_value(Activation a, float x) {
  switch (a) {
    case Activation::silu: return x * logistic(x);
    case Activation::gelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case Activation::sigmoid: return logistic(x);
    case Activation::hard_swish: return x * clip_0_6(x + 3.0f) * (1.0f / 6.0f);
    case Activation::relu6: return clip_0_6(x);
    case Activation::hard_sigmoid: return clip_0_6(x + 3.0f) * (1.0f / 6.0f);
  }
  return x;
}

// d activation / dx at x.
RT_HOST_DEVICE inline float activation_slope(Activation a, float x) {
  switch (a) {
    case Activation::silu: {
      const float s = logistic(x);
      return s * (1.0f + x * (1.0f - s));
    }
    case Activation::gelu:  // Phi(x) + x phi(x)
      return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) + x * 0.39894228040143268f * expf(-0.5f * x * x);
    case Activation::sigmoid: {
      const float s = logistic(x);
      return s * (1.0f - s);
    }
    case Activation::hard_swish: return x < -3.0f ? 0.0f : x > 3.0f ? 1.0f : x * (1.0f / 3.0f) + 0.5f;
    case Activation::relu6: return x > 0.0f && x < 6.0f ? 1.0f : 0.0f;
    case Activation::hard_sigmoid: return x > -3.0f && x < 3.0f ? 1.0f / 6.0f : 0.0f;
  }
  return 1.0f;
}

}  // namespace ringtrain::kernels
