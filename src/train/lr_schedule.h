// Owns the learning rate as a function of the optimizer step: linear scaling to the global batch
// (Goyal et al. 2017), linear warm-up from base_lr, then cosine decay to min_lr or constant.
#pragma once
#include <cstdint>

#include "config/job_config.h"

namespace ringtrain::train {

class LearningRateSchedule {
 public:
  LearningRateSchedule(const config::JobConfig::Optimizer& opt, int64_t global_batch, int64_t steps_per_epoch,
                       int epochs);
  double peak() const { return peak_; }  // base_lr x global_batch / base_batch
  double at(int64_t step) const;         // step counts optimizer steps from 0 over the whole job
  int64_t warmup_steps() const { return warmup_steps_; }

 private:
  double start_, peak_, min_;
  int64_t warmup_steps_, total_steps_;
  config::LrSchedule kind_;
};

}  // namespace ringtrain::train
