// The crops an encoded split's samples are made from (torchvision's RandomResizedCrop and the evaluation centre
// crop, taken from the photo) and the CPU path that makes them: exactly the full decode's resampling where the
// DCT scale is 8/8, and close to it where the decoder scales down.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "data/photo_sample.h"
#include "io/image_decode.h"
#include "io/jpeg_encode.h"
#include "io/restart_region.h"
#include "kernels/cpu/crop_resample.h"

namespace ringtrain::train {
namespace {

TEST(PhotoCrop, RandomCropsFollowTorchvisionsRules) {
  const AugmentSpec spec{AugmentKind::resized_crop_flip};
  int flips = 0;
  std::set<std::pair<float, float>> corners;
  for (int64_t sample = 0; sample < 2000; ++sample) {
    const PhotoCrop crop = random_photo_crop(spec, {7, 3, 1, sample}, 375, 500);
    const kernels::CropWindow& w = crop.window;
    ASSERT_GE(w.top, 0);
    ASSERT_GE(w.left, 0);
    ASSERT_LE(w.top + w.height, 375);
    ASSERT_LE(w.left + w.width, 500);
    ASSERT_EQ(w.top, std::floor(w.top)) << "torchvision's crops lie on whole pixels";
    const double area = static_cast<double>(w.height) * w.width / (375.0 * 500.0);
    const double ratio = static_cast<double>(w.width) / w.height;
    // Rounding the sides to whole pixels moves area and ratio a little past the sampled range.
    EXPECT_GE(area, 0.08 * 0.97);
    EXPECT_GE(ratio, 0.75 * 0.97);
    EXPECT_LE(ratio, 4.0 / 3.0 * 1.03);
    flips += crop.flip ? 1 : 0;
    corners.emplace(w.top, w.left);
  }
  EXPECT_NEAR(flips, 1000, 100);
  EXPECT_GT(corners.size(), 1900u);
  const PhotoCrop again = random_photo_crop(spec, {7, 3, 1, 5}, 375, 500);
  const PhotoCrop other_epoch = random_photo_crop(spec, {7, 4, 1, 5}, 375, 500);
  EXPECT_EQ(again.window.top, random_photo_crop(spec, {7, 3, 1, 5}, 375, 500).window.top);
  EXPECT_NE(std::make_pair(again.window.top, again.window.left),
            std::make_pair(other_epoch.window.top, other_epoch.window.left));
}

TEST(PhotoCrop, WhenNoTryFitsTheCentreOfTheImageClampedToTheRatioRange) {
  const AugmentSpec spec{AugmentKind::resized_crop_flip, 4, 0.95f};
  for (int64_t sample = 0; sample < 20; ++sample) {
    const kernels::CropWindow w = random_photo_crop(spec, {1, 0, 0, sample}, 10, 1000).window;
    EXPECT_EQ(w.height, 10);
    EXPECT_EQ(w.width, 13);  // round(10 * 4/3)
    EXPECT_EQ(w.left, (1000 - 13) / 2);
  }
}

TEST(PhotoCrop, EvaluationTakesTheCentreOfTheResizedPhoto) {
  const kernels::CropWindow w = centre_photo_crop(375, 500, 256, 224, 224);
  const double side = 224 * 375.0 / 256;  // 224 pixels of the photo resized to 256 on its shorter side
  EXPECT_FLOAT_EQ(w.height, static_cast<float>(side));
  EXPECT_FLOAT_EQ(w.width, static_cast<float>(side));
  EXPECT_FLOAT_EQ(w.top, static_cast<float>((375 - side) / 2));
  EXPECT_FLOAT_EQ(w.left, static_cast<float>((500 - side) / 2));
  EXPECT_EQ(evaluation_resize(0, {3, 224, 224}), 256);
  EXPECT_EQ(evaluation_resize(300, {3, 224, 224}), 300);
}

io::DecodedImage smooth_photo(int height, int width) {
  io::DecodedImage image{width, height, 3, {}};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c)
        image.pixels.push_back(static_cast<uint8_t>(128 + 90 * std::sin(x / (9.0 + c)) * std::cos(y / 13.0)));
  return image;
}

// The reference: the whole photo decoded at full scale, then the same crop resampled from it.
std::vector<uint8_t> reference_sample(const std::vector<uint8_t>& jpeg, const PhotoCrop& crop, const io::SampleShape& shape) {
  const io::DecodedImage full = io::decode_image_bytes("photo.jpg", jpeg);
  std::vector<uint8_t> out(static_cast<std::size_t>(shape.elements()));
  kernels::cpu::crop_resample({full.pixels.data(), full.height, full.width, 3, int64_t{full.width} * 3}, crop.window,
                              crop.flip, {shape.channels, shape.height, shape.width}, out);
  return out;
}

TEST(PhotoSample, AtFullDctScaleItIsTheFullDecodesResampling) {
  const auto jpeg = io::encode_jpeg(smooth_photo(100, 120), 90, false);
  const PhotoSampling sampling{false, {}, 100, {3, 64, 64}};  // a 64x64 crop of a 100-pixel side: scale 8/8
  std::vector<uint8_t> out(3 * 64 * 64);
  decode_photo_sample(sampling, {}, jpeg, 100, 120, out);
  EXPECT_EQ(out, reference_sample(jpeg, photo_crop(sampling, {}, 100, 120), sampling.shape));
}

// A photo in the region layout prepare stores (io/jpeg_encode.h) gives the loader the same samples, byte for byte,
// as the same photo kept as a plain JPEG: training crops (at DCT scales 8/8 and 4/8 here) and the evaluation's
// centre crop, through the window's shift into the region. The margin that keeps a region's edge out of the taps'
// reach is proven pixel by pixel in tests/io/test_restart_region.cpp, where one pixel too few fails.
TEST(PhotoSample, TheRegionLayoutGivesThePlainJpegsSamples) {
  io::DecodedImage photo = smooth_photo(900, 1200);
  for (std::size_t i = 0; i < photo.pixels.size(); ++i) {
    const int noise = static_cast<int>(static_cast<uint32_t>(i) * 2654435761u >> 27) - 16;  // a hash: -16..15
    photo.pixels[i] = static_cast<uint8_t>(std::clamp(photo.pixels[i] + noise, 0, 255));
  }
  const auto plain = io::encode_jpeg(photo, 90, false);
  const auto region = io::in_region_layout(plain);
  ASSERT_TRUE(region);
  ASSERT_TRUE(io::find_restart_layout(*region)) << "the loader would decode it whole-stream";
  const PhotoSampling training{true, {AugmentKind::resized_crop_flip}, 0, {3, 224, 224}};
  const PhotoSampling evaluation{false, {}, 256, {3, 224, 224}};
  for (int64_t sample = 0; sample < 24; ++sample) {
    const PhotoSampling& sampling = sample == 0 ? evaluation : training;
    std::vector<uint8_t> from_plain(3 * 224 * 224), from_region(3 * 224 * 224);
    decode_photo_sample(sampling, {7, 1, 0, sample}, plain, 900, 1200, from_plain);
    decode_photo_sample(sampling, {7, 1, 0, sample}, *region, 900, 1200, from_region);
    ASSERT_EQ(from_plain, from_region) << (sampling.training ? "training" : "evaluation") << " sample " << sample;
  }
}

// Where the decoder scales down (1/2 or 1/4 for most crops of a 1200x900 photo) the sample is made from averaged
// blocks instead of full pixels: close to the full-scale resampling on a smooth photo (a wrong window or flip would
// be tens of levels away on average).
TEST(PhotoSample, AtAReducedDctScaleItStaysCloseToTheFullDecode) {
  const auto jpeg = io::encode_jpeg(smooth_photo(900, 1200), 90, false);
  const PhotoSampling sampling{true, {AugmentKind::resized_crop_flip}, 256, {3, 112, 112}};
  for (int64_t sample = 0; sample < 8; ++sample) {
    std::vector<uint8_t> out(3 * 112 * 112);
    decode_photo_sample(sampling, {3, 0, 0, sample}, jpeg, 900, 1200, out);
    const auto expected = reference_sample(jpeg, photo_crop(sampling, {3, 0, 0, sample}, 900, 1200), sampling.shape);
    double error = 0;
    for (std::size_t i = 0; i < out.size(); ++i) error += std::abs(out[i] - expected[i]);
    EXPECT_LT(error / static_cast<double>(out.size()), 3.0) << "sample " << sample;
  }
}

}  // namespace
}  // namespace ringtrain::train
