// Owns PNG decoding through libpng's classic API; see png_decode.h. libpng's simplified API was the first choice,
// but it treats 16-bit samples and gAMA 1.0 as linear light and converts them to sRGB: a 16-bit (128, 64, 192)
// came out (186, 136, 224), where PIL and torchvision give (128, 64, 192). libpng reports errors by longjmp, so the
// frames between each setjmp and the libpng calls hold no C++ object with a destructor.
#include "io/png_decode.h"

#include <fmt/format.h>
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstring>
#include <vector>

#include "common/error.h"

namespace ringtrain::io::detail {
namespace {

struct PngFailure {
  std::jmp_buf jump;
  char message[256] = {};
};

struct PngBytes {
  std::span<const uint8_t> data;
  std::size_t at = 0;
};

[[noreturn]] void png_fail(png_structp png, png_const_charp message) {
  auto* failure = static_cast<PngFailure*>(png_get_error_ptr(png));
  std::snprintf(failure->message, sizeof failure->message, "%s", message);
  std::longjmp(failure->jump, 1);
}

void png_ignore_warning(png_structp, png_const_charp) {}  // PIL reads past them too

void png_read_bytes(png_structp png, png_bytep out, png_size_t length) {
  auto* bytes = static_cast<PngBytes*>(png_get_io_ptr(png));
  if (length > bytes->data.size() - bytes->at) png_error(png, "the file ends inside the image (truncated)");
  std::memcpy(out, bytes->data.data() + bytes->at, length);
  bytes->at += length;
}

// The libpng state of one decoding, freed whatever happens.
struct PngReader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngReader() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

struct PngShape {
  png_uint_32 width = 0, height = 0;
  int channels = 0;
};

// Reads the header and sets the transforms to 8-bit gray, gray + alpha, RGB or RGBA; false on a libpng error.
bool read_header(PngReader& reader, PngBytes& bytes, PngFailure& failure, PngShape& shape) {
  if (setjmp(failure.jump)) return false;
  png_set_read_fn(reader.png, &bytes, png_read_bytes);
  png_read_info(reader.png, reader.info);
  const png_byte type = png_get_color_type(reader.png, reader.info);
  png_set_strip_16(reader.png);
  png_set_packing(reader.png);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(reader.png);
  if (type == PNG_COLOR_TYPE_GRAY) png_set_expand_gray_1_2_4_to_8(reader.png);
  if (png_get_valid(reader.png, reader.info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(reader.png);
  png_set_interlace_handling(reader.png);
  png_read_update_info(reader.png, reader.info);
  shape = {png_get_image_width(reader.png, reader.info), png_get_image_height(reader.png, reader.info),
           png_get_channels(reader.png, reader.info)};
  return true;
}

bool read_rows(PngReader& reader, PngFailure& failure, png_bytepp rows) {
  if (setjmp(failure.jump)) return false;
  png_read_image(reader.png, rows);
  png_read_end(reader.png, nullptr);
  return true;
}

}  // namespace

DecodedImage decode_png_bytes(const std::filesystem::path& file, std::span<const uint8_t> data) {
  const auto refuse = [&](const char* why) {
    return DataError(fmt::format("cannot decode {}: {}", named_image("PNG", file), why));
  };
  PngFailure failure;
  PngReader reader;
  reader.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &failure, png_fail, png_ignore_warning);
  if (reader.png) reader.info = png_create_info_struct(reader.png);
  if (!reader.png || !reader.info) throw refuse("libpng could not start (out of memory)");
  // The decompressed size, not only the pixels, bounds what a small hostile file may make libpng allocate.
  png_set_user_limits(reader.png, 1u << 20, 1u << 20);
  PngBytes bytes{data, 0};
  PngShape shape;
  if (!read_header(reader, bytes, failure, shape)) throw refuse(failure.message);
  refuse_oversized_image(file, "PNG", shape.width, shape.height, shape.channels);
  DecodedImage out{static_cast<int>(shape.width), static_cast<int>(shape.height), shape.channels, {}};
  const std::size_t row_bytes = std::size_t{shape.width} * static_cast<std::size_t>(shape.channels);
  out.pixels.resize(row_bytes * shape.height);
  std::vector<png_bytep> rows(shape.height);
  for (std::size_t y = 0; y < rows.size(); ++y) rows[y] = out.pixels.data() + y * row_bytes;
  if (!read_rows(reader, failure, rows.data())) throw refuse(failure.message);
  return out;
}

}  // namespace ringtrain::io::detail
