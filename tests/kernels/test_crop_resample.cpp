// The crop-and-resize that the CPU twin and the GPU decoder share: at scale 1 it copies, flipped it mirrors, and
// anywhere else it is within rounding of bilinear sampling computed in double precision; a window at least twice its
// sample is resampled from block means, the CPU twin's bits those of the per-value functions the CUDA kernel uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/crop_resample.h"

namespace ringtrain::kernels {
namespace {

struct Image {
  int rows, columns, channels;
  std::vector<uint8_t> pixels;
  InterleavedImage view() const { return {pixels.data(), rows, columns, channels, int64_t{columns} * channels}; }
  uint8_t at(int y, int x, int c) const {
    return pixels[(static_cast<std::size_t>(y) * static_cast<std::size_t>(columns) + static_cast<std::size_t>(x)) *
                      static_cast<std::size_t>(channels) + static_cast<std::size_t>(c)];
  }
};

Image random_image(int rows, int columns, int channels, unsigned seed) {
  std::mt19937 random(seed);
  Image image{rows, columns, channels, std::vector<uint8_t>(static_cast<std::size_t>(rows * columns * channels))};
  for (uint8_t& v : image.pixels) v = static_cast<uint8_t>(random() & 0xff);
  return image;
}

// Bilinear at pixel centres in double precision, clamped to the image.
double reference(const Image& image, const CropWindow& w, bool flip, int height, int width, int c, int y, int x) {
  const int sx = flip ? width - 1 - x : x;
  const double fy = std::clamp(w.top + (y + 0.5) * w.height / height - 0.5, 0.0, image.rows - 1.0);
  const double fx = std::clamp(w.left + (sx + 0.5) * w.width / width - 0.5, 0.0, image.columns - 1.0);
  const int y0 = static_cast<int>(fy), x0 = static_cast<int>(fx);
  const int y1 = std::min(y0 + 1, image.rows - 1), x1 = std::min(x0 + 1, image.columns - 1);
  const double wy = fy - y0, wx = fx - x0;
  const double top = image.at(y0, x0, c) * (1 - wx) + image.at(y0, x1, c) * wx;
  const double bottom = image.at(y1, x0, c) * (1 - wx) + image.at(y1, x1, c) * wx;
  return top * (1 - wy) + bottom * wy;
}

TEST(CropResample, WholeImageAtScaleOneIsACopyToPlanar) {
  const Image image = random_image(37, 53, 3, 1);
  std::vector<uint8_t> out(static_cast<std::size_t>(3 * 37 * 53));
  cpu::crop_resample(image.view(), {0, 0, 37, 53}, false, {3, 37, 53}, out);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 37; ++y)
      for (int x = 0; x < 53; ++x) ASSERT_EQ(out[static_cast<std::size_t>((c * 37 + y) * 53 + x)], image.at(y, x, c));
}

TEST(CropResample, FlipMirrorsEachRow) {
  const Image image = random_image(20, 31, 1, 2);
  std::vector<uint8_t> out(static_cast<std::size_t>(20 * 31));
  cpu::crop_resample(image.view(), {0, 0, 20, 31}, true, {1, 20, 31}, out);
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 31; ++x) ASSERT_EQ(out[static_cast<std::size_t>(y * 31 + x)], image.at(y, 30 - x, 0));
}

// Fixed-point weights: each axis's weight is within 1/512 of the exact one, so each moves the value by at most
// 255/512 = 0.5, and the result is rounded once (0.5): within 1.5 levels of the exact value, on random data and
// windows (a wrong tap or a swapped weight would be tens of levels away).
TEST(CropResample, WithinRoundingOfDoublePrecisionBilinear) {
  std::mt19937 random(3);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int trial = 0; trial < 40; ++trial) {
    const Image image = random_image(40 + trial, 70 - trial, 3, 10u + static_cast<unsigned>(trial));
    const float height = 2 + unit(random) * (static_cast<float>(image.rows) - 2);
    const float width = 2 + unit(random) * (static_cast<float>(image.columns) - 2);
    const CropWindow window{unit(random) * (static_cast<float>(image.rows) - height),
                            unit(random) * (static_cast<float>(image.columns) - width), height, width};
    const int out_h = 5 + trial % 29, out_w = 7 + trial % 23;
    const bool flip = trial % 2 == 1;
    std::vector<uint8_t> out(static_cast<std::size_t>(3 * out_h * out_w));
    cpu::crop_resample(image.view(), window, flip, {3, out_h, out_w}, out);
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < out_h; ++y)
        for (int x = 0; x < out_w; ++x) {
          const double expected = reference(image, window, flip, out_h, out_w, c, y, x);
          ASSERT_NEAR(out[static_cast<std::size_t>((c * out_h + y) * out_w + x)], expected, 1.5)
              << "trial " << trial << " c " << c << " y " << y << " x " << x;
        }
  }
}

// The CUDA kernel evaluates resampled_value() per output value; the CPU twin's separable loop must give its bits.
void expect_per_value_bits(const Image& image, const CropWindow& window, bool flip, int out_h, int out_w) {
  const int channels = image.channels;
  std::vector<uint8_t> out(static_cast<std::size_t>(channels * out_h * out_w));
  cpu::crop_resample(image.view(), window, flip, {channels, out_h, out_w}, out);
  for (int c = 0; c < channels; ++c)
    for (int y = 0; y < out_h; ++y)
      for (int x = 0; x < out_w; ++x) {
        const AxisTap row = axis_tap(y, out_h, window.top, window.height, image.rows);
        const AxisTap column = axis_tap(source_column(x, out_w, flip), out_w, window.left, window.width, image.columns);
        ASSERT_EQ(out[static_cast<std::size_t>((c * out_h + y) * out_w + x)],
                  resampled_value(image.view(), row, column, c))
            << "c " << c << " y " << y << " x " << x;
      }
}

TEST(CropResample, TheCpuLoopGivesThePerValueFunctionsBits) {
  std::mt19937 random(4);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int trial = 0; trial < 60; ++trial) {
    const int channels = trial % 3 == 0 ? 1 : 3;
    const Image image = random_image(30 + trial, 90 - trial, channels, 100u + static_cast<unsigned>(trial));
    const float height = 1 + unit(random) * (static_cast<float>(image.rows) - 1);
    const float width = 1 + unit(random) * (static_cast<float>(image.columns) - 1);
    const CropWindow window{unit(random) * (static_cast<float>(image.rows) - height),
                            unit(random) * (static_cast<float>(image.columns) - width), height, width};
    const int out_h = 3 + (trial * 7) % 61, out_w = 2 + (trial * 11) % 67;
    const bool flip = trial % 2 == 0;
    SCOPED_TRACE(testing::Message() << "trial " << trial);
    expect_per_value_bits(image, window, flip, out_h, out_w);
  }
}

// At a training sample's width the columns run in blocks of 16 (kernels/cpu/resample_columns): those whose taps stay
// within 64 or 128 source values take the vector paths where the build has AVX-512, the rest the scalar loop.
// Windows from a quarter of the width to 3.5 times it, flipped and not, gray and RGB, cover all three and the tail.
TEST(CropResample, SampleWidthsAcrossScalesGiveThePerValueFunctionsBits) {
  std::mt19937 random(11);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int trial = 0; trial < 40; ++trial) {
    const int channels = trial % 4 == 0 ? 1 : 3;
    const int out_h = 9, out_w = trial % 5 == 0 ? 221 : 224;
    const float width = out_w * (0.25f + 3.25f * unit(random));
    const Image image = random_image(40, static_cast<int>(width) + 3 + trial, channels, 300u + static_cast<unsigned>(trial));
    const CropWindow window{unit(random) * 10, unit(random) * (static_cast<float>(image.columns) - width), 20, width};
    const bool flip = trial % 2 == 1;
    SCOPED_TRACE(testing::Message() << "trial " << trial << ", window width " << width);
    expect_per_value_bits(image, window, flip, out_h, out_w);
  }
}

TEST(CropResample, TapsStayInsideTheImageAtItsEdges) {
  for (int length : {1, 2, 7, 224})
    for (int i = 0; i < length; ++i) {
      const AxisTap tap = axis_tap(i, length, 0.0f, 3.0f, 3);
      EXPECT_GE(tap.first, 0);
      EXPECT_LE(tap.second, 2);
      EXPECT_GE(tap.weight, 0);
      EXPECT_LE(tap.weight, kTapOne);
    }
}

// A crop at a fraction of its window is resampled from k x k block means, as a JPEG's scaled IDCT averages: 1-pixel
// stripes become their mean, not the moire two bilinear taps make of them, and the window keeps its place.
TEST(AveragedCropResample, StripesShrunkByMoreThanTwoBecomeTheirMean) {
  Image stripes{480, 640, 1, {}};
  for (int y = 0; y < 480; ++y)
    for (int x = 0; x < 640; ++x) stripes.pixels.push_back(x % 2 ? 255 : 0);
  const CropWindow window{20.0f, 80.0f, 420.0f, 420.0f};
  EXPECT_EQ(box_factor(window, 480, 640, 32, 32), 8);  // 420 / 32 = 13.1: blocks of 8 at most
  EXPECT_EQ(boxes(480, 8), 60);
  const CropWindow averaged = box_window(window, 8);
  EXPECT_FLOAT_EQ(averaged.top, 2.5f);
  EXPECT_FLOAT_EQ(averaged.left, 10.0f);
  EXPECT_FLOAT_EQ(averaged.height, 52.5f);
  std::vector<uint8_t> out(32 * 32), bilinear(32 * 32);
  cpu::averaged_crop_resample(stripes.view(), window, false, {1, 32, 32}, out);
  for (const uint8_t v : out) ASSERT_EQ(v, 128);
  cpu::crop_resample(stripes.view(), window, false, {1, 32, 32}, bilinear);
  EXPECT_GT(*std::max_element(bilinear.begin(), bilinear.end()) - *std::min_element(bilinear.begin(), bilinear.end()),
            100)
      << "without the average the stripes alias";
}

TEST(AveragedCropResample, UnderTwiceTheSampleItIsTheImagesOwnResampling) {
  const Image image = random_image(60, 80, 3, 21);
  const CropWindow window{3.0f, 5.0f, 50.0f, 61.0f};  // 50 / 32 < 2
  EXPECT_EQ(box_factor(window, 60, 80, 32, 32), 1);
  EXPECT_EQ(box_factor({0.0f, 0.0f, 2000.0f, 2000.0f}, 4, 4, 1, 1), 1) << "no block larger than the image";
  std::vector<uint8_t> averaged(3 * 32 * 32), plain(3 * 32 * 32);
  cpu::averaged_crop_resample(image.view(), window, true, {3, 32, 32}, averaged);
  cpu::crop_resample(image.view(), window, true, {3, 32, 32}, plain);
  EXPECT_EQ(averaged, plain);
}

// The CUDA kernel evaluates box_resampled_value() per output value on the whole photo; the CPU twin averages the
// image first and resamples that: the same bits, at every factor, flipped or not, gray and RGB, with partial blocks
// at the image's right and bottom edges left out.
TEST(AveragedCropResample, TheCpuTwinGivesThePerValueFunctionsBits) {
  std::mt19937 random(5);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int trial = 0; trial < 32; ++trial) {
    const int channels = trial % 3 == 0 ? 1 : 3;
    const int out_h = 5 + trial % 11, out_w = 6 + trial % 13;
    const Image image = random_image(9 * out_h + trial, 9 * out_w + 2 * trial, channels, 500u + static_cast<unsigned>(trial));
    const float shrink = 1.0f + 8.5f * unit(random);  // box factors 1, 2, 4 and 8, and past 8
    const float height = std::min(shrink * static_cast<float>(out_h), static_cast<float>(image.rows));
    const float width = std::min(shrink * static_cast<float>(out_w), static_cast<float>(image.columns));
    const CropWindow window{unit(random) * (static_cast<float>(image.rows) - height),
                            unit(random) * (static_cast<float>(image.columns) - width), height, width};
    const bool flip = trial % 2 == 1;
    const int k = box_factor(window, image.rows, image.columns, out_h, out_w);
    std::vector<uint8_t> out(static_cast<std::size_t>(channels * out_h * out_w));
    cpu::averaged_crop_resample(image.view(), window, flip, {channels, out_h, out_w}, out);
    const CropWindow w = box_window(window, k);
    const int rows = boxes(image.rows, k), columns = boxes(image.columns, k);
    for (int c = 0; c < channels; ++c)
      for (int y = 0; y < out_h; ++y)
        for (int x = 0; x < out_w; ++x) {
          const AxisTap row = axis_tap(y, out_h, w.top, w.height, rows);
          const AxisTap column = axis_tap(source_column(x, out_w, flip), out_w, w.left, w.width, columns);
          ASSERT_EQ(out[static_cast<std::size_t>((c * out_h + y) * out_w + x)],
                    box_resampled_value(image.view(), k, row, column, c))
              << "trial " << trial << " k " << k << " c " << c << " y " << y << " x " << x;
        }
  }
}

}  // namespace
}  // namespace ringtrain::kernels
