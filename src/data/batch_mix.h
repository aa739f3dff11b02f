// Owns mixing a training batch (data.mixup_alpha, data.cutmix_alpha) as timm's Mixup does in its "pair" mode: sample
// s of a batch of n is paired with sample n - 1 - s, each pair draws its own lam ~ Beta(alpha, alpha), and both
// members take lam of themselves and 1 - lam of the other, in pixels (mixup: blended; CutMix: the other's pixels
// in one box, the same box for both) and in their soft targets. Each pair's draw is keyed by its first member's
// SampleKey (data/keyed_random.h, on a stream of its own), so a batch mixes the same whatever the loader's threads.
// Mixing is on uint8 pixels, after augmentation and before normalisation, as timm's FastCollateMixup: a blend
// rounds to the nearest byte (its weight lam in 16-bit fixed point). Normalisation is affine and the blend's
// weights sum to 1, so the two commute.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "config/augment_spec.h"
#include "data/keyed_random.h"
#include "io/dataset_meta.h"

namespace ringtrain::train {

using MixSpec = config::MixSpec;

struct MixBox {  // CutMix's box, in pixels of the sample
  int top = 0, left = 0, height = 0, width = 0;
};

struct PairMix {
  double drawn = 1;  // lam as drawn from Beta(alpha, alpha)
  double lam = 1;    // the weight of a sample's own pixels and label: drawn, or CutMix's 1 - box area / image area
  bool cut = false;  // CutMix (the box) rather than mixup (the blend)
  MixBox box;
};

// A pair's mix, from the key of its first member: when both alphas are above 0, CutMix or mixup with probability
// 0.5 each (timm's switch_prob); then lam; for CutMix the box, timm's rand_bbox: sides int(side x sqrt(1 - lam))
// centred on a uniform pixel, clipped to the image. Needs spec.on().
PairMix choose_pair_mix(const MixSpec& spec, const SampleKey& first_member, const io::SampleShape& shape);

// Sample s's partner in a batch of `count`: the pair (s, count - 1 - s); an odd batch's middle sample is its own.
inline int mix_partner(int s, int count) { return count - 1 - s; }

// Every sample's mix in a batch of `count`: pair_mix(s) for the first member s of each pair, shared by its partner;
// an odd batch's middle sample keeps itself (lam 1).
std::vector<PairMix> batch_mixes(int count, const std::function<PairMix(int first_member)>& pair_mix);

// Writes sample `own` mixed with `partner` as `mix` says (each shape.elements() bytes) to `out`.
void mix_pixels(const PairMix& mix, const io::SampleShape& shape, std::span<const uint8_t> own,
                std::span<const uint8_t> partner, std::span<uint8_t> out);

// A mixed sample's soft target, `row` (classes floats): lam on its own label plus 1 - lam on its partner's. A label
// outside [0, classes) leaves the row zero, which the loss counts as a bad label (both members of its pair).
void mixed_target(double lam, int32_t own, int32_t partner, std::span<float> row);

}  // namespace ringtrain::train
