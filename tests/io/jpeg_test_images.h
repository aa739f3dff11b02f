// Owns the JPEGs the io/ tests decode: photo-like pixels (smooth fields, edges, texture: not noise, which JPEG
// destroys) encoded by libjpeg as baseline, progressive, gray or CMYK, so a test knows every image's true content.
#pragma once
#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <jpeglib.h>

namespace ringtrain::io::testing {

struct TestPixels {
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> values;  // interleaved
};

inline TestPixels photo_like(int height, int width, int channels, int seed) {
  TestPixels p{height, width, channels, std::vector<uint8_t>(static_cast<std::size_t>(height * width * channels))};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c) {
        const double field = 110 + 60 * std::sin((x + 7 * seed) / (17.0 + 5 * c)) * std::cos((y - 3 * seed) / 23.0);
        const double edge = ((x / 40 + y / 30 + seed) % 3) * 25.0;
        const double texture = 12 * std::sin(x * 0.9 + y * 0.4 + c);
        p.values[static_cast<std::size_t>((y * width + x) * channels + c)] =
            static_cast<uint8_t>(std::clamp(field + edge + texture, 0.0, 255.0));
      }
  return p;
}

// progressive_unrefined: RGB only; its AC scans stop at half precision (Al = 1, never refined), so libjpeg decodes
// it with block smoothing.
enum class JpegKind { baseline, progressive, progressive_unrefined };

// The luma's sampling factors of a colour JPEG, the chroma's being 1 x 1: 2 x 2 is 4:2:0 (libjpeg's default), 2 x 1
// 4:2:2, 1 x 1 4:4:4.
struct LumaSampling {
  int across = 2, down = 2;
};

// libjpeg's compressor; `pixels.channels` 1 (gray), 3 (RGB) or 4 (written as CMYK, Adobe-inverted as Photoshop does).
// `restart_interval`: a restart marker every that many MCUs (0: none).
inline std::vector<uint8_t> encode_test_jpeg(const TestPixels& pixels, int quality, JpegKind kind = JpegKind::baseline,
                                             LumaSampling sampling = {}, unsigned restart_interval = 0) {
  jpeg_compress_struct info{};
  jpeg_error_mgr errors{};
  info.err = jpeg_std_error(&errors);
  jpeg_create_compress(&info);
  unsigned char* data = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&info, &data, &size);
  info.image_width = static_cast<JDIMENSION>(pixels.width);
  info.image_height = static_cast<JDIMENSION>(pixels.height);
  info.input_components = pixels.channels;
  info.in_color_space = pixels.channels == 1 ? JCS_GRAYSCALE : pixels.channels == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&info);
  if (pixels.channels == 4) info.write_Adobe_marker = TRUE;
  jpeg_set_quality(&info, quality, TRUE);
  if (pixels.channels == 3) {
    info.comp_info[0].h_samp_factor = sampling.across;
    info.comp_info[0].v_samp_factor = sampling.down;
  }
  if (kind == JpegKind::progressive) jpeg_simple_progression(&info);
  static const jpeg_scan_info unrefined[] = {
      {3, {0, 1, 2}, 0, 0, 0, 0}, {1, {0}, 1, 63, 0, 1}, {1, {1}, 1, 63, 0, 1}, {1, {2}, 1, 63, 0, 1}};
  info.restart_interval = restart_interval;
  if (kind == JpegKind::progressive_unrefined) {
    info.scan_info = unrefined;
    info.num_scans = 4;
  }
  jpeg_start_compress(&info, TRUE);
  const auto stride = static_cast<std::size_t>(pixels.width * pixels.channels);
  while (info.next_scanline < info.image_height) {
    auto* row = const_cast<JSAMPROW>(pixels.values.data() + info.next_scanline * stride);
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  std::vector<uint8_t> bytes(data, data + size);
  std::free(data);
  return bytes;
}

// The JPEG with the size in its frame header (SOF0/SOF2) replaced: a header that lies about the image.
inline std::vector<uint8_t> with_claimed_size(std::vector<uint8_t> jpeg, int height, int width) {
  for (std::size_t i = 2; i + 8 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && (jpeg[i + 1] == 0xC0 || jpeg[i + 1] == 0xC2)) {
      jpeg[i + 5] = static_cast<uint8_t>(height >> 8);
      jpeg[i + 6] = static_cast<uint8_t>(height & 0xff);
      jpeg[i + 7] = static_cast<uint8_t>(width >> 8);
      jpeg[i + 8] = static_cast<uint8_t>(width & 0xff);
      return jpeg;
    }
  throw std::logic_error("no frame header in the test JPEG");
}

}  // namespace ringtrain::io::testing
