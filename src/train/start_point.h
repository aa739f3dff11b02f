// Owns where a run starts. A fresh start: rank 0 initialises the parameters from the seed and broadcasts them,
// so every rank starts bit-identical whatever the rank count. --resume: rank 0 reads the newest checkpoint
// (run.dir may be visible to it alone), checks that it belongs to this model and this run, and sends its
// state to every rank. On the world size, step count and global batch it was written with, the run continues
// exactly where it stopped (bit-identical to an uninterrupted run on the CPU path); otherwise at the start of
// its epoch, since a partial epoch cannot be carried over to another partition of the data.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/data_plan.h"
#include "io/checkpoint_file.h"
#include "model/network.h"
#include "model/optimizer.h"
#include "train/loss_scaler.h"
#include "train/lr_schedule.h"
#include "train/run_context.h"

namespace ringtrain::train {

// Where a checkpoint stopped and what it was written with; sent to every rank as bytes, read by name.
struct CheckpointPosition {
  int64_t epoch = 0, step_in_epoch = 0, global_step = 0, steps_per_epoch = 0, ranks = 0, global_batch = 0,
          state_count = 0;
  double train_time_s = 0, train_samples = 0;
  LossScaleState loss_scale;  // fp16's, where the checkpoint has one
  int64_t ema_count = 0;      // values of the parameters' moving average it holds (0: none)
  io::EpochTrainSoFar epoch_train;  // the interrupted epoch's training totals over every rank
  uint64_t seed = 0;                // train.seed of the run that wrote it
  int64_t optimizer_updates = 0;    // the updates its optimizer had applied (Adam's count t)
};

struct RestoredCheckpoint {
  std::string path;
  CheckpointPosition position;
  std::vector<float> ema_params;  // its parameters' moving average, on every rank; empty: none
  std::string job_changes;        // rank 0: the keys this job changed from the checkpoint's job ("" on other ranks)
  // rank 0: that the checkpoint's model was trained for samples of another shape than this network takes ("": the
  // same, unknown (an older file), or another rank)
  std::string other_sample_shape;
};

// A note that the checkpoint's model was made for samples of another shape than `input` ("": the same, or unknown in
// an older file). A model that ends in global pooling runs at any sample size, so another shape is no refusal:
// evaluating at a higher resolution than training (FFCV's recipe) or resuming at another (progressive resizing) are
// choices. Said aloud, since by mistake (a split prepared at --size 256 for a 224 model) it changes the numbers
// without an error.
std::string other_sample_shape_note(const io::CheckpointData& checkpoint, const std::string& path,
                                    const model::Shape& input);

// Which weights a checkpoint's model runs with (evaluate, predict, export --weights): its parameters, or their
// moving average (train.ema_decay).
enum class Weights { params, ema };

// "params" or "ema" (the command line's --weights) to Weights.
Weights weights_named(const std::string& name);

// Puts the checkpoint's moving average in place of its parameters when `weights` asks for it. Throws Error
// (exit 3, as for a job that asks for what cannot be) naming `path` when the checkpoint holds none.
void choose_weights(io::CheckpointData& checkpoint, const std::filesystem::path& path, Weights weights);

// Throws CheckpointError naming the first parameter tensor where `checkpoint` (read from `path`) and `net` differ,
// and the job file and data to use instead (`resuming`: the job file it was written by).
void refuse_another_model(const io::CheckpointData& checkpoint, const std::filesystem::path& path,
                          const model::Network& net, bool resuming);

// Collective. Loads the checkpoint at `path` into `net` (parameters, running statistics: the rows' mean, or this
// rank's row where a run resumes on the world size it was written with) and, unless it is null (evaluation), into
// `optimizer` (its state, which must be the same optimizer's; a non-null optimizer is what marks a resume). An empty `path` takes the newest checkpoint in <run.dir>/checkpoints, which must
// belong to the run run.dir holds. Throws CheckpointError (agreed) for no checkpoint, another model's, run's or
// optimizer's, or a damaged one.
// `weights`: which of the checkpoint's weights become the network's parameters (choose_weights).
RestoredCheckpoint restore_checkpoint(const RunContext& run, model::Network& net, model::Optimizer* optimizer,
                                      const std::filesystem::path& path, Weights weights = Weights::params);

struct StartPoint {
  int epoch = 0;           // the next epoch to run (0-based); also how many the checkpoint holds
  int64_t step = 0;        // the next step within it
  int64_t global_step = 0; // optimizer steps done before this run's first
  int64_t optimizer_updates = 0;  // updates the optimizer applied before this run's first step (Adam's count t)
  double train_time_s = 0, train_samples = 0;  // carried over, for samples/s over the whole job
  std::string resumed_from;                    // the checkpoint, or "" for a fresh start
  LossScaleState loss_scale;                   // fp16's loss scale from the checkpoint (scale 0: none)
  std::vector<float> ema_params;               // the checkpoint's moving average of the parameters; empty: none
  std::vector<std::string> notes;              // what the run header says about the resume
  CheckpointPosition from;                     // where the checkpoint stopped (ranks 0: a fresh start)
  io::EpochTrainSoFar epoch_train;             // the totals the epoch `epoch` had before `step`, over every rank
  int64_t first_micro_batch(const EpochPlan& plan) const { return (int64_t{epoch} * plan.steps + step) * plan.accumulate; }
};

// Collective. Loads the network's and the optimizer's state and returns where to continue. Throws CheckpointError
// (agreed) for --resume without a checkpoint, a checkpoint of another model, run or optimizer, or a damaged one.
StartPoint start_run(const RunContext& run, model::Network& net, model::Optimizer& optimizer, const EpochPlan& plan,
                     const LearningRateSchedule& lr);

}  // namespace ringtrain::train
