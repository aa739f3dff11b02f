// Owns the table-driven input normalisation declared in pixel_norm.h.
#include "kernels/cpu/pixel_norm.h"

#include <cstddef>

namespace ringtrain::kernels::cpu {

std::vector<float> pixel_table(int channels, const float* mean, const float* stddev) {
  std::vector<float> table(static_cast<std::size_t>(channels) * 256);
  for (int c = 0; c < channels; ++c)
    for (int v = 0; v < 256; ++v)
      table[static_cast<std::size_t>(c * 256 + v)] = normalized_pixel(static_cast<uint8_t>(v), mean[c], stddev[c]);
  return table;
}

void normalize_pixels(const PixelShape& s, const float* table, const uint8_t* x, float* y) {
  for (int64_t n = 0; n < s.samples; ++n)
    for (int c = 0; c < s.channels; ++c) {
      const int64_t offset = (n * s.channels + c) * s.plane;
      const float* t = table + static_cast<std::ptrdiff_t>(c) * 256;
      for (int64_t p = 0; p < s.plane; ++p) y[offset + p] = t[x[offset + p]];
    }
}

}  // namespace ringtrain::kernels::cpu
