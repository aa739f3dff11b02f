// Proves the augmentation contract: "none" copies; a key gives the same output every time; another epoch,
// rank or sample gives another crop; pad_crop_flip only shifts, mirrors and zero-fills (every output pixel is
// an input pixel of the same channel and row band, or 0); resized_crop_flip keeps the shape and the range.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <string>

#include "data/augment.h"

namespace ringtrain::train {
namespace {

const io::SampleShape shape{3, 16, 12};

std::vector<uint8_t> gradient_image() {  // every pixel distinct within a channel, none zero
  std::vector<uint8_t> image(static_cast<std::size_t>(shape.elements()));
  for (std::size_t i = 0; i < image.size(); ++i) image[i] = static_cast<uint8_t>(1 + i % 192);
  return image;
}

// As bytes in a string: sets of strings compare without GCC 12's false -Wstringop-overread on vector<uint8_t>.
std::string text(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

std::vector<uint8_t> run(const AugmentSpec& spec, const SampleKey& key) {
  const std::vector<uint8_t> in = gradient_image();
  std::vector<uint8_t> out(in.size(), 77);
  augment_sample(spec, key, shape, in, out);
  return out;
}

TEST(Augment, NoneCopies) {
  EXPECT_EQ(run({AugmentKind::none}, {1, 2, 3, 4}), gradient_image());
}

TEST(Augment, SameKeySameOutput_OtherEpochRankOrSampleDiffers) {
  for (const AugmentKind kind : {AugmentKind::pad_crop_flip, AugmentKind::resized_crop_flip}) {
    const AugmentSpec spec{kind};
    const SampleKey key{42, 3, 1, 17};
    EXPECT_EQ(run(spec, key), run(spec, key));
    // Any single (epoch, rank, sample) could repeat a crop by chance; among 8 variations of each, most differ.
    for (int field = 0; field < 3; ++field) {
      std::set<std::string> outputs{text(run(spec, key))};
      for (int v = 1; v <= 8; ++v) {
        SampleKey other = key;
        if (field == 0) other.epoch += v;
        if (field == 1) other.rank += v;
        if (field == 2) other.sample += v;
        outputs.insert(text(run(spec, other)));
      }
      EXPECT_GE(outputs.size(), 6u) << "kind " << static_cast<int>(kind) << " field " << field;
    }
    std::set<std::string> seeds{text(run(spec, key))};
    for (uint64_t s = 43; s < 51; ++s) seeds.insert(text(run(spec, {s, 3, 1, 17})));
    EXPECT_GE(seeds.size(), 6u);
  }
}

TEST(Augment, PadCropFlipOnlyShiftsMirrorsAndZeroFills) {
  const std::vector<uint8_t> in = gradient_image();
  const std::size_t plane = 16 * 12;
  int shifted = 0;
  for (int64_t sample = 0; sample < 32; ++sample) {
    const std::vector<uint8_t> out = run({AugmentKind::pad_crop_flip, 4}, {7, 0, 0, sample});
    for (std::size_t c = 0; c < 3; ++c) {
      const std::set<uint8_t> channel(in.begin() + static_cast<std::ptrdiff_t>(c * plane),
                                      in.begin() + static_cast<std::ptrdiff_t>((c + 1) * plane));
      for (std::size_t p = 0; p < plane; ++p) {
        const uint8_t v = out[c * plane + p];
        EXPECT_TRUE(v == 0 || channel.count(v)) << "sample " << sample << " channel " << c;
      }
    }
    shifted += out != in;
  }
  EXPECT_GT(shifted, 24) << "with pad 4 and flips, almost every sample moves";
  EXPECT_EQ(run({AugmentKind::pad_crop_flip, 0}, {7, 0, 0, 0}).size(), in.size());
}

// The definition: shift by (dy, dx), mirror if asked, zeros outside. pad_crop_flip's output must be exactly one
// of these for |dy|, |dx| <= pad.
std::vector<uint8_t> shifted_reference(const std::vector<uint8_t>& in, int dy, int dx, bool flip) {
  std::vector<uint8_t> out(in.size(), 0);
  for (int c = 0; c < shape.channels; ++c)
    for (int y = 0; y < shape.height; ++y)
      for (int x = 0; x < shape.width; ++x) {
        const int sy = y + dy, sx = (flip ? shape.width - 1 - x : x) + dx;
        if (sy >= 0 && sy < shape.height && sx >= 0 && sx < shape.width)
          out[static_cast<std::size_t>((c * shape.height + y) * shape.width + x)] =
              in[static_cast<std::size_t>((c * shape.height + sy) * shape.width + sx)];
      }
  return out;
}

TEST(Augment, PadCropFlipIsExactlyAShiftOrMirroredShift) {
  const std::vector<uint8_t> in = gradient_image();
  std::set<std::string> candidates;
  for (int dy = -4; dy <= 4; ++dy)
    for (int dx = -4; dx <= 4; ++dx)
      for (const bool flip : {false, true}) candidates.insert(text(shifted_reference(in, dy, dx, flip)));
  std::set<std::string> seen;
  for (int64_t sample = 0; sample < 64; ++sample) {
    const std::string out = text(run({AugmentKind::pad_crop_flip, 4}, {5, 0, 0, sample}));
    EXPECT_TRUE(candidates.count(out)) << "sample " << sample;
    seen.insert(out);
  }
  EXPECT_GT(seen.size(), 40u) << "64 samples spread over 162 shifts";
}

TEST(Augment, ResizedCropFlipKeepsShapeAndRange) {
  const std::vector<uint8_t> in = gradient_image();
  const auto [low, high] = std::minmax_element(in.begin(), in.end());
  for (int64_t sample = 0; sample < 16; ++sample) {
    const std::vector<uint8_t> out = run({AugmentKind::resized_crop_flip}, {9, 1, 0, sample});
    ASSERT_EQ(out.size(), in.size());
    for (const uint8_t v : out) {
      EXPECT_GE(v, *low);
      EXPECT_LE(v, *high);
    }
  }
}

}  // namespace
}  // namespace ringtrain::train
