// Owns what this rank's finished steps of one epoch add up to: the training sums, the phase times, the loss
// since the last progress line, the first step whose loss was not finite, the first data error this rank met
// alone (its loader's, or labels outside the class range), and the steady-state window (the
// steps after the first run.timing_warmup_steps of the epoch, timed by the device from the end of the last
// warm-up step to the end of the last step, as a benchmark excludes its warm-up).
#pragma once
#include <cstdint>
#include <exception>
#include <vector>

#include "train/epoch_summary.h"
#include "train/step_runner.h"

namespace ringtrain::train {

struct SteadyWindow {
  double begin_s = 0, end_s = 0, samples = 0;
  double seconds() const { return samples > 0 ? end_s - begin_s : 0.0; }
};

class EpochTally {
 public:
  // `first_step`: the epoch's first optimizer step in this run; `classes` and `rank` word the bad-label error.
  EpochTally(int64_t first_step, int64_t warmup_steps, double epoch_start_s, int classes, int rank);

  // Adds finished steps; a label outside the class range (a DataError) and a non-finite loss are remembered for
  // the next agreement.
  void take(const std::vector<FinishedStep>& finished);
  double interval_loss() const;  // mean loss per sample since restart_interval()
  bool interval_empty() const { return interval_samples_ == 0; }  // no step finished since restart_interval()
  void restart_interval() { interval_loss_ = interval_samples_ = 0; }

  Totals train;
  StepTimes times;
  SteadyWindow steady;
  int64_t steps_run = 0;        // optimizer steps this run took in the epoch (set by the loop)
  int64_t nonfinite_step = -1;  // the first step with a non-finite loss, or -1
  // The first error this rank's data met (a sample that fails its CRC or does not decode, a label outside the
  // classes), held until the step's agreement so that every rank stops with its message; null when none.
  std::exception_ptr data_failure;
  int64_t skipped_steps = 0;    // fp16: steps whose gradients overflowed (the same on every rank)
  float loss_scale = 0;         // fp16: the loss scale of the last finished step; 0 without loss scaling
  GradNormStats grad_norm;      // clipping: the gradient norms before clipping
  StepActionCounts graph_steps_before;  // gpu.cuda_graphs: the runner's counts as the epoch began
  double start_s = 0;           // when the epoch began, on the host clock

 private:
  int64_t first_step_, warmup_;
  int classes_, rank_;
  double interval_loss_ = 0, interval_samples_ = 0;
};

}  // namespace ringtrain::train
