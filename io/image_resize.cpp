// Owns the resize-then-centre-crop arithmetic: one scale for both axes (the larger of the two ratios, so the
// shorter side lands exactly on its target) and a crop offset that splits the excess evenly. Enlarging samples
// bilinearly at pixel centres; shrinking averages the source area each output pixel covers (OpenCV's INTER_AREA,
// FFCV's choice), since two taps of a shrink by more than 2 skip source pixels and alias fine detail.
#include "io/image_resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ringtrain::io {

namespace {

struct Tap {
  int source = 0;
  float weight = 0;
};

// The taps of output coordinate i (after the crop offset) along a source axis of length n.
std::vector<Tap> taps_for(int i, int offset, double scale, int n) {
  if (scale >= 1.0) {  // enlarging: bilinear at pixel centres
    const double source = std::clamp((i + offset + 0.5) / scale - 0.5, 0.0, static_cast<double>(n - 1));
    const int low = static_cast<int>(std::floor(source));
    const auto high_weight = static_cast<float>(source - low);
    return {{low, 1.0f - high_weight}, {std::min(low + 1, n - 1), high_weight}};
  }
  // Shrinking: each source pixel j spans [j, j + 1); the output pixel covers [begin, end) of them.
  const double begin = std::clamp((i + offset) / scale, 0.0, static_cast<double>(n));
  const double end = std::clamp((i + offset + 1) / scale, begin, static_cast<double>(n));
  std::vector<Tap> taps;
  double covered = 0;
  for (int j = static_cast<int>(std::floor(begin)); j < n && j < end; ++j) {
    const double overlap = std::min(end, j + 1.0) - std::max(begin, static_cast<double>(j));
    if (overlap <= 0) continue;
    taps.push_back({j, static_cast<float>(overlap)});
    covered += overlap;
  }
  if (taps.empty()) return {{std::min(static_cast<int>(begin), n - 1), 1.0f}};
  for (Tap& tap : taps) tap.weight = static_cast<float>(tap.weight / covered);
  return taps;
}

std::vector<std::vector<Tap>> axis_taps(int length, int offset, double scale, int n) {
  std::vector<std::vector<Tap>> taps(static_cast<std::size_t>(length));
  for (int i = 0; i < length; ++i) taps[static_cast<std::size_t>(i)] = taps_for(i, offset, scale, n);
  return taps;
}

}  // namespace

void resize_crop_planar(const DecodedImage& image, ImageSize size, std::span<uint8_t> out) {
  const double scale = std::max(static_cast<double>(size.height) / image.height,
                                static_cast<double>(size.width) / image.width);
  const int top = static_cast<int>(std::lround((image.height * scale - size.height) / 2));
  const int left = static_cast<int>(std::lround((image.width * scale - size.width) / 2));
  const auto rows = axis_taps(size.height, top, scale, image.height);
  const auto columns = axis_taps(size.width, left, scale, image.width);
  const auto channels = static_cast<std::size_t>(image.channels);
  const auto width = static_cast<std::size_t>(size.width);
  const auto plane = static_cast<std::size_t>(size.height) * width;
  const auto row_stride = static_cast<std::size_t>(image.width) * channels;
  // Along each source row first (only the rows some output row reads), then down the columns.
  std::vector<float> across(static_cast<std::size_t>(image.height) * width * channels, 0.0f);
  std::vector<bool> read(static_cast<std::size_t>(image.height), false);
  for (const auto& taps : rows)
    for (const Tap& tap : taps) read[static_cast<std::size_t>(tap.source)] = true;
  for (std::size_t y = 0; y < read.size(); ++y) {
    if (!read[y]) continue;
    const uint8_t* source = image.pixels.data() + y * row_stride;
    float* row = across.data() + y * width * channels;
    for (std::size_t x = 0; x < width; ++x)
      for (const Tap& tap : columns[x])
        for (std::size_t c = 0; c < channels; ++c)
          row[x * channels + c] += tap.weight * static_cast<float>(source[static_cast<std::size_t>(tap.source) * channels + c]);
  }
  for (std::size_t y = 0; y < rows.size(); ++y)
    for (std::size_t x = 0; x < width; ++x)
      for (std::size_t c = 0; c < channels; ++c) {
        float value = 0;
        for (const Tap& tap : rows[y]) value += tap.weight * across[(static_cast<std::size_t>(tap.source) * width + x) * channels + c];
        out[c * plane + y * width + x] = static_cast<uint8_t>(std::clamp(std::lround(value), 0L, 255L));
      }
}

}  // namespace ringtrain::io
