// Owns the comparison of the ranks' jobs; see same_job.h.
#include "commands/same_job.h"

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

#include "common/crc32c.h"
#include "common/error.h"

namespace ringtrain::commands {
namespace {

// The resolved keys without their first line, which names the file read: a job staged to another path on each node
// is the same job.
uint32_t keys_crc(const config::JobConfig& job) {
  std::string_view keys = job.resolved_toml;
  if (const auto first_line = keys.find('\n'); first_line != std::string_view::npos) keys.remove_prefix(first_line + 1);
  return crc32c(keys.data(), keys.size());
}

}  // namespace

void require_same_job(const dist::World& world, const config::JobConfig& job) {
  if (world.size() == 1) return;
  const uint32_t mine = keys_crc(job);
  uint32_t first = mine;
  world.broadcast(&first, sizeof first);
  world.all_succeed([&] {
    if (mine != first)
      throw JobFileError(fmt::format("the job differs between ranks: rank {} read '{}' as keys of CRC-32C {:08x}, "
                                     "rank 0 as {:08x}. Every rank must read the same job file with the same --set "
                                     "options (is a node-local copy of it stale?)",
                                     world.rank(), job.source.string(), mine, first));
  });
}

}  // namespace ringtrain::commands
