// Owns the check that every rank of a command read the same job: each rank reads the job file itself, so a stale
// node-local copy, or a --set given to one rank alone, would make the ranks run different programs (another
// model, other epochs) and fail later with a misleading diagnosis, or not at all.
#pragma once
#include "config/job_config.h"
#include "dist/world.h"

namespace ringtrain::commands {

// Collective. Throws the same JobFileError (exit 3) on every rank when a rank's keys, every key with its final
// value, are not rank 0's; where the job file lies may differ.
void require_same_job(const dist::World& world, const config::JobConfig& job);

}  // namespace ringtrain::commands
