// Owns the definition of a crop-and-resize of a decoded image: a window of an interleaved uint8 image
// (rows x columns x channels, as JPEG decoders hand it over) sampled bilinearly at pixel centres onto a planar
// uint8 sample (C x H x W, as the network reads it), mirrored when asked. The CPU twin and the CUDA kernel
// evaluate these functions alone, in integer arithmetic after one correctly rounded fused multiply-add per
// axis, so a device-made sample has the bits of the host-made one from the same decoded pixels.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace ringtrain::kernels {

// A region of an image in continuous pixel coordinates (pixel i spans [i, i + 1)); may be fractional.
struct CropWindow {
  float top = 0, left = 0, height = 0, width = 0;
};

// Interleaved 8-bit pixels: `rows` x `columns` x `channels`, row after row `row_bytes` apart.
struct InterleavedImage {
  const uint8_t* pixels = nullptr;
  int rows = 0, columns = 0, channels = 0;
  int64_t row_bytes = 0;
};

// Where output position `i` of `length` reads along one axis: two neighbouring source positions and the
// weight of the second, in 1/256ths.
struct AxisTap {
  int first = 0, second = 0;
  int weight = 0;  // 0..256
};

inline constexpr int kTapOne = 256;

// The source coordinate of output centre i is start + (i + 0.5) * span / length - 0.5, clamped to the image.
RT_HOST_DEVICE inline AxisTap axis_tap(int i, int length, float start, float span, int extent) {
  const float step = span / static_cast<float>(length);
  float at = fmaf(static_cast<float>(i) + 0.5f, step, start - 0.5f);
  at = fminf(fmaxf(at, 0.0f), static_cast<float>(extent - 1));
  const int first = static_cast<int>(at);  // at >= 0: truncation is floor
  const int second = first + 1 < extent ? first + 1 : first;
  const int weight = static_cast<int>((at - static_cast<float>(first)) * kTapOne + 0.5f);
  return {first, second, weight};
}

// Two values already blended along one axis (exact, in 1/256ths) blended along the other with `weight` on the
// second, rounded to nearest: the one rounding of a resampled value.
RT_HOST_DEVICE inline uint8_t rounded_blend(int first, int second, int weight) {
  return static_cast<uint8_t>((first * (kTapOne - weight) + second * weight + (1 << 15)) >> 16);
}

// The bilinear blend of four pixels with row and column weights in 1/256ths, rounded to nearest.
RT_HOST_DEVICE inline uint8_t blend(int top_left, int top_right, int bottom_left, int bottom_right, int row_weight,
                                    int column_weight) {
  const int top = top_left * (kTapOne - column_weight) + top_right * column_weight;
  const int bottom = bottom_left * (kTapOne - column_weight) + bottom_right * column_weight;
  return rounded_blend(top, bottom, row_weight);
}

// Output column x reads mirrored column (width - 1 - x) of the window when flipped.
RT_HOST_DEVICE inline int source_column(int x, int width, bool flip) { return flip ? width - 1 - x : x; }

// One channel of one output pixel, from its two taps.
RT_HOST_DEVICE inline uint8_t resampled_value(const InterleavedImage& image, const AxisTap& row, const AxisTap& column,
                                              int channel) {
  const uint8_t* upper = image.pixels + static_cast<int64_t>(row.first) * image.row_bytes;
  const uint8_t* lower = image.pixels + static_cast<int64_t>(row.second) * image.row_bytes;
  const int a = column.first * image.channels + channel, b = column.second * image.channels + channel;
  return blend(upper[a], upper[b], lower[a], lower[b], row.weight, column.weight);
}

}  // namespace ringtrain::kernels
