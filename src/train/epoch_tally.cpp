// Owns one epoch's running sums on this rank; see epoch_tally.h.
#include "train/epoch_tally.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace ringtrain::train {

EpochTally::EpochTally(int64_t first_step, int64_t warmup_steps, double epoch_start_s, int classes, int rank)
    : start_s(epoch_start_s), first_step_(first_step), warmup_(warmup_steps), classes_(classes), rank_(rank) {
  steady.begin_s = epoch_start_s;
}

void EpochTally::take(const std::vector<FinishedStep>& finished) {
  for (const FinishedStep& f : finished) {
    if (f.step - first_step_ == warmup_ - 1) steady.begin_s = f.end_s;
    if (f.step - first_step_ >= warmup_) steady.samples += static_cast<double>(f.samples), steady.end_s = f.end_s;
    if (f.loss.bad_labels > 0 && !data_failure)
      data_failure = std::make_exception_ptr(
          DataError(fmt::format("{} labels of optimizer step {} lie outside [0, {}) on rank {}; the dataset's labels do "
                                "not match its class count (re-run `ringtrain prepare`)",
                                f.loss.bad_labels, f.step + 1, classes_, rank_)));
    if (!std::isfinite(f.loss.loss_sum) && nonfinite_step < 0) nonfinite_step = f.step;
    train.loss_sum += f.loss.loss_sum;
    train.correct += static_cast<double>(f.loss.correct);
    train.samples += static_cast<double>(f.samples);
    interval_loss_ += f.loss.loss_sum;
    interval_samples_ += static_cast<double>(f.samples);
    times += f.times;
    skipped_steps += f.skipped ? 1 : 0;
    loss_scale = f.loss_scale;
    if (f.grad_norm >= 0) grad_norm.add(f.grad_norm);
  }
}

double EpochTally::interval_loss() const { return interval_loss_ / std::max(interval_samples_, 1.0); }

}  // namespace ringtrain::train
