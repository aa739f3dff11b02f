// Owns the mixing arithmetic: the Beta draw (from two Gamma draws, Marsaglia and Tsang's method), CutMix's box, the
// blend and paste on uint8 planes, and the soft targets.
#include "data/batch_mix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

namespace ringtrain::train {
namespace {

// The pair's draws come from a stream of their own: the first member's augmentation draws from its plain key.
constexpr uint64_t kMixStream = 0x6d69787570ULL;  // "mixup"
constexpr double kSwitchProb = 0.5;                // timm's Mixup switch_prob: CutMix's share when both are on
// The blend's weights in 16-bit fixed point: the same bytes from every compiler (in floating point a sum falling
// on a half rounds by whether the multiply-add is fused), within 2^-17 of lam, far below a byte's rounding.
constexpr uint32_t kBlendBits = 16, kBlendOne = 1u << kBlendBits;

double normal(KeyedRandom& random) {  // Box-Muller; 1 - u keeps the logarithm finite
  const double radius = std::sqrt(-2.0 * std::log(1.0 - random.uniform()));
  return radius * std::cos(2.0 * std::numbers::pi * random.uniform());
}

// The logarithm of a Gamma(shape, 1) draw (Marsaglia and Tsang 2000). Below shape 1 it is boosted, Gamma(a) =
// Gamma(a + 1) U^(1/a), in logarithms so that small shapes (lam near 0 or 1) do not underflow to 0 / 0.
double log_gamma(KeyedRandom& random, double shape) {
  if (shape < 1.0) {
    const double boost = std::log(1.0 - random.uniform()) / shape;
    return log_gamma(random, shape + 1.0) + boost;
  }
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = normal(random), v = 1.0 + c * x;
    if (v <= 0.0) continue;
    const double cube = v * v * v;
    if (std::log(1.0 - random.uniform()) < 0.5 * x * x + d - d * cube + d * std::log(cube))
      return std::log(d) + std::log(cube);
  }
}

// Beta(alpha, alpha) = X / (X + Y) with X, Y ~ Gamma(alpha).
double symmetric_beta(KeyedRandom& random, double alpha) {
  const double x = log_gamma(random, alpha), y = log_gamma(random, alpha);
  return 1.0 / (1.0 + std::exp(y - x));
}

int clipped(int v, int side) { return std::clamp(v, 0, side); }

MixBox cutmix_box(KeyedRandom& random, double lam, const io::SampleShape& shape) {
  const double ratio = std::sqrt(1.0 - lam);
  const int cut_height = static_cast<int>(shape.height * ratio), cut_width = static_cast<int>(shape.width * ratio);
  const int cy = random.integer(shape.height), cx = random.integer(shape.width);
  const int top = clipped(cy - cut_height / 2, shape.height), bottom = clipped(cy + cut_height / 2, shape.height);
  const int left = clipped(cx - cut_width / 2, shape.width), right = clipped(cx + cut_width / 2, shape.width);
  return {top, left, bottom - top, right - left};
}

}  // namespace

PairMix choose_pair_mix(const MixSpec& spec, const SampleKey& first_member, const io::SampleShape& shape) {
  SampleKey key = first_member;
  key.seed ^= kMixStream;
  KeyedRandom random(key);
  PairMix mix;
  mix.cut = spec.cutmix_alpha > 0 && (spec.mixup_alpha <= 0 || random.uniform() < kSwitchProb);
  mix.drawn = symmetric_beta(random, mix.cut ? spec.cutmix_alpha : spec.mixup_alpha);
  mix.lam = mix.drawn;
  if (mix.cut) {
    mix.box = cutmix_box(random, mix.drawn, shape);
    mix.lam = 1.0 - static_cast<double>(mix.box.height) * mix.box.width / (static_cast<double>(shape.height) * shape.width);
  }
  return mix;
}

std::vector<PairMix> batch_mixes(int count, const std::function<PairMix(int first_member)>& pair_mix) {
  std::vector<PairMix> mixes(static_cast<size_t>(std::max(count, 0)));
  for (int s = 0; s < count / 2; ++s)
    mixes[static_cast<size_t>(s)] = mixes[static_cast<size_t>(mix_partner(s, count))] = pair_mix(s);
  return mixes;
}

void mix_pixels(const PairMix& mix, const io::SampleShape& shape, std::span<const uint8_t> own,
                std::span<const uint8_t> partner, std::span<uint8_t> out) {
  if (!mix.cut) {
    const auto w = static_cast<uint32_t>(std::lround(mix.lam * kBlendOne));
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = static_cast<uint8_t>((w * own[i] + (kBlendOne - w) * partner[i] + kBlendOne / 2) >> kBlendBits);
    return;
  }
  std::memcpy(out.data(), own.data(), out.size());
  const auto width = static_cast<size_t>(shape.width), plane = static_cast<size_t>(shape.height) * width;
  for (size_t c = 0; c < static_cast<size_t>(shape.channels); ++c)
    for (int y = mix.box.top; y < mix.box.top + mix.box.height; ++y) {
      const size_t at = c * plane + static_cast<size_t>(y) * width + static_cast<size_t>(mix.box.left);
      std::memcpy(out.data() + at, partner.data() + at, static_cast<size_t>(mix.box.width));
    }
}

void mixed_target(double lam, int32_t own, int32_t partner, std::span<float> row) {
  std::fill(row.begin(), row.end(), 0.0f);
  const auto classes = static_cast<int32_t>(row.size());
  if (own < 0 || own >= classes || partner < 0 || partner >= classes) return;
  if (own == partner) {
    row[static_cast<size_t>(own)] = 1.0f;
    return;
  }
  row[static_cast<size_t>(own)] = static_cast<float>(lam);
  row[static_cast<size_t>(partner)] = static_cast<float>(1.0 - lam);
}

}  // namespace ringtrain::train
