// Owns the check that every rank of a command read the same job: each rank reads the job file itself, so a stale
// node-local copy, or a --set given to one rank alone, would make the ranks run different programs (another
// model, other epochs) and fail later with a misleading diagnosis, or not at all.
#pragma once
#include "config/job_config.h"
#include "dist/world.h"

namespace ringtrain::commands {

// Collective. Throws the same JobFileError (exit 3) on every rank when a rank's job, every key with its final value,
// differs from rank 0's, naming the keys. Where the job file lies may differ, and so may data.train and data.test:
// staging gives each node its own copy of the data (slurm/train.sbatch), and the splits' contents are compared
// where they are opened (data/split_part.h).
void require_same_job(const dist::World& world, const config::JobConfig& job);

}  // namespace ringtrain::commands
