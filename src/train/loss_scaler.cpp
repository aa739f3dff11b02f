// Owns the loss-scale rule; see loss_scaler.h.
#include "train/loss_scaler.h"

#include <fmt/format.h>

#include "common/error.h"

namespace ringtrain::train {
namespace {

// Float's range bounds the scale: past 2^64 nothing fp16 can hold needs it, and below 2^-24 fp16's smallest
// value could not carry a gradient of the unscaled loss.
constexpr double kLargestScale = 0x1p64, kSmallestScale = 0x1p-24;

}  // namespace

LossScaler::LossScaler(double initial_scale, int64_t growth_interval)
    : growth_interval_(growth_interval), state_{initial_scale, 0, 0, 0} {}

void LossScaler::after_step(bool finite, int64_t step) {
  if (finite) {
    state_.skips_in_a_row = 0;
    if (growth_interval_ > 0 && ++state_.finite_in_a_row >= growth_interval_) {
      if (state_.scale * 2 <= kLargestScale) state_.scale *= 2;
      state_.finite_in_a_row = 0;
    }
    return;
  }
  ++state_.skipped_steps;
  state_.finite_in_a_row = 0;
  if (state_.scale / 2 >= kSmallestScale) state_.scale /= 2;
  if (++state_.skips_in_a_row >= kMaxSkipsInARow)
    throw AgreedError(ExitCode::fault,
                      fmt::format("fp16: the gradients overflowed at {} optimizer steps in a row, up to optimizer step "
                                  "{}, and the loss scale is down to {:g}: the forward pass itself leaves fp16's "
                                  "range, or training diverged; use train.precision = \"bf16\" or \"fp32\", or lower "
                                  "optimizer.base_lr",
                                  state_.skips_in_a_row, step + 1, state_.scale));
}

void LossScaler::restore(const LossScaleState& state) {
  if (state.scale <= 0) return;
  state_ = state;
  restored_ = true;
}

}  // namespace ringtrain::train
