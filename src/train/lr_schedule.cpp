// Owns learning-rate arithmetic: scaling, warm-up and decay.
#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ringtrain::train {

LearningRateSchedule::LearningRateSchedule(const config::JobConfig::Optimizer& opt, int64_t global_batch,
                                           int64_t steps_per_epoch, int epochs)
    : peak_(opt.base_lr * static_cast<double>(global_batch) / opt.base_batch),
      min_(opt.min_lr),
      warmup_steps_(static_cast<int64_t>(std::llround(opt.warmup_epochs * static_cast<double>(steps_per_epoch)))),
      total_steps_(steps_per_epoch * epochs),
      kind_(opt.schedule) {
  // Warm-up starts at the rate the base batch was tuned for and climbs to the scaled one; when the global
  // batch is smaller than the base batch there is nothing to climb to.
  start_ = std::min(opt.base_lr, peak_);
  warmup_steps_ = std::min(warmup_steps_, total_steps_);
}

double LearningRateSchedule::at(int64_t step) const {
  if (step < warmup_steps_) return start_ + (peak_ - start_) * static_cast<double>(step) / static_cast<double>(warmup_steps_);
  if (kind_ == config::LrSchedule::constant) return peak_;
  const int64_t decay_steps = std::max<int64_t>(total_steps_ - warmup_steps_, 1);
  const double progress = std::clamp(static_cast<double>(step - warmup_steps_) / static_cast<double>(decay_steps), 0.0, 1.0);
  return min_ + (peak_ - min_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace ringtrain::train
