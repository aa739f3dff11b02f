// Owns learning-rate arithmetic: scaling, warm-up and decay.
#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"

namespace ringtrain::train {

LearningRateSchedule::LearningRateSchedule(const config::JobConfig::Optimizer& opt, int64_t global_batch,
                                           int64_t steps_per_epoch, int epochs)
    : peak_(peak_for(opt, global_batch)),
      min_(opt.min_lr),
      asked_warmup_steps_(static_cast<int64_t>(std::llround(opt.warmup_epochs * static_cast<double>(steps_per_epoch)))),
      warmup_steps_(asked_warmup_steps_),
      total_steps_(steps_per_epoch * epochs),
      kind_(opt.schedule),
      decay_factor_(opt.decay_factor),
      poly_power_(opt.poly_power) {
  // Goyal's warm-up starts at the rate the base batch was tuned for and climbs to the scaled one; when the global
  // batch is no larger than the base batch, or the rate is not scaled, there is nothing to climb to. MLPerf's LARS
  // reference climbs from 0.
  start_ = opt.warmup_start == config::WarmupStart::zero ? 0.0 : std::min(opt.base_lr, peak_);
  // A decay that ends above where it starts would raise the rate for the whole run.
  const bool decays_to_min = kind_ == config::LrSchedule::cosine || kind_ == config::LrSchedule::poly;
  if (decays_to_min && min_ > peak_)
    throw JobFileError(fmt::format("'optimizer.min_lr' = {:g} is above the peak rate {:g} (optimizer.base_lr scaled to "
                                   "the global batch {}), so the decay would raise the rate; set min_lr below it (0 "
                                   "decays to nothing)",
                                   min_, peak_, global_batch));
  warmup_steps_ = std::min(warmup_steps_, total_steps_);
  for (const double epoch : opt.milestones)
    milestone_steps_.push_back(static_cast<int64_t>(std::llround(epoch * static_cast<double>(steps_per_epoch))));
}

std::vector<std::string> LearningRateSchedule::cut_short() const {
  std::vector<std::string> notes;
  if (asked_warmup_steps_ > total_steps_ && start_ < peak_)
    notes.push_back(fmt::format("optimizer.warmup_epochs asks a warm-up of {} steps and the run has {}: the rate "
                                "climbs at the slope asked for the whole run and ends at {:.5g}, short of its peak "
                                "{:.5g}",
                                asked_warmup_steps_, total_steps_, at(total_steps_ - 1), peak_));
  std::vector<int64_t> after_end;
  if (kind_ == config::LrSchedule::steps)
    for (const int64_t step : milestone_steps_)
      if (step >= total_steps_) after_end.push_back(step);
  if (!after_end.empty())
    notes.push_back(fmt::format("optimizer.milestones at steps {} come after the run's last step ({}): the rate "
                                "never drops there",
                                fmt::join(after_end, ", "), total_steps_ - 1));
  return notes;
}

double LearningRateSchedule::scale(config::LrScaling rule, int64_t global_batch, int base_batch) {
  const double ratio = static_cast<double>(global_batch) / base_batch;
  switch (rule) {
    case config::LrScaling::linear: return ratio;
    case config::LrScaling::sqrt: return std::sqrt(ratio);
    case config::LrScaling::none: return 1.0;
  }
  return ratio;
}

double LearningRateSchedule::peak_for(const config::JobConfig::Optimizer& opt, int64_t global_batch) {
  return opt.base_lr * scale(opt.lr_scaling, global_batch, opt.base_batch);
}

std::string LearningRateSchedule::arithmetic(const config::JobConfig::Optimizer& opt, int64_t global_batch) const {
  switch (opt.lr_scaling) {
    case config::LrScaling::linear:
      return fmt::format("{} x {}/{} = {:.5g} (linear scaling)", opt.base_lr, global_batch, opt.base_batch, peak_);
    case config::LrScaling::sqrt:
      return fmt::format("{} x sqrt({}/{}) = {:.5g} (square-root scaling)", opt.base_lr, global_batch, opt.base_batch,
                         peak_);
    case config::LrScaling::none: break;
  }
  return fmt::format("{} (no scaling with the global batch)", peak_);
}

std::string LearningRateSchedule::decay_text() const {
  switch (kind_) {
    case config::LrSchedule::cosine: return fmt::format("cosine decay to {:g}", min_);
    case config::LrSchedule::constant: return "constant";
    case config::LrSchedule::steps:
      return fmt::format("x {:g} at steps {}", decay_factor_, fmt::join(milestone_steps_, ", "));
    case config::LrSchedule::poly: return fmt::format("poly decay (power {:g}) to {:g}", poly_power_, min_);
  }
  return "?";
}

// The warm-up keeps the slope asked where the run ends first (PyTorch's LinearLR with total_iters past the end), so
// that a resume with more epochs goes on climbing where the run stopped.
double LearningRateSchedule::at(int64_t step) const {
  if (step < warmup_steps_) {
    const double climbed = static_cast<double>(step) / static_cast<double>(asked_warmup_steps_);
    return (start_ + (peak_ - start_) * climbed) * dropped(step);
  }
  switch (kind_) {
    case config::LrSchedule::constant: return peak_;
    case config::LrSchedule::steps: return peak_ * dropped(step);
    case config::LrSchedule::cosine:
    case config::LrSchedule::poly: break;
  }
  const int64_t decay_steps = std::max<int64_t>(total_steps_ - warmup_steps_, 1);
  return decayed(std::clamp(static_cast<double>(step - warmup_steps_) / static_cast<double>(decay_steps), 0.0, 1.0));
}

double LearningRateSchedule::decayed(double progress) const {
  if (kind_ == config::LrSchedule::poly) return min_ + (peak_ - min_) * std::pow(1.0 - progress, poly_power_);
  return min_ + (peak_ - min_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

// Milestones count from the job's first step, as MultiStepLR's epochs do, and one inside the warm-up multiplies the
// warm-up's rate from there on, as PyTorch's ChainedScheduler(LinearLR, MultiStepLR) does.
double LearningRateSchedule::dropped(int64_t step) const {
  if (kind_ != config::LrSchedule::steps) return 1.0;
  const auto passed = std::count_if(milestone_steps_.begin(), milestone_steps_.end(),
                                    [&](int64_t milestone) { return milestone <= step; });
  return std::pow(decay_factor_, static_cast<double>(passed));
}

}  // namespace ringtrain::train
