// Owns what every phase of a run on one rank reads: the job, the world, the backend, whether the run resumes,
// and rank 0's voice (the run's log lines come from rank 0 alone).
#pragma once
#include <string>

#include "config/job_config.h"
#include "dist/world.h"
#include "model/backend.h"

namespace ringtrain::train {

// What an elastic launcher tells a relaunched run about the failure that shrank its world (train's
// --failed-node and --seconds-lost), for the membership record in metrics.jsonl.
struct MembershipChange {
  std::string failed_node;    // "": not given
  double seconds_lost = -1;   // < 0: not given

  bool relaunched() const { return !failed_node.empty(); }
};

struct RunContext {
  const config::JobConfig& job;
  dist::World& world;
  model::Backend& backend;
  bool resume = false;
  MembershipChange membership = {};

  bool root() const { return world.is_root(); }
  int ranks() const { return world.size(); }
  void say(const std::string& line) const;  // rank 0: the line on stdout, flushed at once
};

}  // namespace ringtrain::train
