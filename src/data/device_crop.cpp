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
      const io::PixelWindow moved = io::window_in_region(window, *region);
      return {kept, {moved.top, moved.left, moved.height, moved.width}, crop.flip, region->height, region->width,
              /*from_region=*/true};
    }
  }
  kept.swap(read);
  return {kept, crop.window, crop.flip, height, width};
}

}  // namespace ringtrain::train
