// Owns dist.on_shrink: what a --resume on another world size than its checkpoint's does to the batch (and to a
// batch-norm group the new world size does not divide). The elastic
// launchers (slurm/train.sbatch, scripts/elastic_mpirun.sh) relaunch a run on the nodes left after a failure; the
// accumulation steps must be chosen before the data is planned, so this runs first and reads only the checkpoint's
// world. keep_per_rank_batch needs nothing here: the learning rate follows the new global batch by
// optimizer.lr_scaling, as every resume on another world size always did (start_point.cpp says so in the log).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/job_config.h"
#include "dist/world.h"

namespace ringtrain::train {

// keep_global_batch: the micro-batches per optimizer step that make `ranks` x `batch_per_rank` reach
// `global_batch`. Throws Error (exit 3) naming the numbers and the ways out when they do not divide it.
int accumulation_for_global_batch(int64_t global_batch, int batch_per_rank, int ranks);

struct FittedJob {
  config::JobConfig job;  // the job this run trains
  std::vector<std::string> notes;  // what was changed and why, for the log
};

// Collective. `job` with config::fit_sync_batchnorm_group's group (as the device was opened with), and on --resume
// with keep_global_batch onto another world size than the newest checkpoint's, train.accumulate_steps re-chosen to
// keep the checkpoint's global batch. Errors are agreed: every rank throws the same one.
// `relaunched`: an elastic launcher's relaunch (--failed-node), which fits the batch-norm group without --resume too.
FittedJob fit_to_world(const config::JobConfig& job, const dist::World& world, bool resume, bool relaunched = false);

// The batch-norm group fit_to_world's job holds (config::fit_sync_batchnorm_group's).
int fitted_sync_batchnorm_group(const config::JobConfig& job, int ranks, bool resume, bool relaunched);

}  // namespace ringtrain::train
