// Owns where a run starts. A fresh start: rank 0 initialises the parameters from the seed and broadcasts them,
// so every rank starts bit-identical whatever the rank count. --resume: rank 0 reads the newest checkpoint
// (run.dir may be visible to it alone), checks that it belongs to this model and this run, and sends its
// state to every rank. On the world size, step count and global batch it was written with, the run continues
// exactly where it stopped (bit-identical to an uninterrupted run on the CPU path); otherwise at the start of
// its epoch, since a partial epoch cannot be carried over to another partition of the data.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/network.h"
#include "train/data_plan.h"
#include "train/lr_schedule.h"
#include "train/run_context.h"

namespace ringtrain::train {

struct StartPoint {
  int epoch = 0;           // the next epoch to run (0-based); also how many the checkpoint holds
  int64_t step = 0;        // the next step within it
  int64_t global_step = 0; // optimizer steps done before this run's first
  double train_time_s = 0, train_samples = 0;  // carried over, for samples/s over the whole job
  std::string resumed_from;                    // the checkpoint, or "" for a fresh start
  std::vector<std::string> notes;              // what the run header says about the resume
  int64_t first_micro_batch(const EpochPlan& plan) const { return (int64_t{epoch} * plan.steps + step) * plan.accumulate; }
};

// Collective. Loads the network's state and returns where to continue. Throws CheckpointError (agreed) for
// --resume without a checkpoint, a checkpoint of another model or run, or a damaged one.
StartPoint start_run(const RunContext& run, model::Network& net, const EpochPlan& plan,
                     const LearningRateSchedule& lr);

}  // namespace ringtrain::train
