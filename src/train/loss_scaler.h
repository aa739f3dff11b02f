// Owns fp16's dynamic loss scaling (Micikevicius et al. 2018; the rule of PyTorch's GradScaler): the loss's
// gradient is multiplied by a scale so small gradients do not vanish below fp16's smallest values; the reduced
// gradients are divided by it before the update; when any of them is infinite or NaN the step is skipped (no
// update, the gradients dropped) and the scale halved; after growth_interval finite steps in a row it doubles.
// Every rank decides alike without talking: they all hold the same reduced gradients, and an infinity or a NaN
// on one rank reaches every rank's sum.
#pragma once
#include <cstdint>
#include <string>

namespace ringtrain::train {

// What a checkpoint keeps of it, so a resumed run scales as the uninterrupted one would.
struct LossScaleState {
  double scale = 0;            // 0: none recorded (another precision wrote the checkpoint)
  int64_t finite_in_a_row = 0;  // finite steps since the scale last changed
  int64_t skipped_steps = 0;    // steps skipped over the whole job
  int64_t skips_in_a_row = 0;   // steps skipped since the last finite one (kMaxSkipsInARow ends the run)
};

class LossScaler {
 public:
  // Skipping this many steps in a row means the forward pass itself overflows fp16 (or the model has diverged):
  // no scale helps, so the run ends with an error instead of skipping for ever.
  static constexpr int kMaxSkipsInARow = 40;

  LossScaler(double initial_scale, int64_t growth_interval);

  float scale() const { return static_cast<float>(state_.scale); }
  // After a step's gradients are reduced: true where they were finite (the step updates), false where they
  // overflowed (the step is skipped). Throws AgreedError (every rank throws it at the same step) after
  // kMaxSkipsInARow skips in a row, naming the step and what to change.
  void after_step(bool finite, int64_t step);

  LossScaleState state() const { return state_; }
  void restore(const LossScaleState& state);  // a state with scale 0 is ignored
  bool restored() const { return restored_; }  // the scale came from a checkpoint

 private:
  int64_t growth_interval_;
  LossScaleState state_;
  bool restored_ = false;
};

}  // namespace ringtrain::train
