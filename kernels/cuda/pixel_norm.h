// Owns input normalisation on the GPU: the uint8 batch the loader copied to the device becomes the network's
// fp32 input, (v - mean[c]) / stddev[c] as kernels/pixel_norm.h defines it, so the host sends a quarter of the
// bytes it would send as floats. Bit-identical to the CPU twin (kernels/cpu/pixel_norm.h): IEEE division on both.
#pragma once
#include <cstdint>

#include "kernels/cuda/stream.h"
#include "kernels/pixel_norm.h"

namespace ringtrain::kernels::cuda {

// x: s.elements() bytes; mean, stddev: s.channels floats; y: s.elements() floats. All device memory.
void normalize_pixels(const PixelShape& s, const uint8_t* x, const float* mean, const float* stddev, float* y,
                      Stream stream);

}  // namespace ringtrain::kernels::cuda
