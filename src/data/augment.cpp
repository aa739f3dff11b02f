// Owns the augmentation arithmetic: the crop choices, drawn from the sample's KeyedRandom (data/keyed_random.h),
// and a planar bilinear crop-and-resize.
#include "data/augment.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>


namespace ringtrain::train {

namespace {

struct Region {
  int top = 0, left = 0, height = 0, width = 0;
};

constexpr double kMinRatio = 3.0 / 4.0, kMaxRatio = 4.0 / 3.0;

// torchvision's RandomResizedCrop choice: area in [min_area, 1], aspect ratio log-uniform in [3/4, 4/3],
// ten tries to fit; nullopt when none fits.
std::optional<Region> try_resized_crop(KeyedRandom& random, int image_height, int image_width, float min_area) {
  const double area = static_cast<double>(image_height) * image_width;
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (min_area + (1.0 - min_area) * random.uniform());
    const double ratio = std::exp(std::log(kMinRatio) + (std::log(kMaxRatio) - std::log(kMinRatio)) * random.uniform());
    const int width = static_cast<int>(std::lround(std::sqrt(target * ratio)));
    const int height = static_cast<int>(std::lround(std::sqrt(target / ratio)));
    if (width >= 1 && height >= 1 && width <= image_width && height <= image_height)
      return Region{random.integer(image_height - height + 1), random.integer(image_width - width + 1), height, width};
  }
  return std::nullopt;
}

// A stored sample's crop: when no try fits, the whole sample.
Region resized_crop_region(KeyedRandom& random, const io::SampleShape& shape, float min_area) {
  return try_resized_crop(random, shape.height, shape.width, min_area).value_or(Region{0, 0, shape.height, shape.width});
}

// torchvision's fallback for a photo: the centre crop of the whole image, its aspect ratio clamped to [3/4, 4/3].
Region centre_fallback(int height, int width) {
  const double ratio = static_cast<double>(width) / height;
  int h = height, w = width;
  if (ratio < kMinRatio) h = static_cast<int>(std::lround(w / kMinRatio));
  if (ratio > kMaxRatio) w = static_cast<int>(std::lround(h * kMaxRatio));
  return {(height - h) / 2, (width - w) / 2, h, w};
}

// Bilinear at pixel centres from `region` of each plane of `in` to the full plane of `out`, mirrored if `flip`.
void crop_resize(const Region& region, bool flip, const io::SampleShape& shape, const uint8_t* in, uint8_t* out) {
  const double sy = static_cast<double>(region.height) / shape.height, sx = static_cast<double>(region.width) / shape.width;
  const auto plane = static_cast<std::size_t>(shape.height) * static_cast<std::size_t>(shape.width);
  for (int y = 0; y < shape.height; ++y) {
    const double fy = std::clamp((y + 0.5) * sy - 0.5, 0.0, region.height - 1.0);
    const int y0 = static_cast<int>(fy), y1 = std::min(y0 + 1, region.height - 1);
    const auto wy = static_cast<float>(fy - y0);
    for (int x = 0; x < shape.width; ++x) {
      const double fx = std::clamp(((flip ? shape.width - 1 - x : x) + 0.5) * sx - 0.5, 0.0, region.width - 1.0);
      const int x0 = static_cast<int>(fx), x1 = std::min(x0 + 1, region.width - 1);
      const auto wx = static_cast<float>(fx - x0);
      const auto at = [&](std::size_t c, int row, int col) {
        return static_cast<float>(in[c * plane + static_cast<std::size_t>(region.top + row) * static_cast<std::size_t>(shape.width) +
                                     static_cast<std::size_t>(region.left + col)]);
      };
      for (std::size_t c = 0; c < static_cast<std::size_t>(shape.channels); ++c) {
        const float upper = at(c, y0, x0) + (at(c, y0, x1) - at(c, y0, x0)) * wx;
        const float lower = at(c, y1, x0) + (at(c, y1, x1) - at(c, y1, x0)) * wx;
        out[c * plane + static_cast<std::size_t>(y) * static_cast<std::size_t>(shape.width) + static_cast<std::size_t>(x)] =
            static_cast<uint8_t>(std::lround(upper + (lower - upper) * wy));
      }
    }
  }
}

// The image shifted by (dy, dx) in [-pad, pad] with zeros where it leaves the frame, mirrored if `flip`:
// the same as cropping a zero-padded image at (pad + dy, pad + dx). Row by row: the in-frame columns
// x in [first, last) are one contiguous (or one reversed) run of the source row.
void pad_crop(int dy, int dx, bool flip, const io::SampleShape& shape, const uint8_t* in, uint8_t* out) {
  const int width = shape.width;
  const int first = std::clamp(flip ? dx : -dx, 0, width), last = std::clamp(flip ? width + dx : width - dx, first, width);
  for (int c = 0; c < shape.channels; ++c)
    for (int y = 0; y < shape.height; ++y) {
      uint8_t* row = out + (static_cast<std::size_t>(c) * static_cast<std::size_t>(shape.height) + static_cast<std::size_t>(y)) * static_cast<std::size_t>(width);
      const int sy = y + dy;
      std::memset(row, 0, static_cast<std::size_t>(width));
      if (sy < 0 || sy >= shape.height) continue;
      const uint8_t* source = in + (static_cast<std::size_t>(c) * static_cast<std::size_t>(shape.height) + static_cast<std::size_t>(sy)) * static_cast<std::size_t>(width);
      if (!flip) {
        std::memcpy(row + first, source + first + dx, static_cast<std::size_t>(last - first));
        continue;
      }
      for (int x = first; x < last; ++x) row[x] = source[width - 1 - x + dx];
    }
}

}  // namespace

void augment_sample(const AugmentSpec& spec, const SampleKey& key, const io::SampleShape& shape,
                    std::span<const uint8_t> in, std::span<uint8_t> out) {
  if (spec.kind == AugmentKind::none) {
    std::memcpy(out.data(), in.data(), in.size());
    return;
  }
  KeyedRandom random(key);
  const bool flip = random.uniform() < 0.5;
  if (spec.kind == AugmentKind::pad_crop_flip) {
    const int dy = random.integer(2 * spec.pad + 1) - spec.pad, dx = random.integer(2 * spec.pad + 1) - spec.pad;
    pad_crop(dy, dx, flip, shape, in.data(), out.data());
    return;
  }
  crop_resize(resized_crop_region(random, shape, spec.min_area), flip, shape, in.data(), out.data());
}

PhotoCrop random_photo_crop(const AugmentSpec& spec, const SampleKey& key, int height, int width) {
  KeyedRandom random(key);
  const bool flip = random.uniform() < 0.5;
  const Region r = try_resized_crop(random, height, width, spec.min_area).value_or(centre_fallback(height, width));
  return {{static_cast<float>(r.top), static_cast<float>(r.left), static_cast<float>(r.height), static_cast<float>(r.width)},
          flip};
}

kernels::CropWindow centre_photo_crop(int height, int width, int resize, int out_height, int out_width) {
  const double scale = static_cast<double>(std::min(height, width)) / resize;  // photo pixels per resized pixel
  const double crop_height = std::min(out_height * scale, static_cast<double>(height));
  const double crop_width = std::min(out_width * scale, static_cast<double>(width));
  return {static_cast<float>((height - crop_height) / 2), static_cast<float>((width - crop_width) / 2),
          static_cast<float>(crop_height), static_cast<float>(crop_width)};
}

}  // namespace ringtrain::train
