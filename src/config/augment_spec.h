// Owns the job file's words for training augmentation (data.augment): which kind and its knobs. They live here,
// below the data pipeline that applies them (data/augment.h), so the job's schema needs nothing from the rooms
// above config/.
#pragma once

namespace ringtrain::config {

enum class AugmentKind { none, pad_crop_flip, resized_crop_flip };

struct AugmentSpec {
  AugmentKind kind = AugmentKind::none;
  int pad = 4;            // pad_crop_flip: zero border added on each side before the crop
  float min_area = 0.08f;  // resized_crop_flip: smallest crop, as a fraction of the image (torchvision's default)
};

}  // namespace ringtrain::config
