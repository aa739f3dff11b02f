// Owns the learning rate as a function of the optimizer step: scaling to the global batch (linear, Goyal et al.
// 2017; square root; or none), linear warm-up from base_lr or from 0, then cosine decay to min_lr, constant, steps down at
// milestone epochs (PyTorch's MultiStepLR), or polynomial decay to min_lr (MLPerf's LARS reference).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/job_config.h"

namespace ringtrain::train {

class LearningRateSchedule {
 public:
  LearningRateSchedule(const config::JobConfig::Optimizer& opt, int64_t global_batch, int64_t steps_per_epoch,
                       int epochs);
  double peak() const { return peak_; }  // base_lr x scale()
  // The factor the rule gives the base rate: global/base (linear), its square root (sqrt), or 1 (none).
  static double scale(config::LrScaling rule, int64_t global_batch, int base_batch);
  // The peak rate at `global_batch`: base_lr x scale(); a resume compares the checkpoint's with its own.
  static double peak_for(const config::JobConfig::Optimizer& opt, int64_t global_batch);
  // "0.1 x 1024/128 = 0.8", "0.1 x sqrt(1024/128) = 0.2828", "0.1 (no scaling)": the run header's arithmetic.
  std::string arithmetic(const config::JobConfig::Optimizer& opt, int64_t global_batch) const;
  double at(int64_t step) const;         // step counts optimizer steps from 0 over the whole job
  int64_t warmup_steps() const { return warmup_steps_; }
  // false for a warm-up from base_lr where the peak is base_lr (global batch at most base_batch, or no lr_scaling)
  bool warmup_climbs() const { return start_ < peak_; }
  // What follows the warm-up, for the run header: "cosine decay to 0", "x 0.1 at steps 300, 600, 800", ...
  std::string decay_text() const;
  const std::vector<int64_t>& milestone_steps() const { return milestone_steps_; }  // steps: where the rate drops
  // What the job asked that this run's length cuts short (a warm-up longer than the run, milestones after its last
  // step), each a sentence for the run header; empty when the schedule runs as written.
  std::vector<std::string> cut_short() const;

 private:
  double decayed(double progress) const;  // cosine and poly, progress in [0, 1] after warm-up
  double dropped(int64_t step) const;     // steps: decay_factor to the milestones passed; 1 for the others

  double start_, peak_, min_;
  int64_t asked_warmup_steps_, warmup_steps_, total_steps_;
  config::LrSchedule kind_;
  std::vector<int64_t> milestone_steps_;
  double decay_factor_, poly_power_;
};

}  // namespace ringtrain::train
