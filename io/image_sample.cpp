// Owns image_to_sample; see image_sample.h.
#include "io/image_sample.h"

#include "io/image_decode.h"
#include "io/image_resize.h"

namespace ringtrain::io {

void image_to_sample(const std::filesystem::path& file, const SampleShape& shape, std::span<uint8_t> out) {
  resize_crop_planar(convert_channels(decode_image(file), shape.channels), {shape.height, shape.width}, out);
}

}  // namespace ringtrain::io
