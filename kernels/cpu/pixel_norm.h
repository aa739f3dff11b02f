// Owns input normalisation on the host: uint8 N x C x H x W pixels to fp32 through a table of the 256 values
// of each channel (kernels/pixel_norm.h defines them), so a pixel costs one lookup. The training loader and
// the CPU twin's Backend::normalize_pixels both use it.
#pragma once
#include <vector>

#include "kernels/pixel_norm.h"

namespace ringtrain::kernels::cpu {

// table[c * 256 + v] = normalized_pixel(v, mean[c], stddev[c]) for the `channels` channels.
std::vector<float> pixel_table(int channels, const float* mean, const float* stddev);

// y = table lookup of x, element by element; serial (the loader calls it from its own threads).
void normalize_pixels(const PixelShape& s, const float* table, const uint8_t* x, float* y);

}  // namespace ringtrain::kernels::cpu
