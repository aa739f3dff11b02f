// Proves the prepare step's resize (io/image_resize.h): scale 1 passes pixels through, enlarging is bilinear at pixel
// centres, and shrinking averages the covered area, so a pattern finer than the output averages out instead of
// aliasing into stripes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "io/image_resize.h"

using ringtrain::io::DecodedImage;
using ringtrain::io::ImageSize;
using ringtrain::io::resize_crop_planar;

namespace {

DecodedImage gray(int width, int height, const std::vector<uint8_t>& pixels) { return {width, height, 1, pixels}; }

std::vector<uint8_t> resized(const DecodedImage& image, ImageSize size) {
  std::vector<uint8_t> out(static_cast<std::size_t>(size.height * size.width * image.channels));
  resize_crop_planar(image, size, out);
  return out;
}

}  // namespace

TEST(ImageResize, AtScaleOneThePixelsComeThroughUnchanged) {
  std::vector<uint8_t> pixels(35);
  std::iota(pixels.begin(), pixels.end(), uint8_t{3});
  EXPECT_EQ(resized(gray(7, 5, pixels), {5, 7}), pixels);
}

TEST(ImageResize, EnlargingIsBilinearAtPixelCentres) {
  // One row 0, 255 to four columns: sources -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped to 1).
  EXPECT_EQ(resized(gray(2, 1, {0, 255}), {2, 4}), (std::vector<uint8_t>{0, 64, 191, 255, 0, 64, 191, 255}));
}

TEST(ImageResize, ShrinkingAveragesAPatternFinerThanTheOutput) {
  // A one-pixel checkerboard, 64 x 64, to 8 x 8: each output pixel covers 32 black and 32 white pixels. Two
  // bilinear taps would land on same-coloured pixels and keep the pattern at full contrast.
  std::vector<uint8_t> board(64 * 64);
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 64; ++x) board[static_cast<std::size_t>(y * 64 + x)] = (x + y) % 2 ? 255 : 0;
  for (const uint8_t v : resized(gray(64, 64, board), {8, 8})) EXPECT_EQ(v, 128);  // 127.5 rounded
}

TEST(ImageResize, ShrinkingByAFractionKeepsTheImagesMean) {
  // A horizontal ramp 0..255 over 100 columns to 37: the mean stays within a grey level.
  std::vector<uint8_t> ramp(100 * 3);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 100; ++x) ramp[static_cast<std::size_t>(y * 100 + x)] = static_cast<uint8_t>(x * 255 / 99);
  const auto out = resized(gray(100, 3, ramp), {1, 37});
  const double in_mean = std::accumulate(ramp.begin(), ramp.begin() + 100, 0.0) / 100;
  const double out_mean = std::accumulate(out.begin(), out.end(), 0.0) / static_cast<double>(out.size());
  EXPECT_NEAR(out_mean, in_mean, 1.0);
  EXPECT_TRUE(std::is_sorted(out.begin(), out.end()));
}
