// Owns `ringtrain evaluate` on every rank: a split (the job's test split by default) evaluated with a checkpoint
// (the newest of run.dir by default), distributed like training's evaluation (each rank its part, one reduction
// of the sums), so on the ranks that trained it reproduces the run's test_loss and test_acc exactly; plus what
// training does not count: top-5, per-class accuracy and the confusion matrix.
#pragma once
#include <filesystem>

#include "train/run_context.h"
#include "train/start_point.h"

namespace ringtrain::infer {

struct EvaluateOptions {
  std::filesystem::path checkpoint;  // empty: the newest in <run.dir>/checkpoints
  std::filesystem::path data;        // empty: data.test
  std::filesystem::path out;         // empty: no JSON file
  train::Weights weights = train::Weights::params;  // --weights: the parameters or their moving average
};

int evaluate(const train::RunContext& run, const EvaluateOptions& options);  // collective; the exit code

}  // namespace ringtrain::infer
