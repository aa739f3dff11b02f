// Owns the epochs of a run on one rank, from the first step to the last record: the step loop (data wait,
// forward, backward, all-reduce, optimizer; the device runs a step behind the host), the per-step agreement
// across ranks (a stop signal that reached only some ranks, a non-finite loss or a data error on one of them),
// checkpoints, evaluation and the epoch's record, progress with ETA, and the stop for preemption.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "data/batch_loader.h"
#include "data/decode_ahead.h"
#include "data/device_batch.h"
#include "dist/gradient_reducer.h"
#include "dist/gradient_sync.h"
#include "dist/watchdog.h"
#include "model/layer_profile.h"
#include "obs/gpu_monitor.h"
#include "obs/run_stats.h"
#include "obs/trace.h"
#include "train/checkpointer.h"
#include "train/epoch_tally.h"
#include "train/evaluation.h"
#include "train/fault_injection.h"
#include "train/progress.h"
#include "train/run_header.h"
#include "train/run_outputs.h"
#include "train/step_runner.h"

namespace ringtrain::train {

// Memory in use before the run allocates: libraries, MPI, the backend (host), and the device's own baseline
// (GPU: context, library handles, other processes).
struct MemoryBaseline {
  double rss_mb = 0, device_mb = 0;
};

class TrainingLoop {
 public:
  TrainingLoop(const RunContext& run, const RunSetup& setup, RunOutputs& outputs, dist::GradientReducer& reducer,
               dist::Watchdog& watchdog, const MemoryBaseline& baseline, const std::string& versions_json);
  ~TrainingLoop();
  TrainingLoop(const TrainingLoop&) = delete;
  TrainingLoop& operator=(const TrainingLoop&) = delete;

  // Errors inside the loop are thrown on the rank that saw them (main() ends the whole job) or agreed where
  // every rank can see them. Returns 0, or ExitCode::preempted after a stop signal (a checkpoint was written).
  int run();

 private:
  void say_setup();
  bool train_epoch(int epoch, EpochTally& tally);                 // false: stopped for preemption
  bool run_step(int epoch, int64_t step, EpochTally& tally);     // false: stopped for preemption
  void feed(int micro, EpochTally& tally);
  void load_batch(EpochTally& tally);
  long long agree_on_step(EpochTally& tally);
  void drain(EpochTally& tally);
  [[noreturn]] void throw_data_failure(const EpochTally& tally) const;
  AgreedError nonfinite_error(const EpochTally& tally) const;
  void after_step(int epoch, int64_t step, bool checkpoint_due, const EpochTally& tally);
  void show_progress(int epoch, int64_t step, float rate, EpochTally& tally);
  int evaluations_from(int epoch) const;
  bool checkpoints_after(int epoch) const;
  int checkpoints_from(int epoch, int64_t global_step) const;
  double evaluation_guess_s(double per_step_s) const;
  void await_stop();  // RINGTRAIN_TEST_AWAIT_STOP's wait (test hook)
  void stop(int epoch, int64_t step, const EpochTally& tally);
  void finish_epoch(int epoch, EpochTally& tally);
  void open_profile(int64_t first_step);    // run.profile_layers, in the first epoch
  void start_profile(const EpochTally& tally);
  void say_profile(int epoch, const EpochTally& tally);
  EpochReport measure_epoch(int epoch, const EpochTally& tally, double epoch_train_s);
  Totals evaluate_own_part(const BatchSink& sink = {});  // collective: this rank's sums, or every rank's agreed error
  Totals evaluate_weight_average();  // the test split with the average's weights, summed over ranks
  Resumable within_epoch(int epoch, int64_t step, const EpochTally& tally) const;  // after `step` is done
  double planned_bytes() const;
  double memory_needed_mb() const;
  obs::LoaderLoad loader_load() const;  // the training loader's time per batch so far
  void write_trace();

  const RunContext& run_;
  model::Network& net_;
  DataPlan& data_;
  const EpochPlan plan_;
  const LearningRateSchedule& lr_;
  RunOutputs& outputs_;
  const MemoryBaseline baseline_;
  DeviceBatch batch_;
  dist::GradientSync sync_;
  StepRunner runner_;
  Evaluator evaluator_;
  std::optional<obs::Trace> trace_;
  dist::Watchdog& watchdog_;  // the command's, which outlives the loop and sees the run's end
  Checkpointer checkpointer_;
  model::WeightAverage* ema_;  // train.ema_decay's average; null when off
  std::optional<obs::GpuMonitor> gpu_monitor_;
  std::unique_ptr<BatchLoader> loader_;
  std::unique_ptr<DecodeAhead> decode_ahead_;  // data.decode = gpu on a JPEG split: after loader_, which it stops
  Progress progress_;
  std::optional<ParamCorruption> corruption_;  // test hook only: see train/fault_injection.h
  std::optional<AwaitedStop> awaited_stop_;     // test hook only, in a fresh run only: see train/fault_injection.h
  std::optional<model::LayerProfile> profile_;
  // The steps profile_ times: from the first after the warm-up (run.timing_warmup_steps) where the epoch has steps
  // after it, so what a first call costs (oneDNN generating a kernel, cuDNN finding a plan) is not read as a cost of
  // every step; else every step, and the table says so.
  struct ProfileWindow {
    int64_t from_step = 0, warmup_left_out = 0;
    int64_t steps_before = 0;  // tally.steps_run when it started
    double start_s = -1;       // < 0: not started
  } profile_window_;
  const int start_epoch_;
  const int64_t start_step_;
  const io::EpochTrainSoFar start_epoch_train_;  // the resumed epoch's totals before start_step_, over every rank
  int64_t global_step_;
  const int64_t start_global_step_;  // this launch's first step (RINGTRAIN_TEST_STALL's "step")
  double train_time_s_, samples_done_;  // over the job, resumed runs included
  double last_eval_s_ = 0;  // the last evaluation's time, for the ETA
  struct TrainedSoFar {
    double samples = 0, seconds = 0;
  } last_line_;  // where the last progress line stood, for its rate: the samples/s since that line
};

}  // namespace ringtrain::train
