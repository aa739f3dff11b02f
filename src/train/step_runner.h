// Owns one optimizer step on one rank, given micro-batches already on the device: zero gradients (unless the last
// update left them zero, as every optimizer does), forward,
// loss (scaled by 1/global batch so the cross-rank sum is the mean; label smoothing as the job says), backward with
// bucketed reduction overlapped, the optimizer's update over the flat buffer (model/optimizer.h). The trainer and the data-parallel equivalence test
// both drive this class, so the test proves the code that trains.
//
// Nothing here waits for the device. The loss sums accumulate in device memory and come back by a readback
// queued with the step; phase times come from device clock marks. A step's results are collected later with
// finished(), which lets the device keep working on the next step: the trainer collects step s-1 after queueing
// step s, so its non-finite-loss agreement lags one step (it drains every step before a checkpoint or an
// evaluation, so neither ever sees a step whose loss has not been checked). The exception is fp16's loss scaling
// (train/loss_scaler.h): whether a step updates depends on its reduced gradients, so apply() waits for their
// finiteness check before it queues the update. So does gradient clipping (optimizer.clip_global_norm): the
// scale depends on the reduced gradient's global norm, which the host reads back before it queues the update.
//
// gpu.cuda_graphs (a backend with a StepCapturer): the step's device work is queued at apply(), all of it at once,
// as train/step_graph_plan.h decides: eagerly, captured into the slot's graph, or not at all where the slot's graph
// replays it. begin() and micro_batch() then only note what the step is; the host's share (the slot's bookkeeping,
// the update's numbers, the reducer's rounds) happens every step, replayed or not. Steps run eagerly where the host
// must act inside the step: several micro-batches (each loaded into the one batch buffer in turn), fp16's loss
// scaling, gradient clipping.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "config/job_config.h"
#include "dist/gradient_sync.h"
#include "model/network.h"
#include "model/optimizer.h"
#include "model/weight_average.h"
#include "obs/trace.h"
#include "train/loss_scaler.h"
#include "train/step_graph_plan.h"

namespace ringtrain::train {

// Seconds per phase, summed over steps. allreduce is the exposed wait after backward; allreduce_total the
// reductions' own time (launch to completion), hidden behind backward or not. batch_load is the host's time handing
// each batch to the device (a copy; with data.decode = gpu, the hand-over of a batch decoded ahead), which the
// step's own clock marks do not see.
struct StepTimes {
  double data_wait = 0, forward = 0, backward = 0, allreduce = 0, optimizer = 0, allreduce_total = 0;
  double batch_load = 0;
  StepTimes& operator+=(const StepTimes& o);
};

// What an optimizer step left behind once the device finished it.
struct FinishedStep {
  int64_t step = -1;          // as given to begin()
  model::LossTotals loss;     // over this rank's micro-batches
  int64_t samples = 0;        // this rank's samples
  StepTimes times;            // forward, backward, allreduce (exposed), optimizer; data_wait, batch_load the caller's
  double end_s = 0;           // when the device finished the step's update, on the host clock (util::now_s)
  float loss_scale = 0;       // the loss scale the step ran with (fp16), or 0 where none applies
  bool skipped = false;       // its gradients overflowed: no update (fp16)
  double grad_norm = -1;      // the reduced gradient's global L2 norm before clipping; -1: not measured (no clipping)
};

class StepRunner {
 public:
  // accumulate: micro-batches per step, at most; label_smoothing: train.label_smoothing; loss_scaler: fp16's.
  StepRunner(model::Network& network, dist::GradientSync& sync, model::Optimizer& optimizer, int64_t global_batch,
             int accumulate, double label_smoothing = 0, std::optional<LossScaler> loss_scaler = std::nullopt);

  void begin(int64_t step);  // zero gradients and loss sums for a new optimizer step
  // Forward, loss and backward of one micro-batch; `last` starts the gradient reduction during its backward. With
  // `targets` (count x classes, a mixed batch's) the loss is against them, else against `labels`.
  void micro_batch(const float* images, const int32_t* labels, int count, uint64_t seed, bool last,
                   const float* targets = nullptr);
  // Orders the update after the reduction, then updates the parameters; the optimizer hears the updates applied
  // before this one (Adam's count t).
  void apply(float lr);
  // The updates the optimizer applied before this run, from the checkpoint. It is not the step number: a step fp16
  // skips is no update (as PyTorch's GradScaler leaves Adam's count), and a resume on another world re-plans the
  // epoch's steps while the optimizer's moments go on.
  void continue_after_updates(int64_t updates) { updates_done_ = updates; }
  int64_t updates_done() const { return updates_done_; }
  // The queued steps the device has finished, oldest first, leaving at most `in_flight` of them unfinished;
  // waits (bounded by the reducer's timeout) for the older ones.
  std::vector<FinishedStep> finished(int in_flight);
  int in_flight() const;
  void set_trace(obs::Trace* trace) { trace_ = trace; }  // phases and bucket reductions go there (null: none)
  // gpu.cuda_graphs on several ranks: the collective that sums a value over them, so that every rank captures,
  // replays or runs each step eagerly alike (train/step_graph_plan.h). Unset: this rank's own decisions, as one
  // rank's are.
  void agree_graphs_with(SumOverRanks sum_over_ranks) { sum_over_ranks_ = std::move(sum_over_ranks); }
  // optimizer.clip_global_norm (0: off): before each update the reduced gradient g (of the unscaled loss under fp16)
  // becomes g x min(1, max_norm / (|g| + 1e-6)), |g| its L2 norm over every parameter, as
  // torch.nn.utils.clip_grad_norm_ does; every rank finds the same |g| (GradientReducer::sum_over_slices).
  void clip_gradients_to(double max_norm);
  LossScaler* loss_scaler() { return loss_scaler_ ? &*loss_scaler_ : nullptr; }  // null unless fp16
  // train.ema_decay: `ema` (null: none) takes every update that changed the parameters, once every rank that
  // shares them has written its slice; a step fp16 skips changes nothing, so the average skips it too.
  void average_weights(model::WeightAverage* ema) { ema_ = ema; }
  // gpu.cuda_graphs: why steps run eagerly although the backend captures them, or null when they are captured
  // (or the backend captures nothing). The last step's action is last_action().
  const char* eager_reason() const;
  StepAction last_action() const { return last_action_; }
  const StepActionCounts& action_counts() const { return action_counts_; }  // every step applied so far

 private:
  // One step in flight: its loss sums on the device and their readback, and its clock marks.
  struct Slot {
    int64_t step = -1;
    model::DeviceBuffer totals;
    std::unique_ptr<model::Readback> readback;
    int micro_batches = 0;
    int64_t samples = 0;
    bool queued = false;
    float loss_scale = 0;
    bool skipped = false;
    double grad_norm = -1;
  };
  // A micro-batch noted for a graphed step, queued at apply().
  struct MicroBatch {
    const float* images = nullptr;
    const int32_t* labels = nullptr;
    const float* targets = nullptr;
    int count = 0;
    uint64_t seed = 0;
  };
  static constexpr int kSlots = model::kStepCaptureSlots;  // the step being queued and the one before it
  static constexpr int kGraphWarmupSteps = 3;  // eager steps of one shape before a capture (step_graph_plan.h)
  bool graphed() const { return capturer_ && eager_reason() == nullptr; }
  void queue_micro_batch(Slot& slot, int micro, const MicroBatch& batch, bool last);
  void queue_update(Slot& slot, float lr);
  void run_graphed(Slot& slot, float lr);
  int mark_id(int slot, int mark) const { return slot * marks_per_step_ + mark; }
  FinishedStep collect(Slot& slot, int index);
  // Takes the loss scale out of the reduced gradients; whether they were all finite (waits for the device).
  bool unscale_gradients();
  double clip_gradients();  // returns the norm before clipping (waits for the device)

  model::Network& net_;
  dist::GradientSync& sync_;
  model::Optimizer& optimizer_;
  kernels::LossSettings loss_;
  int accumulate_;
  int marks_per_step_;
  model::DeviceBuffer dlogits_;
  std::array<Slot, kSlots> slots_;
  int current_ = 0;
  uint64_t queued_count_ = 0;  // steps queued so far; slots are used in turn
  bool grads_zero_ = false;    // the last update left the gradients zero, so begin() need not zero them
  int64_t updates_done_ = 0;   // updates the optimizer applied over the job (Adam's t); skipped steps are none
  std::deque<int64_t> unreported_steps_;   // applied, their reductions not yet settled
  std::map<int64_t, double> reduction_s_;  // settled reductions' seconds of steps not yet collected
  std::unique_ptr<model::DeviceClock> clock_;
  obs::Trace* trace_ = nullptr;
  model::WeightAverage* ema_ = nullptr;
  std::optional<LossScaler> loss_scaler_;
  model::DeviceBuffer nonfinite_;  // unscale's flag, and its readback
  std::unique_ptr<model::Readback> nonfinite_readback_;
  double clip_norm_ = 0;           // 0: no clipping
  model::DeviceBuffer squares_;    // the sum of squared gradients clipping reads back
  std::unique_ptr<model::Readback> squares_readback_;
  model::StepCapturer* capturer_ = nullptr;  // gpu.cuda_graphs' (null: none)
  std::optional<StepGraphPlan> graph_plan_;
  SumOverRanks sum_over_ranks_ = [](uint64_t mine) { return mine; };
  MicroBatch pending_;  // a graphed step's micro-batch
  StepAction last_action_ = StepAction::eager;
  StepActionCounts action_counts_;
};

}  // namespace ringtrain::train
