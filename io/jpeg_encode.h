// Owns encoding interleaved 8-bit pixels as a baseline JPEG with libjpeg-turbo: what `prepare images --store jpeg`
// stores for a PNG source, or for a photo larger than --max-side once it is shrunk.
#pragma once
#include <cstdint>
#include <vector>

#include "io/image_decode.h"

namespace ringtrain::io {

// image.channels is 1 (gray) or 3 (RGB); quality 1..100 (libjpeg's scale). Throws DataError if libjpeg fails.
std::vector<uint8_t> encode_jpeg(const DecodedImage& image, int quality);

}  // namespace ringtrain::io
