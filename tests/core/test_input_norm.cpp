// Proves that normalising on the device changes no number: the CPU twin's Backend::normalize_pixels gives, bit
// for bit, what the loader threads give (and what the loader always gave: (v - mean) / stddev in fp32), for
// every byte value; a loader that hands uint8 pixels (augmented or not) through a DeviceBatch yields exactly
// the input a normalising loader yields; and a split without statistics falls back to mean 0, stddev 255.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"
#include "data/batch_loader.h"
#include "data/device_batch.h"
#include "data/normalisation.h"
#include "io/partition.h"
#include "tests/io/io_test_support.h"

namespace ringtrain::train {
namespace {

using io::testing::IoTest;

bool same_bits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<std::size_t>(n) * sizeof(float)) == 0;
}

TEST(InputNorm, CpuTwinMatchesTheLoadersDefinitionForEveryByte) {
  const model::PixelShape s{2, 3, 256};  // each plane holds every byte value once
  std::vector<uint8_t> pixels(static_cast<std::size_t>(s.elements()));
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i % 256);
  const std::vector<float> mean{72.94f, 0.0f, 255.0f}, stddev{90.02f, 1.0f, 0.3f};
  std::vector<float> got(pixels.size());
  backend::CpuBackend cpu(1);
  cpu.normalize_pixels(s, pixels.data(), mean.data(), stddev.data(), got.data());
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    const std::size_t c = (i / 256) % 3;
    const float want = (static_cast<float>(pixels[i]) - mean[c]) / stddev[c];  // the loader's formula, in fp32
    ASSERT_EQ(std::memcmp(&got[i], &want, sizeof want), 0) << "byte " << int{pixels[i]} << " channel " << c;
  }
}

TEST(InputNorm, ASplitWithoutStatisticsUsesZeroAnd255) {
  io::DatasetMeta meta;
  meta.shape = {2, 4, 4};
  EXPECT_EQ(input_norm(meta), (InputNorm{{0, 0}, {255, 255}}));
  meta.mean = {10, 20};
  meta.stddev = {0, 30};  // a constant channel: no division by 0
  EXPECT_EQ(input_norm(meta), (InputNorm{{10, 20}, {255, 30}}));
}

// A job's data.mean and data.std replace the split's statistics whole; a count other than the channels is refused.
TEST(InputNorm, TheJobsOwnNumbersReplaceTheSplits) {
  io::DatasetMeta meta;
  meta.shape = {2, 4, 4};
  meta.mean = {10, 20};
  meta.stddev = {5, 30};
  config::JobConfig::Data keys;
  EXPECT_EQ(input_norm(meta, keys), input_norm(meta));  // none of the job's own: the split's
  keys.mean = {123.675, 116.28};
  keys.stddev = {58.395, 57.12};
  EXPECT_EQ(input_norm(meta, keys), (InputNorm{{123.675f, 116.28f}, {58.395f, 57.12f}}));
  keys.mean.push_back(103.53);
  keys.stddev.push_back(57.375);
  try {
    (void)input_norm(meta, keys);
    FAIL() << "three values for two channels must be refused";
  } catch (const JobFileError& e) {
    EXPECT_STREQ(e.what(), "data.mean and data.std have 3 values each, but the data's samples have 2 channels; give "
                           "one value a channel");
  }
}

class PixelBatches : public IoTest {
 protected:
  static constexpr int kBatch = 6;
  static constexpr int64_t kSamples = 40;

  void SetUp() override {
    IoTest::SetUp();
    io::DatasetMeta meta = io::testing::test_meta({3, 5, 7}, 4);
    meta.mean = {125.3f, 122.9f, 113.8f};
    meta.stddev = {62.99f, 62.08f, 66.7f};
    io::write_split(dir() / "train", meta, {2, kSamples, 8}, io::testing::signature_source(meta), false);
    split_ = io::open_split(dir() / "train");
  }

  // The batches of one plan (a fixed shuffle), as the loader hands them over in `form`, each through a
  // DeviceBatch on the CPU twin: the network's input, batch after batch.
  std::vector<std::vector<float>> inputs(BatchForm form, const SampleTransform& transform) {
    io::ShardReader reader(split_, io::rank_range(kSamples, 0, 1));
    const int64_t batches = kSamples / kBatch;
    BatchLoader loader(
        reader, kBatch, batches,
        [](int64_t i, std::vector<int64_t>& out) {
          out.clear();
          for (int k = 0; k < kBatch; ++k) out.push_back((i * kBatch + k) * 7 % kSamples);
        },
        2, LoaderWork{2, transform, {}, form, {}, {}, {}});
    backend::CpuBackend cpu(1);
    const io::SampleShape& s = split_.meta.shape;
    DeviceBatch device(cpu, {kBatch, s.channels, s.height, s.width}, form);
    std::vector<std::vector<float>> out;
    for (int64_t i = 0; i < batches; ++i) {
      auto host = loader.next(nullptr);
      EXPECT_EQ(host->form, form);
      device.load(*host);
      out.emplace_back(device.images(), device.images() + kBatch * s.elements());
      loader.recycle(std::move(host));
    }
    return out;
  }

  io::SplitIndex split_;
};

TEST_F(PixelBatches, NormalisedOnTheDeviceEqualsNormalisedInTheLoader) {
  const auto floats = inputs(BatchForm::normalized, {}), pixels = inputs(BatchForm::pixels, {});
  ASSERT_EQ(floats.size(), pixels.size());
  for (std::size_t b = 0; b < floats.size(); ++b)
    EXPECT_TRUE(same_bits(floats[b].data(), pixels[b].data(), static_cast<int64_t>(floats[b].size()))) << "batch " << b;
}

TEST_F(PixelBatches, AugmentedPixelsReachTheDeviceAsAugmented) {
  const SampleTransform invert = [](int64_t, int64_t, std::span<const uint8_t> in, std::span<uint8_t> out) {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = static_cast<uint8_t>(255 - in[i]);
  };
  const auto floats = inputs(BatchForm::normalized, invert), pixels = inputs(BatchForm::pixels, invert);
  const auto plain = inputs(BatchForm::pixels, {});
  for (std::size_t b = 0; b < floats.size(); ++b) {
    EXPECT_TRUE(same_bits(floats[b].data(), pixels[b].data(), static_cast<int64_t>(floats[b].size()))) << "batch " << b;
    EXPECT_NE(pixels[b], plain[b]) << "the transform was not applied to batch " << b;
  }
}

}  // namespace
}  // namespace ringtrain::train
