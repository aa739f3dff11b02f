// Owns the comparison of the ranks' jobs; see same_job.h.
#include "commands/same_job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "config/job_difference.h"

namespace ringtrain::commands {

void require_same_job(const dist::World& world, const config::JobConfig& job) {
  if (world.size() == 1) return;
  const std::string first = world.broadcast_string(job.resolved_toml);
  world.all_succeed([&] {
    std::vector<std::string> keys;
    for (const config::JobDifference& d : config::job_differences(first, job.resolved_toml))
      if (d.key != "data.train" && d.key != "data.test")
        keys.push_back(fmt::format("{} = {} (rank 0: {})", d.key, d.now, d.was));
    if (!keys.empty())
      throw JobFileError(fmt::format("the job differs between ranks: rank {} read '{}' with {}. Every rank must read "
                                     "the same job file with the same --set options (is a node-local copy of it "
                                     "stale?)",
                                     world.rank(), job.source.string(), fmt::join(keys, ", ")));
  });
}

}  // namespace ringtrain::commands
