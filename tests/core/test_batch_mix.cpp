// Tests for data/batch_mix (mixup and CutMix in timm's pair mode) and the loader's mixing: lam's Beta(alpha, alpha)
// moments, CutMix's box (timm's rand_bbox) and lam corrected to its area, the pairing (s with n - 1 - s), the blend
// and paste against their formulas, the soft targets, reproducibility from the key, and a loader's mixed batches
// equal to the formulas applied to its unmixed ones, the same on 1 or 3 threads and in either batch form.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "data/batch_loader.h"
#include "data/batch_mix.h"
#include "io/partition.h"
#include "tests/io/io_test_support.h"

namespace ringtrain::train {
namespace {

const io::SampleShape kShape{3, 10, 14};

SampleKey key_of(int64_t sample, uint64_t seed = 7) { return {seed, 2, 1, sample}; }

std::vector<PairMix> draws(const MixSpec& spec, int n) {
  std::vector<PairMix> out;
  for (int i = 0; i < n; ++i) out.push_back(choose_pair_mix(spec, key_of(i), kShape));
  return out;
}

// Beta(a, a) has mean 1/2 and variance 1 / (4 (2a + 1)); the sample moments of n draws must be within a few
// standard errors of them.
TEST(BatchMix, MixupLamHasTheBetaMoments) {
  constexpr int kDraws = 20000;
  for (const double alpha : {0.2, 1.0, 4.0}) {
    double sum = 0, squares = 0;
    for (const PairMix& m : draws({alpha, 0}, kDraws)) {
      ASSERT_FALSE(m.cut);
      ASSERT_EQ(m.lam, m.drawn);
      ASSERT_GE(m.lam, 0.0);
      ASSERT_LE(m.lam, 1.0);
      sum += m.lam, squares += (m.lam - 0.5) * (m.lam - 0.5);
    }
    const double variance = 1.0 / (4.0 * (2.0 * alpha + 1.0));
    EXPECT_NEAR(sum / kDraws, 0.5, 5.0 * std::sqrt(variance / kDraws)) << "alpha " << alpha;
    // The variance of (lam - 1/2)^2 is below E[(lam - 1/2)^4] <= variance / 4 (|lam - 1/2| <= 1/2).
    EXPECT_NEAR(squares / kDraws, variance, 5.0 * std::sqrt(variance / 4.0 / kDraws)) << "alpha " << alpha;
  }
}

// timm's rand_bbox: sides int(side x sqrt(1 - lam)), centred on a pixel, clipped; lam = 1 - box / image.
TEST(BatchMix, CutMixBoxIsTimmsAndLamIsItsArea) {
  int unclipped = 0;
  for (const PairMix& m : draws({0, 1.0}, 4000)) {
    ASSERT_TRUE(m.cut);
    const MixBox& b = m.box;
    ASSERT_GE(b.top, 0);
    ASSERT_GE(b.left, 0);
    ASSERT_LE(b.top + b.height, kShape.height);
    ASSERT_LE(b.left + b.width, kShape.width);
    EXPECT_EQ(m.lam, 1.0 - static_cast<double>(b.height) * b.width / (kShape.height * kShape.width));
    const int cut_height = static_cast<int>(kShape.height * std::sqrt(1.0 - m.drawn));
    const int cut_width = static_cast<int>(kShape.width * std::sqrt(1.0 - m.drawn));
    EXPECT_LE(b.height, cut_height / 2 * 2);
    EXPECT_LE(b.width, cut_width / 2 * 2);
    if (b.top > 0 && b.top + b.height < kShape.height && b.left > 0 && b.left + b.width < kShape.width) {
      ++unclipped;
      EXPECT_EQ(b.height, cut_height / 2 * 2);
      EXPECT_EQ(b.width, cut_width / 2 * 2);
    }
  }
  EXPECT_GT(unclipped, 100);  // the exact sizes were checked, not only bounds
}

TEST(BatchMix, BothOnTakesEachMethodForAboutHalfThePairs) {
  constexpr int kDraws = 4000;
  int cuts = 0;
  for (const PairMix& m : draws({0.2, 1.0}, kDraws)) cuts += m.cut ? 1 : 0;
  EXPECT_NEAR(static_cast<double>(cuts) / kDraws, 0.5, 5.0 * std::sqrt(0.25 / kDraws));
}

TEST(BatchMix, TheKeyDecidesTheDraw) {
  const MixSpec spec{0.4, 1.0};
  const PairMix a = choose_pair_mix(spec, key_of(5), kShape), b = choose_pair_mix(spec, key_of(5), kShape);
  EXPECT_EQ(a.drawn, b.drawn);
  EXPECT_EQ(a.cut, b.cut);
  EXPECT_EQ(a.box.top, b.box.top);
  EXPECT_EQ(a.box.left, b.box.left);
  for (const SampleKey other : {key_of(5, 8), SampleKey{7, 3, 1, 5}, SampleKey{7, 2, 0, 5}, key_of(6)})
    EXPECT_NE(choose_pair_mix(spec, other, kShape).drawn, a.drawn) << other.seed << " " << other.epoch << " "
                                                                   << other.rank << " " << other.sample;
}

// s pairs with n - 1 - s and shares its draw, made once per pair from its first member; an odd batch's middle
// sample keeps itself.
TEST(BatchMix, PairsAreFirstWithLast) {
  for (const int n : {6, 7}) {
    std::vector<int> asked;
    const auto mixes = batch_mixes(n, [&](int s) {
      asked.push_back(s);
      return PairMix{0.1 * (s + 1), 0.1 * (s + 1), false, {}};
    });
    EXPECT_EQ(asked, (std::vector<int>{0, 1, 2})) << n;
    for (int s = 0; s < n; ++s) {
      const int partner = mix_partner(s, n);
      EXPECT_EQ(partner, n - 1 - s);
      if (s == partner) continue;  // checked below
      EXPECT_EQ(mixes[static_cast<size_t>(s)].lam, 0.1 * (std::min(s, partner) + 1)) << n << " " << s;
    }
    if (n % 2 == 1) {
      EXPECT_EQ(mixes[static_cast<size_t>(n / 2)].lam, 1.0);
    }
  }
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(gen() & 0xff);
  return v;
}

TEST(BatchMix, MixupBlendsEveryPixel) {
  const auto n = static_cast<size_t>(kShape.elements());
  const auto own = random_bytes(n, 1), partner = random_bytes(n, 2);
  std::vector<uint8_t> out(n);
  for (const double lam : {0.3, 0.5, 0.999, 0.0}) {
    mix_pixels({lam, lam, false, {}}, kShape, own, partner, out);
    const auto w = static_cast<uint32_t>(std::lround(lam * 65536));  // lam in 16-bit fixed point, rounded half up
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i], (w * own[i] + (65536 - w) * partner[i] + 32768) / 65536) << lam << " " << i;
      ASSERT_LE(std::abs(out[i] - (lam * own[i] + (1.0 - lam) * partner[i])), 0.5 + 1.0 / 256) << lam << " " << i;
    }
  }
}

// Inside the box every channel is the partner's, outside it the sample's own.
TEST(BatchMix, CutMixPastesThePartnersBox) {
  const auto n = static_cast<size_t>(kShape.elements());
  const auto own = random_bytes(n, 3), partner = random_bytes(n, 4);
  std::vector<uint8_t> out(n);
  const PairMix m{0.5, 0.0, true, {2, 3, 4, 5}};
  mix_pixels(m, kShape, own, partner, out);
  for (int c = 0; c < kShape.channels; ++c)
    for (int y = 0; y < kShape.height; ++y)
      for (int x = 0; x < kShape.width; ++x) {
        const size_t i = (static_cast<size_t>(c) * kShape.height + y) * kShape.width + x;
        const bool inside = y >= 2 && y < 6 && x >= 3 && x < 8;
        ASSERT_EQ(out[i], inside ? partner[i] : own[i]) << c << "," << y << "," << x;
      }
}

TEST(BatchMix, TargetsAreLamOnOwnAndTheRestOnThePartner) {
  std::vector<float> row(5, 9.0f);
  mixed_target(0.625, 1, 4, row);
  EXPECT_EQ(row, (std::vector<float>{0, 0.625f, 0, 0, 0.375f}));
  mixed_target(0.625, 2, 2, row);
  EXPECT_EQ(row, (std::vector<float>{0, 0, 1, 0, 0}));
  mixed_target(0.625, 5, 2, row);  // a label outside the classes: no target, the loss counts it
  EXPECT_EQ(row, (std::vector<float>(5, 0.0f)));
}

// A loader's batches, mixed or not, in one form on some threads: each batch's pixels (or floats) and targets.
class MixedBatches : public io::testing::IoTest {
 protected:
  static constexpr int kBatch = 7;  // odd: the middle sample keeps itself
  static constexpr int64_t kSamples = 42;
  static constexpr int kClasses = 4;

  void SetUp() override {
    IoTest::SetUp();
    const io::DatasetMeta meta = io::testing::test_meta(kShape, kClasses);
    io::write_split(dir() / "train", meta, {2, kSamples, 8}, io::testing::signature_source(meta), false);
    split_ = io::open_split(dir() / "train");
  }

  struct Batch {
    std::vector<int64_t> samples;
    std::vector<uint8_t> pixels;
    std::vector<float> images, targets;
    std::vector<int32_t> labels;
  };

  static PairMix mix_of(int64_t batch_index, int64_t sample) {
    return choose_pair_mix({0.4, 1.0}, {3, batch_index, 0, sample}, kShape);
  }

  std::vector<Batch> batches(BatchForm form, int threads, bool mixed) {
    io::ShardReader reader(split_, io::rank_range(kSamples, 0, 1));
    const int64_t count = kSamples / kBatch;
    const auto plan = [](int64_t i, std::vector<int64_t>& out) {
      out.clear();
      for (int k = 0; k < kBatch; ++k) out.push_back((i * kBatch + k) * 5 % kSamples);
    };
    LoaderWork work{threads, {}, {}, form, {}, mixed ? MixChoice(mix_of) : MixChoice(), {}};
    BatchLoader loader(reader, kBatch, count, plan, 2, work);
    std::vector<Batch> out;
    for (int64_t i = 0; i < count; ++i) {
      auto host = loader.next(nullptr);
      Batch b;
      plan(i, b.samples);
      b.pixels = host->pixels, b.images = host->images, b.targets = host->targets, b.labels = host->labels;
      out.push_back(std::move(b));
      loader.recycle(std::move(host));
    }
    return out;
  }

  io::SplitIndex split_;
};

TEST_F(MixedBatches, ALoadersMixedBatchIsTheFormulasOnItsUnmixedOne) {
  const auto plain = batches(BatchForm::pixels, 1, false), mixed = batches(BatchForm::pixels, 1, true);
  const auto per_sample = static_cast<size_t>(kShape.elements());
  int cut = 0, blended = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const auto mixes = batch_mixes(kBatch, [&](int s) { return mix_of(static_cast<int64_t>(i), plain[i].samples[static_cast<size_t>(s)]); });
    ASSERT_EQ(mixed[i].targets.size(), static_cast<size_t>(kBatch * kClasses));
    for (int s = 0; s < kBatch; ++s) {
      const auto own = static_cast<size_t>(s), partner = static_cast<size_t>(mix_partner(s, kBatch));
      std::vector<uint8_t> want(per_sample);
      mix_pixels(mixes[own], kShape, std::span(plain[i].pixels).subspan(own * per_sample, per_sample),
                 std::span(plain[i].pixels).subspan(partner * per_sample, per_sample), want);
      EXPECT_EQ(0, std::memcmp(want.data(), mixed[i].pixels.data() + own * per_sample, per_sample))
          << "batch " << i << " sample " << s;
      std::vector<float> row(kClasses);
      mixed_target(mixes[own].lam, plain[i].labels[own], plain[i].labels[partner], row);
      EXPECT_EQ(row, std::vector<float>(mixed[i].targets.begin() + static_cast<std::ptrdiff_t>(own * kClasses),
                                        mixed[i].targets.begin() + static_cast<std::ptrdiff_t>((own + 1) * kClasses)))
          << "batch " << i << " sample " << s;
      if (own != partner) (mixes[own].cut ? cut : blended) += 1;
    }
    EXPECT_NE(plain[i].pixels, mixed[i].pixels) << "batch " << i << " was not mixed";
  }
  EXPECT_GT(cut, 0);  // both methods were exercised
  EXPECT_GT(blended, 0);
}

TEST_F(MixedBatches, TheThreadsCountAndTheFormChangeNothing) {
  const auto one = batches(BatchForm::pixels, 1, true), three = batches(BatchForm::pixels, 3, true);
  const auto floats = batches(BatchForm::normalized, 3, true);
  ASSERT_EQ(one.size(), three.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].pixels, three[i].pixels) << "batch " << i;
    EXPECT_EQ(one[i].targets, three[i].targets) << "batch " << i;
    EXPECT_EQ(one[i].targets, floats[i].targets) << "batch " << i;
    // The loader normalises the mixed bytes: (v - mean) / stddev of the pixels form's batch.
    for (size_t k = 0; k < one[i].pixels.size(); ++k)
      ASSERT_EQ(floats[i].images[k], (static_cast<float>(one[i].pixels[k]) - 100.5f) / 50.25f) << i << " " << k;
  }
}

// Evaluation's loaders are made without a MixChoice: their batches carry no targets.
TEST_F(MixedBatches, AnUnmixedBatchHasNoTargets) {
  for (const Batch& b : batches(BatchForm::normalized, 2, false)) EXPECT_TRUE(b.targets.empty());
}

}  // namespace
}  // namespace ringtrain::train
