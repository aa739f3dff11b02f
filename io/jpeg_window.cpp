// Owns the windowed, scaled JPEG decode; see jpeg_window.h. Everything between setjmp and the last libjpeg call
// runs in one function whose frame holds no C++ object with a destructor.
#include "io/jpeg_window.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "common/error.h"
#include "common/host_memory.h"
#include "common/shrink_factor.h"
#include "io/image_decode.h"
#include "io/jpeg_library.h"
#include "io/restart_region.h"

namespace ringtrain::io {

namespace {

using detail::JpegFailure;

enum class Outcome { decoded, failed, too_large, wrong_size };

struct Span {
  int first = 0, end = 0;  // [first, end)
};

// The positions along one axis of `extent` scaled pixels that bilinear taps of a window reach, one either side for
// the second tap and rounding.
Span needed_span(float start, float length, int extent) {
  const int first = std::clamp(static_cast<int>(std::floor(start)) - 1, 0, extent - 1);
  const int end = std::clamp(static_cast<int>(std::ceil(start + length)) + 1, first + 1, extent);
  return {first, end};
}

J_COLOR_SPACE output_space(bool cmyk, int channels) {
  if (cmyk) return JCS_CMYK;  // libjpeg converts CMYK to nothing else: io/jpeg_library.h does
  return channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
}

// CMYK rows, as decoded, to `channels` channels, packed: row r moves from r * columns * 4 to r * columns * channels,
// never past bytes still to be read.
void convert_cmyk_rows(DecodedWindow& out, int channels, bool inverted) {
  const auto columns = static_cast<std::size_t>(out.columns);
  for (std::size_t r = 0; r < static_cast<std::size_t>(out.rows); ++r) {
    JSAMPROW row = out.pixels.data() + r * columns * 4;
    detail::cmyk_to_rgb(row, static_cast<JDIMENSION>(columns), inverted);
    if (channels == 1) detail::rgb_to_gray(row, static_cast<JDIMENSION>(columns));
    std::memmove(out.pixels.data() + r * columns * static_cast<std::size_t>(channels), row,
                 columns * static_cast<std::size_t>(channels));
  }
  out.pixels.resize(static_cast<std::size_t>(out.rows) * columns * static_cast<std::size_t>(channels));
}

// Reads rows [first, end) of the scaled output into out.pixels, a batch of rows per call into libjpeg.
void read_rows(jpeg_decompress_struct& info, int first, int end, DecodedWindow& out) {
  if (first > 0) jpeg_skip_scanlines(&info, static_cast<JDIMENSION>(first));
  const auto stride = static_cast<std::size_t>(info.output_width) * static_cast<std::size_t>(info.output_components);
  JSAMPROW rows[16];
  while (static_cast<int>(info.output_scanline) < end) {
    const int at = static_cast<int>(info.output_scanline);
    const int count = std::min(16, end - at);
    for (int i = 0; i < count; ++i) rows[i] = out.pixels.data() + static_cast<std::size_t>(at - first + i) * stride;
    jpeg_read_scanlines(&info, rows, static_cast<JDIMENSION>(count));
  }
}

Outcome run_decode(std::span<const uint8_t> bytes, const JpegWindowRequest& request, DecodedWindow& out,
                   JpegFailure& failure, JpegHeader& seen, const JpegHeader& expected) {
  jpeg_decompress_struct info{};
  detail::route_jpeg_errors(info.err, failure);
  if (setjmp(failure.jump)) {
    jpeg_destroy_decompress(&info);
    return Outcome::failed;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&info, TRUE);
  seen = {static_cast<int>(info.image_height), static_cast<int>(info.image_width), info.num_components,
          info.progressive_mode != 0};
  const bool too_large = static_cast<uint64_t>(info.image_width) * info.image_height > kMaxImagePixels;
  const bool wrong_size = expected.height > 0 && (expected.height != seen.height || expected.width != seen.width);
  if (too_large || wrong_size) {
    jpeg_destroy_decompress(&info);
    return too_large ? Outcome::too_large : Outcome::wrong_size;
  }
  const bool cmyk = detail::is_cmyk(info.jpeg_color_space);
  info.out_color_space = output_space(cmyk, request.channels);
  const PixelWindow& w = request.window;
  out.scale_eighths = jpeg_scale_eighths(w.height, w.width, request.out_height, request.out_width);
  info.scale_num = static_cast<unsigned>(out.scale_eighths);
  info.scale_denom = 8;
  jpeg_start_decompress(&info);
  // The DCT scale itself, m/8: libjpeg rounds the scaled image's size up (ceil), so output/image is a little more
  // than m/8 and would move the window by up to a quarter of an output pixel.
  const float sy = static_cast<float>(out.scale_eighths) / 8.0f, sx = sy;
  Span rows{0, static_cast<int>(info.output_height)}, columns{0, static_cast<int>(info.output_width)};
  if (!request.whole_image) {
    rows = needed_span(w.top * sy, w.height * sy, rows.end);
    columns = needed_span(w.left * sx, w.width * sx, columns.end);
    // libjpeg upsamples the chroma of a cropped row's first and last columns as if they were the image's edge: one
    // guard column either side keeps every column the taps read equal to the full decode's.
    columns = {std::max(columns.first - 1, 0), std::min(columns.end + 1, static_cast<int>(info.output_width))};
    auto offset = static_cast<JDIMENSION>(columns.first);
    auto width = static_cast<JDIMENSION>(columns.end - columns.first);
    jpeg_crop_scanline(&info, &offset, &width);  // widens to whole blocks
    columns = {static_cast<int>(offset), static_cast<int>(offset + width)};
  }
  out.rows = rows.end - rows.first;
  out.columns = columns.end - columns.first;
  out.pixels.resize(static_cast<std::size_t>(out.rows) * info.output_width * static_cast<std::size_t>(info.output_components));
  read_rows(info, rows.first, rows.end, out);
  if (request.whole_image)
    jpeg_finish_decompress(&info);  // reads to the end of the stream: a truncated tail is an error too
  else
    jpeg_abort_decompress(&info);
  out.channels = request.channels;
  out.window = {w.top * sy - static_cast<float>(rows.first), w.left * sx - static_cast<float>(columns.first),
                w.height * sy, w.width * sx};
  const bool inverted = info.saw_Adobe_marker != 0;
  jpeg_destroy_decompress(&info);
  if (cmyk) convert_cmyk_rows(out, request.channels, inverted);
  return Outcome::decoded;
}

}  // namespace

// Only 1/8, 2/8, 4/8 and 8/8: libjpeg-turbo has SIMD inverse DCTs for these alone, and its plain-C ones for the
// scales between (and the larger ones it then uses to bring subsampled chroma up to size) cost more than decoding at
// the next larger SIMD scale.
int jpeg_scale_eighths(float window_height, float window_width, int out_height, int out_width) {
  return 8 / power_of_two_shrink(window_height, window_width, out_height, out_width);
}

JpegHeader read_jpeg_header(std::span<const uint8_t> bytes) {
  JpegFailure failure{};
  JpegHeader header;
  jpeg_decompress_struct info{};
  detail::route_jpeg_errors(info.err, failure);
  if (setjmp(failure.jump)) {
    jpeg_destroy_decompress(&info);
    throw DataError(fmt::format("not a readable JPEG: {}", failure.message));
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&info, TRUE);
  header = {static_cast<int>(info.image_height), static_cast<int>(info.image_width), info.num_components,
            info.progressive_mode != 0};
  jpeg_destroy_decompress(&info);
  return header;
}

namespace {

// The JPEG of the region a window needs, when the bytes are in the region layout (io/restart_region.h's region_jpeg).
// Two pixels at the decoded scale beyond the window: the one its bilinear taps read, and one whose chroma upsampling
// would see the region's edge instead of the image's next row or column.
std::optional<PixelRegion> scaled_region_jpeg(std::span<const uint8_t> bytes, const JpegWindowRequest& request,
                                              const JpegHeader& expected, std::vector<uint8_t>& out) {
  if (request.whole_image) return std::nullopt;
  const PixelWindow& w = request.window;
  const float guard = 2.0f * 8.0f / static_cast<float>(jpeg_scale_eighths(w.height, w.width, request.out_height,
                                                                             request.out_width));
  return region_jpeg(bytes, w, guard, expected, out);
}

}  // namespace

void decode_jpeg_window(std::span<const uint8_t> bytes, const JpegWindowRequest& request, DecodedWindow& out,
                        JpegHeader expected) {
  JpegFailure failure{};
  JpegHeader seen;
  thread_local std::vector<uint8_t> region_bytes;
  Outcome outcome;
  if (const std::optional<PixelRegion> region = scaled_region_jpeg(bytes, request, expected, region_bytes)) {
    JpegWindowRequest within = request;
    within.window = window_in_region(request.window, *region);
    expected = {region->height, region->width, 0, false};
    outcome = run_decode(region_bytes, within, out, failure, seen, expected);
    out.from_region = true;
  } else {
    outcome = run_decode(bytes, request, out, failure, seen, expected);
    out.from_region = false;
  }
  switch (outcome) {
    case Outcome::decoded: return;
    case Outcome::failed: throw DataError(fmt::format("JPEG does not decode: {}", failure.message));
    case Outcome::too_large:
      throw DataError(fmt::format("JPEG is {}x{} pixels ({} decoded), over the {} pixels (2^28, e.g. 16384x16384) "
                                  "ringtrain decodes; shrink it first (e.g. `convert IN -resize 4096x4096 OUT`)",
                                  seen.width, seen.height,
                                  byte_size_text(static_cast<double>(seen.width) * seen.height * 3), kMaxImagePixels));
    case Outcome::wrong_size:
      throw DataError(fmt::format("JPEG is {}x{} pixels where {} {}x{}", seen.width, seen.height,
                                  out.from_region ? "the region cut from it for the crop is" : "its shard records",
                                  expected.width, expected.height));
  }
}

}  // namespace ringtrain::io
