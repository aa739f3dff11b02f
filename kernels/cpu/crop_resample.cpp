// Owns the CPU twin's crop-and-resize loop, separable and vertical first: for each output row the two source rows
// its tap reaches are blended along y over the columns the taps use (contiguous, vectorised), kept exact, then each
// output value blends two of those along x and is rounded once (kernels/cpu/resample_columns). blend()
// (kernels/crop_resample.h) forms the same four products in the other order; the sums are exact integers, so the
// bits are the same. The box average is made whole first, each of its pixels box_value(), so that the same loop
// resamples it.
#include "kernels/cpu/crop_resample.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/resample_columns.h"

namespace ringtrain::kernels::cpu {

namespace {

// Source rows `upper` and `lower` blended along y, values [first, end) of the interleaved row.
void blend_rows(const uint8_t* upper, const uint8_t* lower, int weight, int first, int end, uint16_t* out) {
  const int low = kTapOne - weight;
  for (int i = first; i < end; ++i) out[i] = static_cast<uint16_t>(upper[i] * low + lower[i] * weight);
}

}  // namespace

void crop_resample(const InterleavedImage& image, const CropWindow& window, bool flip, const SampleExtent& extent,
                   std::span<uint8_t> out) {
  thread_local std::vector<AxisTap> columns;
  thread_local std::vector<uint16_t> blended;
  thread_local ColumnResampler column_pass;
  const int channels = extent.channels;
  columns.resize(static_cast<std::size_t>(extent.width));
  int first = image.columns, last = 0;  // the source columns any tap reads
  for (int x = 0; x < extent.width; ++x) {
    AxisTap& tap = columns[static_cast<std::size_t>(x)];
    tap = axis_tap(source_column(x, extent.width, flip), extent.width, window.left, window.width, image.columns);
    first = std::min(first, tap.first);
    last = std::max(last, tap.second);
  }
  column_pass.plan(columns, channels);
  blended.resize(static_cast<std::size_t>(image.columns) * static_cast<std::size_t>(channels) +
                 ColumnResampler::kRowPadding);
  const auto width = static_cast<std::size_t>(extent.width);
  const auto plane = static_cast<std::size_t>(extent.height) * width;
  for (int y = 0; y < extent.height; ++y) {
    const AxisTap row = axis_tap(y, extent.height, window.top, window.height, image.rows);
    blend_rows(image.pixels + static_cast<int64_t>(row.first) * image.row_bytes,
               image.pixels + static_cast<int64_t>(row.second) * image.row_bytes, row.weight, first * channels,
               (last + 1) * channels, blended.data());
    column_pass.run(blended.data(), plane, out.data() + static_cast<std::size_t>(y) * width);
  }
}

void averaged_crop_resample(const InterleavedImage& image, const CropWindow& window, bool flip,
                            const SampleExtent& extent, std::span<uint8_t> out) {
  const int k = box_factor(window, image.rows, image.columns, extent.height, extent.width);
  if (k == 1) return crop_resample(image, window, flip, extent, out);
  thread_local std::vector<uint8_t> averaged;
  const int rows = boxes(image.rows, k), columns = boxes(image.columns, k), channels = image.channels;
  averaged.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(columns) * static_cast<std::size_t>(channels));
  uint8_t* pixel = averaged.data();
  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < columns; ++x)
      for (int c = 0; c < channels; ++c) *pixel++ = box_value(image, k, y, x, c);
  crop_resample({averaged.data(), rows, columns, channels, int64_t{columns} * channels}, box_window(window, k), flip,
                extent, out);
}

}  // namespace ringtrain::kernels::cpu
