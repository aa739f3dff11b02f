// Owns per-sample training augmentation on uint8 C x H x W pixels: CIFAR-style padded random crop with
// horizontal flip, and ImageNet-style random-resized crop with flip. Every random choice is a pure function of
// (seed, epoch, rank, sample), so a run is reproducible and no two epochs or ranks see the same crops.
#pragma once
#include <cstdint>
#include <span>

#include "io/dataset_meta.h"

namespace ringtrain::train {

enum class AugmentKind { none, pad_crop_flip, resized_crop_flip };

struct AugmentSpec {
  AugmentKind kind = AugmentKind::none;
  int pad = 4;            // pad_crop_flip: zero border added on each side before the crop
  float min_area = 0.08f;  // resized_crop_flip: smallest crop, as a fraction of the image (torchvision's default)
};

struct SampleKey {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int rank = 0;
  int64_t sample = 0;  // the rank's own index of the sample
};

// Writes the augmented `in` to `out` (same shape, both shape.elements() bytes). With kind none, copies.
void augment_sample(const AugmentSpec& spec, const SampleKey& key, const io::SampleShape& shape,
                    std::span<const uint8_t> in, std::span<uint8_t> out);

}  // namespace ringtrain::train
