// The region layout (io/jpeg_encode.h) and reading a window from its restart segments alone (io/restart_region.h):
// the rewrite keeps every pixel, the layout is found where it is and only there, and a window decoded from its
// region holds the same pixels as the whole-stream decode of the plain JPEG, at every scale, sampling and edge.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "common/error.h"
#include "io/image_decode.h"
#include "io/jpeg_encode.h"
#include "io/jpeg_window.h"
#include "io/restart_region.h"
#include "jpeg_test_images.h"

namespace ringtrain::io {
namespace {

using testing::encode_test_jpeg;
using testing::JpegKind;
using testing::LumaSampling;
using testing::photo_like;

struct TestImage {
  const char* name;
  std::vector<uint8_t> plain;
};

// Sizes that end in partial MCUs, and rows of MCUs that 4, 3, 2 or only 1 divides.
std::vector<TestImage> test_images() {
  return {
      {"4:2:0 203x317", encode_test_jpeg(photo_like(203, 317, 3, 11), 90)},  // 20 MCUs a row of 16 pixels: interval 1
      {"4:2:0 375x500", encode_test_jpeg(photo_like(375, 500, 3, 12), 85)},  // 32: 1
      {"4:2:2 150x333", encode_test_jpeg(photo_like(150, 333, 3, 13), 90, JpegKind::baseline, {2, 1})},  // 21: 1
      {"4:4:4 90x181", encode_test_jpeg(photo_like(90, 181, 3, 14), 90, JpegKind::baseline, {1, 1})},    // 23 of 8 pixels: 1
      {"4:1:1 77x250", encode_test_jpeg(photo_like(77, 250, 3, 18), 90, JpegKind::baseline, {4, 1})},    // 8 of 32: 1
      {"4:4:0 121x96", encode_test_jpeg(photo_like(121, 96, 3, 19), 90, JpegKind::baseline, {1, 2})},    // 12 of 8: 4
      {"1x4 140x72", encode_test_jpeg(photo_like(140, 72, 3, 20), 90, JpegKind::baseline, {1, 4})},      // 9 of 8: 3
      {"gray 99x131", encode_test_jpeg(photo_like(99, 131, 1, 15), 90)},                                  // 17 of 8: 1
      {"progressive 4:2:0 160x176", encode_test_jpeg(photo_like(160, 176, 3, 16), 90, JpegKind::progressive)},  // 11
      {"4:2:0 16x16", encode_test_jpeg(photo_like(16, 16, 3, 17), 90)},  // one MCU
  };
}

std::vector<uint8_t> rewritten(const std::vector<uint8_t>& plain) {
  const auto bytes = in_region_layout(plain);
  if (!bytes) throw std::runtime_error("not rewritten");
  return *bytes;
}

DecodedImage full_decode(const std::vector<uint8_t>& jpeg) { return decode_image_bytes("test.jpg", jpeg); }

TEST(RestartLayout, TheIntervalIsOneWideMcuOrTheLargestOfFourToOneNarrowOnesDividingTheRow) {
  EXPECT_EQ(restart_interval_for(32, 16), 1);
  EXPECT_EQ(restart_interval_for(8, 32), 1);
  EXPECT_EQ(restart_interval_for(32, 8), 4);
  EXPECT_EQ(restart_interval_for(21, 8), 3);
  EXPECT_EQ(restart_interval_for(10, 8), 2);
  EXPECT_EQ(restart_interval_for(23, 8), 1);
  EXPECT_EQ(restart_interval_for(1, 8), 1);
}

TEST(RestartLayout, TheRewriteKeepsEveryPixelAndIsFoundWhereItIsAlone) {
  for (const TestImage& image : test_images()) {
    SCOPED_TRACE(image.name);
    EXPECT_FALSE(find_restart_layout(image.plain)) << "libjpeg writes no restart markers by default";
    const std::vector<uint8_t> bytes = rewritten(image.plain);
    const DecodedImage before = full_decode(image.plain), after = full_decode(bytes);
    EXPECT_EQ(after.height, before.height);
    EXPECT_EQ(after.width, before.width);
    EXPECT_EQ(after.pixels, before.pixels);
    EXPECT_FALSE(read_jpeg_header(bytes).progressive);
    const auto layout = find_restart_layout(bytes);
    ASSERT_TRUE(layout);
    EXPECT_EQ(layout->height, before.height);
    EXPECT_EQ(layout->width, before.width);
    const int mcus_per_row = (layout->width + layout->mcu_width - 1) / layout->mcu_width;
    EXPECT_EQ(layout->segments_per_row * layout->segment_mcus, mcus_per_row);
    EXPECT_EQ(layout->segment_mcus, restart_interval_for(mcus_per_row, layout->mcu_width));
  }
}

TEST(RestartLayout, CmykIsKeptAsItIs) {
  testing::TestPixels cmyk{32, 48, 4, std::vector<uint8_t>(32 * 48 * 4, 200)};
  EXPECT_FALSE(in_region_layout(encode_test_jpeg(cmyk, 90)));
}

// 375x500 at 4:2:0: 63x47 luma blocks and 32x24 of each chroma, 128 bytes each. The bound keeps a prepare thread's
// memory within reach whatever the photo's size; one over it is kept as it is and read whole-stream.
TEST(RestartLayout, APhotoWhoseCoefficientsExceedTheBoundIsKeptAsItIs) {
  const auto jpeg = encode_test_jpeg(photo_like(375, 500, 3, 12), 85);
  constexpr uint64_t kCoefficientBytes = (63 * 47 + 2 * 32 * 24) * 128;
  EXPECT_TRUE(in_region_layout(jpeg, kCoefficientBytes));
  EXPECT_FALSE(in_region_layout(jpeg, kCoefficientBytes - 1));
  EXPECT_GT(kMaxRewriteCoefficientBytes, 100 * kCoefficientBytes) << "an ImageNet-sized photo is rewritten";
}

// Left as they are, for the whole decode that proves a stored JPEG to judge.
TEST(RestartLayout, BytesLibjpegCannotReadAreKeptAsTheyAre) {
  const std::vector<uint8_t> text{0xFF, 0xD8, 'n', 'o', 't', ' ', 'a', ' ', 'j', 'p', 'e', 'g'};
  EXPECT_FALSE(in_region_layout(text));
}

// A progressive JPEG whose AC scans stop at half precision: libjpeg smooths its blocks when decoding it, which a
// baseline copy would not get, so it is kept as it is.
TEST(RestartLayout, AProgressiveJpegItsScansLeaveUnrefinedIsKeptAsItIs) {
  const auto jpeg = encode_test_jpeg(photo_like(64, 64, 3, 23), 90, JpegKind::progressive_unrefined);
  EXPECT_TRUE(read_jpeg_header(jpeg).progressive);
  EXPECT_FALSE(in_region_layout(jpeg));
}

// 4x2 and 2x4 luma sampling: libjpeg-turbo's cropped decoding is not exact there itself, so such a JPEG is not
// rewritten, and is read whole-stream even where it has restart markers dividing its rows (here 10 MCUs, interval 2).
TEST(RestartLayout, SamplingsOfMoreThanFourLumaBlocksAreNotReadByRegion) {
  for (const LumaSampling sampling : {LumaSampling{4, 2}, LumaSampling{2, 4}}) {
    const auto pixels = photo_like(120, 300, 3, 24);
    EXPECT_FALSE(in_region_layout(encode_test_jpeg(pixels, 90, JpegKind::baseline, sampling)));
    const auto bytes = encode_test_jpeg(pixels, 90, JpegKind::baseline, sampling, 2);
    EXPECT_FALSE(find_restart_layout(bytes)) << sampling.across << "x" << sampling.down;
    DecodedWindow out;
    decode_jpeg_window(bytes, {{30, 40, 60, 200}, 32, 32, 3, false}, out);
    EXPECT_FALSE(out.from_region);
  }
}

// Where a window's pixels lie in a decoded buffer: its origin in the scaled image, which must be whole pixels.
int origin(float window_start, const DecodedWindow& out, float decoded_start) {
  const float scaled = window_start * static_cast<float>(out.scale_eighths) / 8.0f - decoded_start;
  EXPECT_EQ(scaled, std::round(scaled));
  return static_cast<int>(std::lround(scaled));
}

// Every pixel the window's bilinear taps can read (its scaled span and one more either side, within the image) is
// the same in both decodes.
void expect_same_tap_pixels(const DecodedWindow& plain, const DecodedWindow& region, const PixelWindow& w, int height,
                            int width) {
  ASSERT_EQ(plain.scale_eighths, region.scale_eighths);
  const float scale = static_cast<float>(plain.scale_eighths) / 8.0f;
  const int scaled_height = static_cast<int>(std::ceil(static_cast<float>(height) * scale));
  const int scaled_width = static_cast<int>(std::ceil(static_cast<float>(width) * scale));
  const int top = std::max(static_cast<int>(std::floor(w.top * scale)) - 1, 0);
  const int bottom = std::min(static_cast<int>(std::ceil((w.top + w.height) * scale)) + 1, scaled_height);
  const int left = std::max(static_cast<int>(std::floor(w.left * scale)) - 1, 0);
  const int right = std::min(static_cast<int>(std::ceil((w.left + w.width) * scale)) + 1, scaled_width);
  const int plain_row = origin(w.top, plain, plain.window.top), plain_column = origin(w.left, plain, plain.window.left);
  const int region_row = origin(w.top, region, region.window.top);
  const int region_column = origin(w.left, region, region.window.left);
  const auto channels = static_cast<std::size_t>(plain.channels);
  int mismatches = 0;
  for (int r = top; r < bottom; ++r)
    for (int c = left; c < right; ++c) {
      ASSERT_TRUE(r - plain_row >= 0 && r - plain_row < plain.rows && c - plain_column >= 0 &&
                  c - plain_column < plain.columns);
      ASSERT_TRUE(r - region_row >= 0 && r - region_row < region.rows && c - region_column >= 0 &&
                  c - region_column < region.columns)
          << "row " << r << " column " << c << " outside the region's decode";
      const auto at = [&](const DecodedWindow& d, int row, int column) {
        return (static_cast<std::size_t>(row) * static_cast<std::size_t>(d.columns) + static_cast<std::size_t>(column)) *
               channels;
      };
      for (std::size_t k = 0; k < channels; ++k) {
        const uint8_t a = plain.pixels[at(plain, r - plain_row, c - plain_column) + k];
        const uint8_t b = region.pixels[at(region, r - region_row, c - region_column) + k];
        if (a != b && mismatches++ < 8)
          ADD_FAILURE() << "scaled row " << r << " column " << c << " channel " << k << ": " << int{a} << " vs "
                        << int{b};
      }
    }
  EXPECT_EQ(mismatches, 0);
}

// Random windows of `bytes` (in the region layout) decoded from their regions hold the pixels of `plain` (the same
// image without restart markers) decoded whole-stream.
void expect_regions_hold_the_whole_decodes_pixels(const std::vector<uint8_t>& plain_bytes,
                                                  const std::vector<uint8_t>& bytes, std::mt19937& rng, int trials) {
  const JpegHeader header = read_jpeg_header(plain_bytes);
  const auto h = static_cast<float>(header.height), w = static_cast<float>(header.width);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int trial = 0; trial < trials; ++trial) {
    const float height = std::max(1.0f, h * (0.05f + 0.95f * unit(rng)));
    const float width = std::max(1.0f, w * (0.05f + 0.95f * unit(rng)));
    const PixelWindow window{(h - height) * unit(rng), (w - width) * unit(rng), height, width};
    // Outputs from a twelfth of the window to its size: every DCT scale from 1/8 to 8/8.
    const int out = std::max(1, static_cast<int>(std::min(height, width) / (1.0f + 11.0f * unit(rng))));
    const int channels = header.components == 1 && trial % 2 == 0 ? 1 : 3;
    SCOPED_TRACE(::testing::Message() << "window " << window.top << "," << window.left << " " << window.height << "x"
                                      << window.width << " to " << out << " channels " << channels);
    DecodedWindow plain, region;
    decode_jpeg_window(plain_bytes, {window, out, out, channels, false}, plain, header);
    decode_jpeg_window(bytes, {window, out, out, channels, false}, region, header);
    ASSERT_FALSE(plain.from_region);
    ASSERT_TRUE(region.from_region) << "the region-layout JPEG was decoded whole-stream";
    expect_same_tap_pixels(plain, region, window, header.height, header.width);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(RestartRegion, AWindowFromItsRegionHoldsTheWholeStreamDecodesPixels) {
  std::mt19937 rng(5);
  for (const TestImage& image : test_images()) {
    SCOPED_TRACE(image.name);
    expect_regions_hold_the_whole_decodes_pixels(image.plain, rewritten(image.plain), rng, 60);
    if (::testing::Test::HasFailure()) return;
  }
}

// Shards prepared before 2026-11-30 hold 4:2:0 and 4:2:2 photos with segments of several 16-pixel MCUs (the largest
// of 4, 3, 2 dividing the row): their regions still read so.
TEST(RestartRegion, SegmentsOfSeveralWideMcusStillReadByRegion) {
  std::mt19937 rng(6);
  struct Earlier {
    const char* name;
    std::vector<uint8_t> pixels_jpeg, restart_jpeg;
    int interval;
  };
  const auto pixels420 = photo_like(375, 500, 3, 12), pixels422 = photo_like(150, 333, 3, 13);
  const std::vector<Earlier> earlier = {
      {"4:2:0 375x500, 4 MCUs", encode_test_jpeg(pixels420, 85),
       encode_test_jpeg(pixels420, 85, JpegKind::baseline, {2, 2}, 4), 4},
      {"4:2:2 150x333, 3 MCUs", encode_test_jpeg(pixels422, 90, JpegKind::baseline, {2, 1}),
       encode_test_jpeg(pixels422, 90, JpegKind::baseline, {2, 1}, 3), 3}};
  for (const Earlier& image : earlier) {
    SCOPED_TRACE(image.name);
    const auto layout = find_restart_layout(image.restart_jpeg);
    ASSERT_TRUE(layout);
    EXPECT_EQ(layout->segment_mcus, image.interval);
    EXPECT_EQ(full_decode(image.restart_jpeg).pixels, full_decode(image.pixels_jpeg).pixels);
    expect_regions_hold_the_whole_decodes_pixels(image.pixels_jpeg, image.restart_jpeg, rng, 60);
  }
}

TEST(RestartRegion, TheRegionJpegHoldsOnlyTheSegmentsTheWindowCovers) {
  const std::vector<uint8_t> bytes = rewritten(encode_test_jpeg(photo_like(375, 500, 3, 21), 90));
  const auto layout = find_restart_layout(bytes);
  ASSERT_TRUE(layout);
  std::vector<uint8_t> region_bytes;
  const auto region = write_region_jpeg(bytes, *layout, {200.5f, 300.25f, 100, 120}, 2.0f, region_bytes);
  ASSERT_TRUE(region);
  // Rows on MCUs (16), columns on segments (one MCU, 16 pixels), two pixels of guard each way.
  EXPECT_EQ(region->top, 192);
  EXPECT_EQ(region->height, 304 - 192);
  EXPECT_EQ(region->left, 288);
  EXPECT_EQ(region->width, 432 - 288);
  const JpegHeader header = read_jpeg_header(region_bytes);
  EXPECT_EQ(header.height, region->height);
  EXPECT_EQ(header.width, region->width);
  EXPECT_LT(region_bytes.size(), bytes.size() / 4);
  const DecodedImage whole = full_decode(bytes), part = full_decode(region_bytes);
  ASSERT_EQ(part.height, region->height);
  // Away from the region's edges (where chroma upsampling sees the edge) the pixels are the image's.
  for (int r = 1; r + 1 < part.height; ++r)
    for (int c = 3; c + 3 < part.width * 3; ++c)
      ASSERT_EQ(part.pixels[static_cast<std::size_t>(r * part.width * 3 + c)],
                whole.pixels[static_cast<std::size_t>((region->top + r) * whole.width * 3 + region->left * 3 + c)])
          << "row " << r << " byte " << c;
}

// The device's decode at full scale resamples from k x k block means: its taps' blocks reach k pixels beyond the
// window (1 where k is 1), and chroma upsampling two more. The region holds the window widened so (clipped to the
// image), from a corner on whole MCUs, so its blocks are the image's.
TEST(RestartRegion, AFullScaleRegionHoldsTheWindowWidenedByItsBlockAndTheChromasPixels) {
  EXPECT_EQ(full_scale_guard({0, 0, 100, 100}, 64, 64), 3.0f);  // k = 1
  EXPECT_EQ(full_scale_guard({0, 0, 130, 200}, 64, 64), 4.0f);  // 2
  EXPECT_EQ(full_scale_guard({0, 0, 300, 260}, 64, 64), 6.0f);  // 4
  EXPECT_EQ(full_scale_guard({0, 0, 520, 600}, 64, 64), 10.0f);  // 8
  const std::vector<uint8_t> bytes = rewritten(encode_test_jpeg(photo_like(375, 500, 3, 22), 90));
  std::mt19937 random(31);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const float height = 8 + unit(random) * 360, width = 8 + unit(random) * 490;
    const PixelWindow window{unit(random) * (375 - height), unit(random) * (500 - width), height, width};
    const float guard = full_scale_guard(window, 32, 32);
    std::vector<uint8_t> out;
    const auto region = region_jpeg(bytes, window, guard, {375, 500, 0, false}, out);
    ASSERT_TRUE(region) << "trial " << trial;
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ", guard " << guard);
    EXPECT_EQ(region->top % 16, 0);
    EXPECT_EQ(region->left % 16, 0);
    EXPECT_LE(static_cast<float>(region->top), std::max(0.0f, window.top - guard));
    EXPECT_LE(static_cast<float>(region->left), std::max(0.0f, window.left - guard));
    EXPECT_GE(static_cast<float>(region->top + region->height), std::min(375.0f, window.top + height + guard));
    EXPECT_GE(static_cast<float>(region->left + region->width), std::min(500.0f, window.left + width + guard));
  }
  std::vector<uint8_t> out;
  EXPECT_FALSE(region_jpeg(bytes, {0, 0, 10, 10}, 3, {376, 500, 0, false}, out)) << "another size than expected";
  EXPECT_FALSE(region_jpeg(bytes, {NAN, 0, 10, 10}, 3, {}, out));
}

// A restart marker out of sequence (a segment lost, or renumbered) is refused as the whole-stream decode refuses it,
// not decoded from misplaced blocks.
TEST(RestartRegion, ARestartMarkerOutOfSequenceIsADataError) {
  const std::vector<uint8_t> bytes = rewritten(encode_test_jpeg(photo_like(96, 256, 3, 25), 90));
  const auto layout = find_restart_layout(bytes);
  ASSERT_TRUE(layout);
  std::vector<uint8_t> renumbered = bytes;
  std::size_t at = layout->entropy_at;
  int seen = 0;
  for (; at + 1 < renumbered.size(); ++at)
    if (renumbered[at] == 0xFF && renumbered[at + 1] >= 0xD0 && renumbered[at + 1] <= 0xD7 && seen++ == 2) break;
  ASSERT_EQ(renumbered[at + 1], 0xD2);
  renumbered[at + 1] = 0xD6;
  std::vector<uint8_t> region_bytes;
  EXPECT_FALSE(write_region_jpeg(renumbered, *layout, {40, 100, 30, 60}, 2.0f, region_bytes));
  DecodedWindow out;
  EXPECT_THROW(decode_jpeg_window(renumbered, {{40, 100, 30, 60}, 30, 60, 3, false}, out), DataError);
  decode_jpeg_window(bytes, {{40, 100, 30, 60}, 30, 60, 3, false}, out);
  EXPECT_TRUE(out.from_region);
}

TEST(RestartRegion, AWindowPastWhereTheDataEndsIsADataError) {
  const std::vector<uint8_t> bytes = rewritten(encode_test_jpeg(photo_like(240, 320, 3, 22), 90));
  const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bytes.size() * 6 / 10));
  const auto layout = find_restart_layout(cut);
  ASSERT_TRUE(layout) << "the headers are whole";
  std::vector<uint8_t> region_bytes;
  EXPECT_FALSE(write_region_jpeg(cut, *layout, {200, 10, 30, 300}, 2.0f, region_bytes));
  DecodedWindow out;
  EXPECT_THROW(decode_jpeg_window(cut, {{200, 10, 30, 300}, 32, 32, 3, false}, out), DataError);
  decode_jpeg_window(cut, {{10, 10, 30, 300}, 32, 32, 3, false}, out);  // the rows that are there still decode
  EXPECT_GT(out.rows, 0);
}

}  // namespace
}  // namespace ringtrain::io
