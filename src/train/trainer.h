// Owns one training job on one rank: data partitions, the agreed step count, initialisation and broadcast
// of parameters, the step loop (data wait / forward / backward / all-reduce / optimizer), evaluation after
// each epoch, and the records a person reads and plots.
#pragma once
#include "config/job_config.h"
#include "dist/gradient_reducer.h"
#include "dist/watchdog.h"
#include "dist/world.h"
#include "model/backend.h"
#include "train/run_context.h"

namespace ringtrain::train {

class Trainer {
 public:
  // `watchdog` times the run's collectives (dist/collective_watch.h attaches it to the World's from start-up on).
  Trainer(const config::JobConfig& job, dist::World& world, model::Backend& backend, dist::GradientReducer& reducer,
          dist::Watchdog& watchdog, bool resume = false, MembershipChange membership = {});
  // Setup errors are agreed across ranks (every rank throws the same Error); errors inside the step loop
  // are thrown on the rank that saw them, and main() ends the whole job. Returns the exit code: 0, or
  // ExitCode::preempted after a stop signal (a checkpoint was written).
  int run();

 private:
  const config::JobConfig& job_;
  dist::World& world_;
  model::Backend& backend_;
  dist::GradientReducer& reducer_;
  dist::Watchdog& watchdog_;
  bool resume_;
  MembershipChange membership_;
};

// The batch-norm group the device is opened with: the one the trainer fits the job to on this world
// (dist.sync_batchnorm_group, fitted on a resume or an elastic relaunch onto a world it does not divide).
int device_sync_batchnorm_group(const config::JobConfig& job, int ranks, bool resume,
                                const MembershipChange& membership);

}  // namespace ringtrain::train
