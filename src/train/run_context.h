// Owns what every phase of a run on one rank reads: the job, the world, the backend, whether the run resumes,
// and rank 0's voice (the run's log lines come from rank 0 alone).
#pragma once
#include <string>

#include "config/job_config.h"
#include "dist/world.h"
#include "model/backend.h"

namespace ringtrain::train {

struct RunContext {
  const config::JobConfig& job;
  dist::World& world;
  model::Backend& backend;
  bool resume = false;

  bool root() const { return world.is_root(); }
  int ranks() const { return world.size(); }
  void say(const std::string& line) const;  // rank 0: the line on stdout, flushed at once
};

}  // namespace ringtrain::train
