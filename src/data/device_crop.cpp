// Owns device_crop; see device_crop.h.
#include "data/device_crop.h"

#include "io/restart_region.h"

namespace ringtrain::train {

kernels::JpegCrop device_crop(std::vector<uint8_t>& read, const PhotoCrop& crop, int height, int width,
                              const io::SampleShape& sample, bool regions, std::vector<uint8_t>& kept) {
  if (regions) {
    const io::PixelWindow window{crop.window.top, crop.window.left, crop.window.height, crop.window.width};
    const float guard = io::full_scale_guard(window, sample.height, sample.width);
    if (const auto region = io::region_jpeg(read, window, guard, {height, width, 0, false}, kept)) {
      // Exact in float: the region starts on whole pixels, at or before the window.
      kernels::CropWindow moved = crop.window;
      moved.top -= static_cast<float>(region->top);
      moved.left -= static_cast<float>(region->left);
      return {kept, moved, crop.flip, region->height, region->width};
    }
  }
  kept.swap(read);
  return {kept, crop.window, crop.flip, height, width};
}

}  // namespace ringtrain::train
