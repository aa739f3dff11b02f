// Owns per-sample training augmentation on uint8 C x H x W pixels: CIFAR-style padded random crop with
// horizontal flip, and ImageNet-style random-resized crop with flip. Every random choice is a pure function of
// (seed, epoch, rank, sample), so a run is reproducible and no two epochs or ranks see the same crops.
#pragma once
#include <cstdint>
#include <span>

#include "config/augment_spec.h"
#include "data/keyed_random.h"
#include "io/dataset_meta.h"
#include "kernels/crop_resample.h"

namespace ringtrain::train {

// The job file's words for augmentation are config/'s (the schema sits below the pipeline); the pipeline and its
// callers name them here.
using AugmentKind = config::AugmentKind;
using AugmentSpec = config::AugmentSpec;

// Writes the augmented `in` to `out` (same shape, both shape.elements() bytes). With kind none, copies.
void augment_sample(const AugmentSpec& spec, const SampleKey& key, const io::SampleShape& shape,
                    std::span<const uint8_t> in, std::span<uint8_t> out);

// Where a training sample of an encoded split comes from in its photo (height x width pixels), and whether it is
// mirrored: torchvision's RandomResizedCrop (area in [min_area, 1], aspect ratio log-uniform in [3/4, 4/3], ten
// tries, then the centre crop of the whole image clamped to that ratio range) and RandomHorizontalFlip. (A raw
// split's samples fall back to the whole sample instead, as docs/data.md says; they differ only for samples whose
// aspect ratio lies outside [3/4, 4/3].)
struct PhotoCrop {
  kernels::CropWindow window;
  bool flip = false;
};
PhotoCrop random_photo_crop(const AugmentSpec& spec, const SampleKey& key, int height, int width);

// Evaluation's crop of a photo: its shorter side resized to `resize`, the centre out_height x out_width of that.
kernels::CropWindow centre_photo_crop(int height, int width, int resize, int out_height, int out_width);

}  // namespace ringtrain::train
