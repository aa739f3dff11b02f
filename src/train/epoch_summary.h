// Owns what one epoch adds up to: the sums every rank contributes (losses, hits, samples, phase times, the test
// split's hits per class), reduced across ranks in one reduction and read by name; each rank's own step time and
// memory, gathered; and the epoch's line in the log and record in metrics.jsonl, built from them.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "dist/world.h"
#include "obs/run_stats.h"
#include "train/class_hits.h"
#include "train/step_runner.h"

namespace ringtrain::train {

struct Totals {
  double loss_sum = 0, correct = 0, samples = 0;
  double mean_loss() const;
  double accuracy() const;
  void sum_across(const dist::World& world);  // one MPI_Allreduce of every field
};

struct EpochSums {
  Totals train, test;
  StepTimes times;
  ClassHits test_classes;  // per class of the test split; every rank's has the split's class count
  void sum_across(const dist::World& world);  // one MPI_Allreduce of every field
};

// The reduced gradient's global norm over an epoch's clipped steps (optimizer.clip_global_norm), before clipping.
// Every rank measures the same norms, so no reduction is needed.
struct GradNormStats {
  double sum = 0, max = 0;
  int64_t steps = 0;  // 0: clipping off (or every step skipped)
  void add(double norm);
  double mean() const { return steps > 0 ? sum / static_cast<double>(steps) : 0.0; }
};

// One rank's own view of the epoch, gathered from every rank.
struct RankSample {
  double step_s = 0;       // its own work per step (all but the all-reduce wait, which evens out wall-clock steps)
  double peak_rss_mb = 0;
  double device_mb = 0;    // device memory in use (GPU), or 0
  double device_allocated_peak_mb = 0;  // the most its own allocations held on the device (GPU), or 0
};
std::vector<RankSample> gather_samples(const dist::World& world, const RankSample& mine);

// Everything the epoch's line and record say.
struct EpochReport {
  int epoch = 0, epochs = 0, ranks = 0;
  int64_t global_batch = 0, steps = 0, steps_run = 0, per_step = 0;
  double lr = 0;
  EpochSums sums;                 // summed over ranks
  bool evaluated = true;          // the test split was evaluated after this epoch (train.eval_every_epochs)
  // train.ema_decay: the test split evaluated again with the weights' average in place of the parameters (summed
  // over ranks); nothing without an average or an evaluation
  std::optional<Totals> ema_test;
  double samples_per_s = 0;       // over the whole job so far
  double epoch_train_s = 0, eval_s = 0, steady_samples_per_s = 0;
  int timing_warmup_steps = 0;
  double train_flops_per_sample = 0;
  std::vector<RankSample> per_rank;
  obs::StepTimeSpread spread;
  double baseline_rss_mb = 0, memory_needed_mb = 0, memory_planned_mb = 0, arena_mb = 0;
  bool device_is_host = true;     // no device memory figures then
  double device_baseline_mb = 0;
  std::vector<std::string> warnings;
  std::string param_checksum;
  std::string ema_checksum;       // train.ema_decay's average, agreed like param_checksum; "" without one
  float loss_scale = 0;           // fp16: the loss scale at the epoch's end, 0 without loss scaling
  int64_t skipped_steps = 0;      // fp16: steps skipped because their gradients overflowed
  GradNormStats grad_norm;        // clipping: the norms before clipping
  std::optional<StepActionCounts> graph_steps;  // gpu.cuda_graphs: how this rank's steps of the epoch ran
  std::vector<WorstClass> worst_classes;  // of the test split, from sums.test_classes

  // The epoch's own training rate and its model FLOP/s per rank, over the steps this launch ran of it (none: a run
  // resumed from the epoch's last step; 0 then, null in the record).
  double epoch_samples_per_s() const;
  double flops_per_s_per_rank() const;
  bool timed() const { return steps_run > 0 && epoch_train_s > 0; }
  double test_top5() const;                  // of the evaluated test split; needs 5 classes or more
  bool has_top5() const { return evaluated && sums.test_classes.samples.size() >= 5; }
  std::string line() const;                 // "epoch 2/12: train loss ... | ... GFLOP/s per rank | worst: ..."
  nlohmann::ordered_json record() const;    // metrics.jsonl's epoch record
};

}  // namespace ringtrain::train
