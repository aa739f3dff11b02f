// Owns bringing a decoded image to a dataset's fixed size: scale so the shorter side fits, centre-crop the
// longer one, and store planar (C x H x W) as the shards do.
#pragma once
#include <cstdint>
#include <span>

#include "io/image_decode.h"

namespace ringtrain::io {

struct ImageSize {
  int height = 0, width = 0;
};

// Enlarging samples bilinearly at pixel centres (at scale 1 the pixels come through unchanged); shrinking averages
// the source area each output pixel covers. `out` holds
// image.channels x size.height x size.width values.
void resize_crop_planar(const DecodedImage& image, ImageSize size, std::span<uint8_t> out);

}  // namespace ringtrain::io
