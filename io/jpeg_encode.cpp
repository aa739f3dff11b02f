// Owns the libjpeg compression calls and the layout they write; see jpeg_encode.h. libjpeg's memory destination
// allocates the output with malloc, freed here once copied, also when libjpeg fails.
#include "io/jpeg_encode.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "common/error.h"
#include "io/jpeg_library.h"
#include "io/restart_region.h"

namespace ringtrain::io {

namespace {

struct Compressed {
  unsigned char* data = nullptr;
  unsigned long size = 0;
};

// Optimised Huffman tables (smaller files, no pixel changed) and the restart interval, set before compression starts.
void set_region_layout(jpeg_compress_struct& info) {
  int most_across = 1, most_down = 1;  // the compressor sets max_h_samp_factor only once compression starts
  for (int c = 0; c < info.num_components; ++c) {
    most_across = std::max(most_across, info.comp_info[c].h_samp_factor);
    most_down = std::max(most_down, info.comp_info[c].v_samp_factor);
  }
  const int mcu_width = mcu_size(info.num_components, most_across, most_down).width;
  const int width = static_cast<int>(info.image_width);
  info.restart_interval = static_cast<unsigned>(restart_interval_for((width + mcu_width - 1) / mcu_width, mcu_width));
  info.optimize_coding = TRUE;
}

bool run_encode(const DecodedImage& image, int quality, bool region_layout, Compressed& out,
                detail::JpegFailure& failure) {
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
  if (region_layout) set_region_layout(info);
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

// About the coefficient arrays jpeg_read_coefficients allocates (each component's blocks, which the header read
// counts; libjpeg rounds each array up to whole MCUs, a few percent more).
uint64_t coefficient_bytes(const jpeg_decompress_struct& info) {
  uint64_t blocks = 0;
  for (int c = 0; c < info.num_components; ++c)
    blocks += uint64_t{info.comp_info[c].width_in_blocks} * uint64_t{info.comp_info[c].height_in_blocks};
  return blocks * DCTSIZE2 * sizeof(JCOEF);
}

// Only YCbCr and gray are rewritten: libjpeg marks the CMYK JPEGs it writes with Adobe's marker whether the source
// had one or not, which means inverted inks to io/jpeg_window; RGB JPEGs are rare enough to keep as they are.
// Nor are samplings io/restart_region reads whole-stream: they would pay for the markers without using them, nor
// photos whose coefficients exceed the bound the rewrite holds them within.
bool is_rewritable(const jpeg_decompress_struct& info, uint64_t max_coefficient_bytes) {
  const bool space = (info.jpeg_color_space == JCS_YCbCr && info.num_components == 3) ||
                     (info.jpeg_color_space == JCS_GRAYSCALE && info.num_components == 1);
  return space && is_read_by_region(info.num_components, info.max_h_samp_factor, info.max_v_samp_factor) &&
         static_cast<uint64_t>(info.image_width) * info.image_height <= kMaxImagePixels &&
         coefficient_bytes(info) <= max_coefficient_bytes;
}

// A progressive JPEG whose scans leave some coefficients unrefined (coef_bits not 0) is decoded with libjpeg's block
// smoothing, which a baseline copy of those coefficients would not get: its pixels would change.
bool is_fully_refined(const jpeg_decompress_struct& info) {
  if (!info.progressive_mode) return true;
  for (int c = 0; c < info.num_components; ++c)
    for (int k = 0; k < DCTSIZE2; ++k)
      if (info.coef_bits[c][k] != 0) return false;
  return true;
}

// false: libjpeg failed (failure says why). `rewritten` false: the JPEG is one left as it is.
bool run_rewrite(std::span<const uint8_t> jpeg, uint64_t max_coefficient_bytes, Compressed& out, bool& rewritten,
                 detail::JpegFailure& failure) {
  jpeg_decompress_struct source{};
  jpeg_compress_struct target{};
  detail::route_jpeg_errors(source.err, failure);
  detail::route_jpeg_errors(target.err, failure);
  if (setjmp(failure.jump)) {
    jpeg_destroy_compress(&target);
    jpeg_destroy_decompress(&source);
    return false;
  }
  jpeg_create_decompress(&source);
  jpeg_create_compress(&target);
  jpeg_mem_src(&source, jpeg.data(), static_cast<unsigned long>(jpeg.size()));
  jpeg_read_header(&source, TRUE);
  rewritten = is_rewritable(source, max_coefficient_bytes);
  jvirt_barray_ptr* coefficients = rewritten ? jpeg_read_coefficients(&source) : nullptr;
  rewritten = rewritten && is_fully_refined(source);
  if (rewritten) {
    jpeg_mem_dest(&target, &out.data, &out.size);
    jpeg_copy_critical_parameters(&source, &target);
    set_region_layout(target);
    jpeg_write_coefficients(&target, coefficients);
    jpeg_finish_compress(&target);
    jpeg_finish_decompress(&source);
  }
  jpeg_destroy_compress(&target);
  jpeg_destroy_decompress(&source);
  return true;
}

}  // namespace

int restart_interval_for(int mcus_per_row, int mcu_width) {
  if (mcu_width >= 16) return 1;
  for (int interval = 4; interval > 1; --interval)
    if (mcus_per_row % interval == 0) return interval;
  return 1;
}

std::optional<std::vector<uint8_t>> in_region_layout(std::span<const uint8_t> jpeg, uint64_t max_coefficient_bytes) {
  detail::JpegFailure failure{};
  Compressed compressed;
  bool rewritten = false;
  const bool ran = run_rewrite(jpeg, max_coefficient_bytes, compressed, rewritten, failure);
  std::optional<std::vector<uint8_t>> bytes;
  if (ran && rewritten) bytes.emplace(compressed.data, compressed.data + compressed.size);
  std::free(compressed.data);
  return bytes;
}

std::vector<uint8_t> encode_jpeg(const DecodedImage& image, int quality, bool region_layout) {
  if (image.channels != 1 && image.channels != 3)
    throw DataError(fmt::format("a JPEG holds 1 or 3 channels, not {}", image.channels));
  detail::JpegFailure failure{};
  Compressed compressed;
  const bool encoded = run_encode(image, quality, region_layout, compressed, failure);
  std::vector<uint8_t> bytes(compressed.data, compressed.data + (encoded ? compressed.size : 0));
  std::free(compressed.data);
  if (!encoded) throw DataError(fmt::format("JPEG encoding failed: {}", failure.message));
  return bytes;
}

}  // namespace ringtrain::io
