// Owns the resize-then-centre-crop arithmetic: one scale for both axes (the larger of the two ratios, so the
// shorter side lands exactly on its target) and a crop offset that splits the excess evenly.
#include "io/image_resize.h"

#include <algorithm>
#include <cmath>

namespace ringtrain::io {

namespace {

// Where output coordinate i (after the crop offset) samples the source axis of length n, as two taps.
struct Taps {
  int low = 0, high = 0;
  float weight_high = 0;
};

Taps taps_for(int i, int offset, double scale, int n) {
  const double source = (i + offset + 0.5) / scale - 0.5;
  const double clamped = std::clamp(source, 0.0, static_cast<double>(n - 1));
  const int low = static_cast<int>(std::floor(clamped));
  return {low, std::min(low + 1, n - 1), static_cast<float>(clamped - low)};
}

}  // namespace

void resize_crop_planar(const DecodedImage& image, ImageSize size, std::span<uint8_t> out) {
  const double scale = std::max(static_cast<double>(size.height) / image.height,
                                static_cast<double>(size.width) / image.width);
  const int top = static_cast<int>(std::lround((image.height * scale - size.height) / 2));
  const int left = static_cast<int>(std::lround((image.width * scale - size.width) / 2));
  const auto channels = static_cast<std::size_t>(image.channels);
  const auto plane = static_cast<std::size_t>(size.height) * static_cast<std::size_t>(size.width);
  const auto row_stride = static_cast<std::size_t>(image.width) * channels;
  for (int y = 0; y < size.height; ++y) {
    const Taps ty = taps_for(y, top, scale, image.height);
    for (int x = 0; x < size.width; ++x) {
      const Taps tx = taps_for(x, left, scale, image.width);
      for (std::size_t c = 0; c < channels; ++c) {
        const auto at = [&](int row, int col) {
          return static_cast<float>(image.pixels[static_cast<std::size_t>(row) * row_stride +
                                                 static_cast<std::size_t>(col) * channels + c]);
        };
        const float upper = at(ty.low, tx.low) + (at(ty.low, tx.high) - at(ty.low, tx.low)) * tx.weight_high;
        const float lower = at(ty.high, tx.low) + (at(ty.high, tx.high) - at(ty.high, tx.low)) * tx.weight_high;
        const float value = upper + (lower - upper) * ty.weight_high;
        out[c * plane + static_cast<std::size_t>(y) * static_cast<std::size_t>(size.width) + static_cast<std::size_t>(x)] =
            static_cast<uint8_t>(std::clamp(std::lround(value), 0L, 255L));
      }
    }
  }
}

}  // namespace ringtrain::io
