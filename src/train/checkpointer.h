// Owns the points where a run proves itself and saves itself: the cross-rank parameter agreement (every rank
// must hold bit-identical parameters; a difference is silent corruption or a non-deterministic reduction, and
// training on would average diverged models; the same for the weights' moving average) and the checkpoint (rank 0
// writes it; it asks the network, the optimizer and the weights' average for their state; the last
// run.keep_checkpoints are kept). Both are collective, and name the last good checkpoint.
#pragma once
#include <cstdint>
#include <string>

#include "data/data_plan.h"
#include "dist/watchdog.h"
#include "model/network.h"
#include "model/optimizer.h"
#include "model/weight_average.h"
#include "obs/trace.h"
#include "train/epoch_summary.h"
#include "train/loss_scaler.h"
#include "train/run_context.h"

namespace ringtrain::train {

// Where a checkpoint lets a run continue, and what it has done so far.
struct Resumable {
  int64_t next_epoch = 0, next_step = 0;  // the step to run next
  double train_time_s = 0, train_samples = 0;
  Totals epoch_train;  // this rank's training totals of the epoch so far (none at an epoch's end)
  GradNormStats epoch_grad_norm{};  // the epoch's clipped steps so far, every rank's alike
  int64_t epoch_skipped_steps = 0;  // fp16: the epoch's skipped steps so far, every rank's alike
  int64_t optimizer_updates = 0;  // the updates the optimizer applied so far (Adam's count t)
};

class Checkpointer {
 public:
  // `run_id` and `versions_json` are rank 0's (what goes into the file); `last` the checkpoint the run started
  // from ("" for none).
  Checkpointer(const RunContext& run, model::Network& net, model::Optimizer& optimizer, const EpochPlan& plan,
               std::string run_id, std::string versions_json, const std::string& last, dist::Watchdog& watchdog,
               obs::Trace* trace);

  // The parameters' checksum, the same on every rank, or an AgreedError naming the ranks that differ and the
  // last good checkpoint. `when` says when ("after epoch 3").
  uint64_t agreed_checksum(const std::string& when, int64_t global_step);
  // The same for the weights' moving average (train.ema_decay), which every rank computes from the same
  // parameters; "" where the run keeps none.
  std::string agreed_ema_checksum(const std::string& when, int64_t global_step);
  // Writes <run.dir>/checkpoints/ckpt-s<steps done>.h5 (or, where run.dir holds a higher number, the number after it);
  // every rank gets the same error if it fails.
  void save(const Resumable& next, int64_t global_step);
  const std::string& last() const { return last_; }
  double last_write_s() const { return last_write_s_; }  // the last save's seconds on rank 0's clock (0: none yet)
  void set_loss_scaler(const LossScaler* scaler) { loss_scaler_ = scaler; }  // fp16: its state is saved too
  void set_weight_average(model::WeightAverage* ema) { ema_ = ema; }        // train.ema_decay: saved too
  void set_trace(obs::Trace* trace) { trace_ = trace; }  // the checkpoint's phase goes there (null: none)

 private:
  // The checksum of param_count() floats of device memory, agreed by every rank, or an AgreedError naming `what`.
  uint64_t agreed(const float* values, const char* what, const std::string& when, int64_t global_step);
  const RunContext& run_;
  model::Network& net_;
  model::Optimizer& optimizer_;
  EpochPlan plan_;
  std::string run_id_, versions_json_, last_;
  double last_write_s_ = 0;
  // The highest number a checkpoint name in run.dir carries (-1: none), the same on every rank. A checkpoint is
  // named by its global step, but after a resume on a world with fewer steps per epoch the count restarts below the
  // names already there; the newest must still sort last, as --resume and the keep-N cleanup take it by name.
  int64_t highest_name_ = -1;
  dist::Watchdog& watchdog_;
  obs::Trace* trace_;
  const LossScaler* loss_scaler_ = nullptr;
  model::WeightAverage* ema_ = nullptr;
};

}  // namespace ringtrain::train
