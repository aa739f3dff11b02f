// Owns the definition of a crop-and-resize of a decoded image: a window of an interleaved uint8 image
// (rows x columns x channels, as JPEG decoders hand it over) sampled bilinearly at pixel centres onto a planar
// uint8 sample (C x H x W, as the network reads it), mirrored when asked, from a box average of the image where the
// window is at least twice the sample's size. The CPU twin and the CUDA kernel
// evaluate these functions alone, in integer arithmetic after one correctly rounded fused multiply-add per
// axis, so a device-made sample has the bits of the host-made one from the same decoded pixels.
#pragma once
#include <cmath>
#include <cstdint>

#include "common/shrink_factor.h"
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

// The box average a crop shrinking by 2 or more is resampled from: k x k blocks of the image averaged, k the
// power-of-two shrink the CPU path's scaled IDCT takes for the same window (common/shrink_factor.h: 2, 4 or 8); 1
// (the image itself) where the window is under twice the sample's size. Two bilinear taps per axis skip source
// pixels once a window is more than twice its sample, and fine detail aliases; the scaled IDCT, and torchvision's
// antialiased resize, average it instead.
inline int box_factor(const CropWindow& window, int rows, int columns, int height, int width) {
  const int k = power_of_two_shrink(window.height, window.width, height, width);
  return rows < k || columns < k ? 1 : k;
}

// The box-averaged image has whole blocks only: rows / k x columns / k pixels.
RT_HOST_DEVICE inline int boxes(int extent, int k) { return extent / k; }

// The window in the box-averaged image's pixels.
RT_HOST_DEVICE inline CropWindow box_window(const CropWindow& window, int k) {
  const auto scale = static_cast<float>(k);
  return {window.top / scale, window.left / scale, window.height / scale, window.width / scale};
}

// One channel of pixel (row, column) of the box-averaged image: the mean of the k x k block at (row k, column k),
// rounded to nearest.
RT_HOST_DEVICE inline uint8_t box_value(const InterleavedImage& image, int k, int row, int column, int channel) {
  int sum = 0;
  for (int dy = 0; dy < k; ++dy) {
    const uint8_t* line = image.pixels + static_cast<int64_t>(row * k + dy) * image.row_bytes +
                          static_cast<int64_t>(column) * k * image.channels + channel;
    for (int dx = 0; dx < k; ++dx) sum += line[dx * image.channels];
  }
  const int area = k * k;
  return static_cast<uint8_t>((sum + area / 2) / area);
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

// One channel of one output pixel from the taps into the k x k box average of `image` (box_factor), each tap's
// value the block's mean: what resampled_value gives on the averaged image made whole, without making it.
RT_HOST_DEVICE inline uint8_t box_resampled_value(const InterleavedImage& image, int k, const AxisTap& row,
                                                  const AxisTap& column, int channel) {
  return blend(box_value(image, k, row.first, column.first, channel), box_value(image, k, row.first, column.second, channel),
               box_value(image, k, row.second, column.first, channel),
               box_value(image, k, row.second, column.second, channel), row.weight, column.weight);
}

}  // namespace ringtrain::kernels
