// Owns the CPU twin's crop-and-resize loop; the arithmetic is kernels/crop_resample.h's.
#include "kernels/cpu/crop_resample.h"

#include <vector>

namespace ringtrain::kernels::cpu {

void crop_resample(const InterleavedImage& image, const CropWindow& window, bool flip, const SampleExtent& extent,
                   std::span<uint8_t> out) {
  thread_local std::vector<AxisTap> rows, columns;
  rows.resize(static_cast<std::size_t>(extent.height));
  columns.resize(static_cast<std::size_t>(extent.width));
  for (int y = 0; y < extent.height; ++y)
    rows[static_cast<std::size_t>(y)] = axis_tap(y, extent.height, window.top, window.height, image.rows);
  for (int x = 0; x < extent.width; ++x)
    columns[static_cast<std::size_t>(x)] =
        axis_tap(source_column(x, extent.width, flip), extent.width, window.left, window.width, image.columns);
  const auto plane = static_cast<std::size_t>(extent.height) * static_cast<std::size_t>(extent.width);
  for (int c = 0; c < extent.channels; ++c)
    for (int y = 0; y < extent.height; ++y) {
      uint8_t* row = out.data() + static_cast<std::size_t>(c) * plane +
                     static_cast<std::size_t>(y) * static_cast<std::size_t>(extent.width);
      for (int x = 0; x < extent.width; ++x)
        row[x] = resampled_value(image, rows[static_cast<std::size_t>(y)], columns[static_cast<std::size_t>(x)], c);
    }
}

}  // namespace ringtrain::kernels::cpu
