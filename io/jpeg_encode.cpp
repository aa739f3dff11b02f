// Owns the libjpeg compression calls; see jpeg_encode.h. libjpeg's memory destination allocates the output with
// malloc, freed here once copied, also when libjpeg fails.
#include "io/jpeg_encode.h"

#include <fmt/format.h>

#include <cstdlib>

#include "common/error.h"
#include "io/jpeg_library.h"

namespace ringtrain::io {

namespace {

struct Compressed {
  unsigned char* data = nullptr;
  unsigned long size = 0;
};

bool run_encode(const DecodedImage& image, int quality, Compressed& out, detail::JpegFailure& failure) {
  jpeg_compress_struct info{};
  detail::route_jpeg_errors(info.err, failure);
  if (setjmp(failure.jump)) {
    jpeg_destroy_compress(&info);
    return false;
  }
  jpeg_create_compress(&info);
  jpeg_mem_dest(&info, &out.data, &out.size);
  info.image_width = static_cast<JDIMENSION>(image.width);
  info.image_height = static_cast<JDIMENSION>(image.height);
  info.input_components = image.channels;
  info.in_color_space = image.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, quality, TRUE);
  jpeg_start_compress(&info, TRUE);
  const auto stride = static_cast<std::size_t>(image.width) * static_cast<std::size_t>(image.channels);
  while (info.next_scanline < info.image_height) {
    auto* row = const_cast<JSAMPROW>(image.pixels.data() + info.next_scanline * stride);
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  return true;
}

}  // namespace

std::vector<uint8_t> encode_jpeg(const DecodedImage& image, int quality) {
  if (image.channels != 1 && image.channels != 3)
    throw DataError(fmt::format("a JPEG holds 1 or 3 channels, not {}", image.channels));
  detail::JpegFailure failure{};
  Compressed compressed;
  const bool encoded = run_encode(image, quality, compressed, failure);
  std::vector<uint8_t> bytes(compressed.data, compressed.data + (encoded ? compressed.size : 0));
  std::free(compressed.data);
  if (!encoded) throw DataError(fmt::format("JPEG encoding failed: {}", failure.message));
  return bytes;
}

}  // namespace ringtrain::io
