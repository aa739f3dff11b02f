// The windowed, scaled JPEG decode against libjpeg's full decode (io/image_decode): the same pixels where the scale
// is 8/8, the scale chosen to keep the window at least the output's size, every colour space and the progressive
// form, and headers or data that must be refused.
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/error.h"
#include "io/image_decode.h"
#include "io/jpeg_window.h"
#include "jpeg_test_images.h"

namespace ringtrain::io {
namespace {

using testing::encode_test_jpeg;
using testing::JpegKind;
using testing::photo_like;

DecodedImage full_decode(const std::vector<uint8_t>& jpeg) { return decode_image_bytes("test.jpg", jpeg); }

// Every pixel of `window` (its rows and columns placed at `row0`, `col0` of the full image) equals the full decode's,
// but for a cropped row's first and last column, which libjpeg upsamples as an edge (the decoder keeps one such guard
// column either side of what the taps read).
void expect_region_equal(const DecodedWindow& window, const DecodedImage& full, int row0, int col0) {
  ASSERT_EQ(window.channels, full.channels);
  const int first = col0 > 0 ? 1 : 0, end = window.columns - (col0 + window.columns < full.width ? 1 : 0);
  int mismatches = 0;
  for (int r = 0; r < window.rows; ++r)
    for (int c = first * window.channels; c < end * window.channels; ++c) {
      const auto w = window.pixels[static_cast<std::size_t>(r * window.columns * window.channels + c)];
      const auto f = full.pixels[static_cast<std::size_t>(((row0 + r) * full.width + col0) * full.channels + c)];
      if (w != f && mismatches++ < 12)
        ADD_FAILURE() << "row " << r << " of " << window.rows << " column " << c / window.channels << " of "
                      << window.columns << " (from " << row0 << ", " << col0 << "): " << int{w} << " vs " << int{f};
    }
  EXPECT_EQ(mismatches, 0);
}

TEST(JpegWindow, WholeImageAtFullScaleIsTheFullDecode) {
  const auto jpeg = encode_test_jpeg(photo_like(123, 157, 3, 1), 90);
  DecodedWindow out;
  decode_jpeg_window(jpeg, {{0, 0, 123, 157}, 123, 157, 3, true}, out);
  EXPECT_EQ(out.scale_eighths, 8);
  ASSERT_EQ(out.rows, 123);
  ASSERT_EQ(out.columns, 157);
  expect_region_equal(out, full_decode(jpeg), 0, 0);
}

TEST(JpegWindow, AWindowAtFullScaleHoldsTheFullDecodesPixelsThere) {
  const auto jpeg = encode_test_jpeg(photo_like(200, 260, 3, 2), 85);
  const DecodedImage full = full_decode(jpeg);
  for (const PixelWindow window : {PixelWindow{37.2f, 101.7f, 80, 90}, PixelWindow{0, 0, 50, 60},
                                   PixelWindow{150, 200, 50, 60}, PixelWindow{5, 17, 190, 3}}) {
    DecodedWindow out;
    decode_jpeg_window(jpeg, {window, 256, 256, 3, false}, out);
    ASSERT_EQ(out.scale_eighths, 8);
    const int row0 = static_cast<int>(std::lround(window.top - out.window.top));
    const int col0 = static_cast<int>(std::lround(window.left - out.window.left));
    EXPECT_LT(out.window.top, 2.0f) << "rows start at most two above the window";
    EXPECT_LE(out.window.top + out.window.height, static_cast<float>(out.rows));
    EXPECT_GE(out.window.left, window.left > 3 ? 2.0f : 0.0f) << "a guard column and a tap's neighbour on the left";
    EXPECT_LE(out.window.left + out.window.width, static_cast<float>(out.columns) + 1e-4f);
    expect_region_equal(out, full, row0, col0);
  }
}

TEST(JpegWindow, TheScaleKeepsTheWindowAtLeastTheOutputsSize) {
  EXPECT_EQ(jpeg_scale_eighths(375, 500, 224, 224), 8);  // 4/8 would give 187 < 224
  EXPECT_EQ(jpeg_scale_eighths(448, 600, 224, 224), 4);
  EXPECT_EQ(jpeg_scale_eighths(100, 100, 224, 224), 8);  // smaller than the output: no reduction
  EXPECT_EQ(jpeg_scale_eighths(2000, 2000, 224, 224), 1);
  EXPECT_EQ(jpeg_scale_eighths(1000, 1000, 224, 224), 2);
  const auto jpeg = encode_test_jpeg(photo_like(600, 800, 3, 3), 90);
  DecodedWindow out;
  decode_jpeg_window(jpeg, {{10, 20, 500, 460}, 224, 224, 3, false}, out);
  EXPECT_EQ(out.scale_eighths, 4);
  EXPECT_GE(out.window.height, 224.0f);
  EXPECT_GE(out.window.width, 224.0f);
  EXPECT_LE(out.rows, 500 / 2 + 4);  // only the window's rows (and the taps' neighbours)
}

TEST(JpegWindow, GrayBecomesRgbAndRgbBecomesLuma) {
  const auto gray = encode_test_jpeg(photo_like(64, 80, 1, 4), 90);
  DecodedWindow rgb;
  decode_jpeg_window(gray, {{0, 0, 64, 80}, 64, 80, 3, true}, rgb);
  const DecodedImage gray_full = full_decode(gray);
  for (std::size_t p = 0; p < gray_full.pixels.size(); ++p)
    for (std::size_t c = 0; c < 3; ++c) ASSERT_EQ(rgb.pixels[3 * p + c], gray_full.pixels[p]);

  const auto colour = encode_test_jpeg(photo_like(64, 80, 3, 5), 90);
  DecodedWindow luma;
  decode_jpeg_window(colour, {{0, 0, 64, 80}, 64, 80, 1, true}, luma);
  const DecodedImage expected = convert_channels(full_decode(colour), 1);
  ASSERT_EQ(luma.pixels.size(), expected.pixels.size());
  for (std::size_t p = 0; p < expected.pixels.size(); ++p) ASSERT_NEAR(luma.pixels[p], expected.pixels[p], 2);
}

TEST(JpegWindow, CmykBecomesTheRgbItInks) {
  testing::TestPixels rgb = photo_like(48, 64, 3, 6);
  testing::TestPixels cmyk{48, 64, 4, {}};
  for (std::size_t p = 0; p < rgb.values.size() / 3; ++p)  // Adobe's inverted inks: 255 is none, so K = 255
    cmyk.values.insert(cmyk.values.end(), {rgb.values[3 * p], rgb.values[3 * p + 1], rgb.values[3 * p + 2], 255});
  const auto jpeg = encode_test_jpeg(cmyk, 95);
  DecodedWindow out;
  decode_jpeg_window(jpeg, {{0, 0, 48, 64}, 48, 64, 3, true}, out);
  ASSERT_EQ(out.pixels.size(), rgb.values.size());
  double error = 0;
  for (std::size_t i = 0; i < rgb.values.size(); ++i) error += std::abs(out.pixels[i] - rgb.values[i]);
  EXPECT_LT(error / static_cast<double>(rgb.values.size()), 3.0) << "mean absolute difference from the inked RGB";
}

// A progressive JPEG of the same quality holds the same coefficients, only ordered otherwise: the same pixels.
TEST(JpegWindow, ProgressiveDecodesToTheBaselinesPixels) {
  const auto pixels = photo_like(150, 190, 3, 7);
  const auto baseline = encode_test_jpeg(pixels, 90), progressive = encode_test_jpeg(pixels, 90, JpegKind::progressive);
  EXPECT_TRUE(read_jpeg_header(progressive).progressive);
  DecodedWindow a, b;
  decode_jpeg_window(baseline, {{30, 40, 90, 100}, 64, 64, 3, false}, a);
  decode_jpeg_window(progressive, {{30, 40, 90, 100}, 64, 64, 3, false}, b);
  EXPECT_EQ(a.scale_eighths, b.scale_eighths);
  EXPECT_EQ(a.pixels, b.pixels);
}

TEST(JpegWindow, AHeaderClaimingAHugeImageIsRefusedBeforeDecoding) {
  const auto jpeg = testing::with_claimed_size(encode_test_jpeg(photo_like(16, 16, 3, 8), 90), 60000, 60000);
  EXPECT_EQ(read_jpeg_header(jpeg).height, 60000);
  DecodedWindow out;
  try {
    decode_jpeg_window(jpeg, {{0, 0, 60000, 60000}, 224, 224, 3, true}, out);
    FAIL() << "a 60000x60000 header was decoded";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("60000x60000"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(out.pixels.empty()) << "nothing was allocated for its pixels";
}

TEST(JpegWindow, TruncatedOrForeignBytesAreErrors) {
  auto jpeg = encode_test_jpeg(photo_like(80, 80, 3, 9), 90);
  DecodedWindow out;
  const std::vector<uint8_t> cut(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(jpeg.size() / 2));
  EXPECT_THROW(decode_jpeg_window(cut, {{0, 0, 80, 80}, 80, 80, 3, true}, out), DataError);
  const std::vector<uint8_t> text{'n', 'o', 't', ' ', 'a', ' ', 'j', 'p', 'e', 'g'};
  EXPECT_THROW(read_jpeg_header(text), DataError);
  EXPECT_THROW(decode_jpeg_window({}, {{0, 0, 1, 1}, 1, 1, 3, true}, out), DataError);
  EXPECT_THROW(decode_jpeg_window(jpeg, {{0, 0, 80, 80}, 80, 80, 3, true}, out, {81, 80}), DataError)
      << "a size other than the shard records";
}

}  // namespace
}  // namespace ringtrain::io
