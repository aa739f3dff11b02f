// Owns decoding whole image files: JPEG through libjpeg-turbo (its error handling in io/jpeg_library.h), PNG
// through io/png_decode.h.
// Headers are read before pixels: an image over kMaxImagePixels is refused before its memory is asked for.
#include "io/image_decode.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>

#include "common/error.h"
#include "common/host_memory.h"
#include "common/path_probe.h"
#include "io/jpeg_library.h"
#include "io/png_decode.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

using detail::JpegFailure;

enum class JpegResult { decoded, failed, too_large };

// Decodes into `out`, sized once the header is read and found within kMaxImagePixels (before libjpeg allocates
// anything of the image's size); `failure.message` says why when it fails. `gray`: one channel, the JPEG's own luma
// (libjpeg's JCS_GRAYSCALE, as the loader's windows and nvJPEG's Y plane), where it has one (not CMYK/YCCK).
JpegResult decode_jpeg_into(std::span<const uint8_t> data, bool gray, DecodedImage& out, JpegFailure& failure) {
  jpeg_decompress_struct info{};
  detail::route_jpeg_errors(info.err, failure);
  if (setjmp(failure.jump)) {
    jpeg_destroy_decompress(&info);
    return JpegResult::failed;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, data.data(), static_cast<unsigned long>(data.size()));
  jpeg_read_header(&info, TRUE);
  out.width = static_cast<int>(info.image_width);
  out.height = static_cast<int>(info.image_height);
  const bool cmyk = detail::is_cmyk(info.jpeg_color_space);
  if (static_cast<uint64_t>(info.image_width) * info.image_height > kMaxImagePixels) {
    jpeg_destroy_decompress(&info);
    return JpegResult::too_large;
  }
  // libjpeg converts YCbCr and gray to RGB itself, but not CMYK/YCCK ("Unsupported color conversion request").
  if (info.num_components != 1) info.out_color_space = cmyk ? JCS_CMYK : gray ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&info);
  out.channels = cmyk ? 3 : info.output_components;
  out.pixels.resize(static_cast<std::size_t>(info.output_width) * info.output_height *
                    static_cast<std::size_t>(out.channels));
  // A CMYK row is decoded into libjpeg's own buffer (freed with `info`, as longjmp needs) and converted from there.
  JSAMPARRAY cmyk_row = cmyk ? (*info.mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(&info), JPOOL_IMAGE,
                                                         info.output_width * 4, 1)
                             : nullptr;
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = out.pixels.data() + static_cast<std::size_t>(info.output_scanline) * info.output_width *
                                           static_cast<std::size_t>(out.channels);
    jpeg_read_scanlines(&info, cmyk ? cmyk_row : &row, 1);
    if (cmyk) {
      detail::cmyk_to_rgb(cmyk_row[0], info.output_width, info.saw_Adobe_marker != 0);
      std::memcpy(row, cmyk_row[0], static_cast<std::size_t>(info.output_width) * 3);
    }
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return JpegResult::decoded;
}

}  // namespace

std::string named_image(const char* kind, const fs::path& file) {
  return file.empty() ? std::string(kind) : fmt::format("{} '{}'", kind, file.string());
}

// Refused before anything of the image's size is allocated: a header may claim 65500x65500 (12 GiB of RGB).
void refuse_oversized_image(const fs::path& file, const char* kind, uint64_t width, uint64_t height, int channels) {
  if (width * height <= kMaxImagePixels) return;
  throw DataError(fmt::format("{} is {}x{} pixels ({} decoded), over the {} pixels (2^28, e.g. 16384x16384) "
                              "ringtrain decodes; shrink it first (e.g. `convert IN -resize 4096x4096 OUT`)",
                              named_image(kind, file), width, height,
                              byte_size_text(static_cast<double>(width) * static_cast<double>(height) * channels),
                              kMaxImagePixels));
}

// Read whole, so only a regular file of a bounded size: a FIFO would block, /dev/zero never end.
std::vector<uint8_t> read_image_file(const fs::path& file) {
  const PathProbe probe = probe_path(file);
  if (probe.kind != PathProbe::Kind::regular)
    throw DataError(fmt::format("image '{}' {}; an image is a regular .jpg/.jpeg/.png file", file.string(),
                                probe.describe()));
  if (probe.size > kMaxImageFileBytes)
    throw DataError(fmt::format("image '{}' is a file of {}, over the {} ringtrain reads as one image; shrink it first",
                                file.string(), byte_size_text(static_cast<double>(probe.size)),
                                byte_size_text(static_cast<double>(kMaxImageFileBytes))));
  std::ifstream in(file, std::ios::binary);
  if (!in) throw DataError(fmt::format("cannot open image '{}': {}; check its permissions", file.string(), unreadable_reason(file)));
  std::vector<uint8_t> data(static_cast<std::size_t>(probe.size));
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<std::size_t>(in.gcount()));  // a file that shrank meanwhile: decoding says "truncated"
  return data;
}

DecodedImage decode_image(const fs::path& file) { return decode_image_bytes(file, read_image_file(file)); }

DecodedImage decode_image_bytes(const fs::path& file, std::span<const uint8_t> data, int channels) {
  if (data.size() >= 8 && std::memcmp(data.data(), "\x89PNG\r\n\x1a\n", 8) == 0) {
    DecodedImage out = detail::decode_png_bytes(file, data);
    return out.channels == 2 ? convert_channels(std::move(out), 1) : out;  // gray + alpha: alpha dropped
  }
  if (is_jpeg(data)) {
    DecodedImage out;
    JpegFailure failure{};
    const JpegResult result = decode_jpeg_into(data, channels == 1, out, failure);
    if (result == JpegResult::too_large)
      refuse_oversized_image(file, "JPEG", static_cast<uint64_t>(out.width), static_cast<uint64_t>(out.height), 3);
    if (result != JpegResult::decoded)
      throw DataError(fmt::format("cannot decode {}: {}", named_image("JPEG", file), failure.message));
    return out;
  }
  throw DataError(fmt::format("{} is neither a JPEG nor a PNG file (by its first bytes)",
                              file.empty() ? std::string("the image") : fmt::format("'{}'", file.string())));
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
