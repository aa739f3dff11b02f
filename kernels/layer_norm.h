// Owns the definition of layer normalisation over channels, per (sample, position) of an N x C x H x W tensor:
// xhat = (x - mean) * rstd with the C values' mean and biased variance, rstd = 1 / sqrt(var + epsilon), and
// y = gamma[c] * xhat + beta[c]; and its gradients. The CPU twin's loops and the CUDA kernels evaluate these
// functions alone, so both backends compute one formula: sums in double, the statistics kept for backward in fp32.
// A position's values are read through `value(c)`, so the callers' layouts (kernels/activation_layout.h) and
// element types stay theirs.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace ringtrain::kernels {

// A layer norm's per-channel parameters (fp32, C each) and per-position statistics (fp32, N x HW each: forward
// writes them, backward reads them), as both backends' operations take them.
struct LayerNormTensors {
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float* mean = nullptr;
  float* rstd = nullptr;
};

// One position's statistics, kept from forward for backward.
struct LayerNormStats {
  float mean = 0, rstd = 1;
};

// The statistics as sums over a position's C values, so that a loop over them one at a time (layer_norm_stats)
// and a kernel that splits them over threads and adds the threads' sums share every step but the order of addition:
// the mean from the values' sum, then the statistics from the sum of squared deviations from that mean.
RT_HOST_DEVICE inline double layer_norm_mean(double sum, int64_t channels) {
  return sum / static_cast<double>(channels);
}
// squares + (x - mean)^2 in one rounding (a fused multiply-add), written out: compilers fuse the multiply and the
// add on their own where the target has the instruction (the CPU twin's -march=native, nvcc) and not elsewhere (a
// test's build), which would give the definition two sets of bits.
RT_HOST_DEVICE inline double layer_norm_add_squared_deviation(double squares, float x, double mean) {
  const double d = x - mean;
  return fma(d, d, squares);
}
RT_HOST_DEVICE inline LayerNormStats layer_norm_stats_of(double mean, double squares, int64_t channels,
                                                         float epsilon) {
  const double variance = squares / static_cast<double>(channels);
  return {static_cast<float>(mean), static_cast<float>(1.0 / sqrt(variance + static_cast<double>(epsilon)))};
}

// Two passes over the position's values: the mean, then the squared deviations from it (no cancellation).
template <class Value>
RT_HOST_DEVICE LayerNormStats layer_norm_stats(int64_t channels, float epsilon, Value value) {
  double sum = 0;
  for (int64_t c = 0; c < channels; ++c) sum += value(c);
  const double mean = layer_norm_mean(sum, channels);
  double squares = 0;
  for (int64_t c = 0; c < channels; ++c) squares = layer_norm_add_squared_deviation(squares, value(c), mean);
  return layer_norm_stats_of(mean, squares, channels, epsilon);
}

RT_HOST_DEVICE inline float layer_norm_normalised(float x, LayerNormStats s) { return (x - s.mean) * s.rstd; }

RT_HOST_DEVICE inline float layer_norm_output(float x, LayerNormStats s, float gamma, float beta) {
  return gamma * layer_norm_normalised(x, s) + beta;
}

// The means over the position's channels that its input gradient subtracts: of g = gamma * dy, and of g * xhat.
struct LayerNormGradientMeans {
  float g = 0, g_xhat = 0;
};

// One channel's terms of those sums, g = gamma * dy and g * xhat, added in double; and the means from the sums.
struct LayerNormGradientSums {
  double g = 0, g_xhat = 0;
};
RT_HOST_DEVICE inline void add_layer_norm_gradient_terms(LayerNormGradientSums& sums, float x, float dy, float gamma,
                                                         LayerNormStats s) {
  const double gc = static_cast<double>(gamma) * dy;
  sums.g += gc;
  sums.g_xhat += gc * layer_norm_normalised(x, s);
}
RT_HOST_DEVICE inline LayerNormGradientMeans layer_norm_gradient_means_of(LayerNormGradientSums sums,
                                                                          int64_t channels) {
  const double count = static_cast<double>(channels);
  return {static_cast<float>(sums.g / count), static_cast<float>(sums.g_xhat / count)};
}

template <class Value, class Gradient, class Gamma>
RT_HOST_DEVICE LayerNormGradientMeans layer_norm_gradient_means(int64_t channels, LayerNormStats s, Value value,
                                                                Gradient dy, Gamma gamma) {
  LayerNormGradientSums sums;
  for (int64_t c = 0; c < channels; ++c) add_layer_norm_gradient_terms(sums, value(c), dy(c), gamma(c), s);
  return layer_norm_gradient_means_of(sums, channels);
}

// A channel's term of dgamma, summed over positions: dy * xhat (dbeta's is dy itself).
RT_HOST_DEVICE inline double layer_norm_gamma_gradient_term(float x, float dy, LayerNormStats s) {
  return static_cast<double>(dy) * layer_norm_normalised(x, s);
}

// dx = rstd * (gamma * dy - mean(g) - xhat * mean(g * xhat)): the normalisation's Jacobian applied to gamma * dy.
RT_HOST_DEVICE inline float layer_norm_input_gradient(float x, float dy, float gamma, LayerNormStats s,
                                                      LayerNormGradientMeans m) {
  return s.rstd * (gamma * dy - m.g - layer_norm_normalised(x, s) * m.g_xhat);
}

}  // namespace ringtrain::kernels
