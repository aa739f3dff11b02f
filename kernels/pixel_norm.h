// Owns the definition of input normalisation: a uint8 pixel of channel c becomes (v - mean[c]) / stddev[c] in
// fp32, one subtraction and one correctly rounded division. The loader threads, the CPU twin and the CUDA
// kernel all evaluate this one function, so the network's input is bit-identical wherever it is made.
#pragma once
#include <cstdint>

#include "kernels/host_device.h"

namespace ringtrain::kernels {

// A batch of uint8 samples, N x C x H x W.
struct PixelShape {
  int64_t samples = 0;
  int channels = 0;
  int64_t plane = 0;  // H x W
  int64_t elements() const { return samples * channels * plane; }
};

RT_HOST_DEVICE inline float normalized_pixel(uint8_t v, float mean, float stddev) {
  return (static_cast<float>(v) - mean) / stddev;
}

}  // namespace ringtrain::kernels
