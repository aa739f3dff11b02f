// Owns the job file's words for training augmentation (data.augment, data.mixup_alpha, data.cutmix_alpha): which
// kind and its knobs, and how training batches are mixed. They live here,
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

// Mixup (Zhang et al. 2018) and CutMix (Yun et al. 2019) as timm's Mixup defines them, in its "pair" mode: the
// mixing weight lam ~ Beta(alpha, alpha) of the chosen method; both alphas 0 leave batches unmixed.
struct MixSpec {
  double mixup_alpha = 0;
  double cutmix_alpha = 0;
  bool on() const { return mixup_alpha > 0 || cutmix_alpha > 0; }
};

}  // namespace ringtrain::config
