// Owns the calls into libjpeg-turbo and libpng. JPEG errors (and warnings, which mean corrupt data) leave
// libjpeg through longjmp (its documented recovery), so the jmp_buf frame holds no C++ object with a
// destructor; PNG uses libpng's simplified API.
#include "io/image_decode.h"

#include <fmt/format.h>
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

#include "common/error.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

struct JpegFailure {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr info) {
  auto* failure = reinterpret_cast<JpegFailure*>(info->err);
  info->err->format_message(info, failure->message);
  std::longjmp(failure->jump, 1);
}

// A warning (level < 0: corrupt or truncated data that libjpeg would paper over with gray) ends the decoding
// there, as an error: such an image is refused anyway, and a truncated file claiming 65535 x 65535 pixels
// must not be decoded in full first. Trace messages (level >= 0) are not printed.
void jpeg_stop_at_warning(j_common_ptr info, int level) {
  if (level < 0) jpeg_fail(info);
}

// Pixels a header may claim before anything is allocated for them: a lying header (or an image no dataset
// needs at full size) is a clear refusal, not an allocation failure.
bool too_large(std::size_t width, std::size_t height, std::size_t channels) {
  // height * (channels * width) > limit, by division: sides up to 2^32 (PNG allows them) cannot overflow it
  return width > 0 && height > kMaxDecodedBytes / (channels * width);
}

std::string too_large_message(std::size_t width, std::size_t height, std::size_t channels) {
  return fmt::format("its {} x {} x {} pixels exceed the {} MiB a decoded image may take; downscale it first",
                     width, height, channels, kMaxDecodedBytes >> 20);
}

// Decodes into `out` (already sized by the header pass inside); returns false with `failure.message` set.
bool decode_jpeg_into(const std::vector<uint8_t>& data, DecodedImage& out, JpegFailure& failure) {
  jpeg_decompress_struct info{};
  info.err = jpeg_std_error(&failure.manager);
  failure.manager.error_exit = jpeg_fail;
  failure.manager.emit_message = jpeg_stop_at_warning;
  if (setjmp(failure.jump)) {
    jpeg_destroy_decompress(&info);
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, data.data(), static_cast<unsigned long>(data.size()));
  jpeg_read_header(&info, TRUE);
  if (info.num_components != 1) info.out_color_space = JCS_RGB;  // CMYK/YCCK too: libjpeg converts
  const std::size_t channels = info.num_components != 1 ? 3 : 1;
  if (too_large(info.image_width, info.image_height, channels)) {
    std::snprintf(failure.message, sizeof failure.message, "%s",
                  too_large_message(info.image_width, info.image_height, channels).c_str());
    jpeg_destroy_decompress(&info);
    return false;
  }
  jpeg_start_decompress(&info);
  out.width = static_cast<int>(info.output_width);
  out.height = static_cast<int>(info.output_height);
  out.channels = info.output_components;
  out.pixels.resize(static_cast<std::size_t>(out.width) * static_cast<std::size_t>(out.height) *
                    static_cast<std::size_t>(out.channels));
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = out.pixels.data() + static_cast<std::size_t>(info.output_scanline) * info.output_width *
                                           static_cast<std::size_t>(out.channels);
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return true;
}

DecodedImage decode_png(const fs::path& file, const std::vector<uint8_t>& data) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, data.data(), data.size()))
    throw DataError(fmt::format("cannot decode PNG '{}': {}", file.string(), image.message));
  const bool alpha = (image.format & PNG_FORMAT_FLAG_ALPHA) != 0;
  const bool color = (image.format & PNG_FORMAT_FLAG_COLOR) != 0;
  image.format = color ? (alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB) : (alpha ? PNG_FORMAT_GA : PNG_FORMAT_GRAY);
  const auto channels = static_cast<std::size_t>(PNG_IMAGE_SAMPLE_CHANNELS(image.format));
  if (too_large(image.width, image.height, channels)) {
    const std::string why = too_large_message(image.width, image.height, channels);
    png_image_free(&image);
    throw DataError(fmt::format("cannot decode PNG '{}': {}", file.string(), why));
  }
  DecodedImage out{static_cast<int>(image.width), static_cast<int>(image.height),
                   static_cast<int>(PNG_IMAGE_SAMPLE_CHANNELS(image.format)), {}};
  out.pixels.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, out.pixels.data(), 0, nullptr))
    throw DataError(fmt::format("cannot decode PNG '{}': {}", file.string(), image.message));
  if (out.channels == 2) out = convert_channels(std::move(out), 1);  // gray+alpha: alpha dropped
  return out;
}

}  // namespace

DecodedImage decode_image(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw DataError(fmt::format("cannot open image '{}'; check its permissions", file.string()));
  const std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() >= 8 && std::memcmp(data.data(), "\x89PNG\r\n\x1a\n", 8) == 0) return decode_png(file, data);
  if (data.size() >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) {
    DecodedImage out;
    JpegFailure failure{};
    if (!decode_jpeg_into(data, out, failure))
      throw DataError(fmt::format("cannot decode JPEG '{}': {}", file.string(), failure.message));
    return out;
  }
  throw DataError(fmt::format("'{}' is neither a JPEG nor a PNG file (by its first bytes)", file.string()));
}

DecodedImage convert_channels(DecodedImage image, int channels) {
  if (image.channels == channels) return image;
  const std::size_t pixels = static_cast<std::size_t>(image.width) * static_cast<std::size_t>(image.height);
  const auto from = static_cast<std::size_t>(image.channels), to = static_cast<std::size_t>(channels);
  std::vector<uint8_t> out(pixels * to);
  for (std::size_t p = 0; p < pixels; ++p) {
    const uint8_t* in = image.pixels.data() + p * from;
    const bool gray_in = from <= 2;
    const uint8_t r = in[0], g = gray_in ? in[0] : in[1], b = gray_in ? in[0] : in[2];
    uint8_t* dst = out.data() + p * to;
    if (to == 1) {
      dst[0] = gray_in ? in[0] : static_cast<uint8_t>((299 * r + 587 * g + 114 * b + 500) / 1000);
      continue;
    }
    dst[0] = r;
    dst[1] = g;
    dst[2] = b;
    if (to == 4) dst[3] = from == 4 ? in[3] : from == 2 ? in[1] : 255;
  }
  image.pixels = std::move(out);
  image.channels = channels;
  return image;
}

}  // namespace ringtrain::io
