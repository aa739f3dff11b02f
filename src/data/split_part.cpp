// Owns opening one split for this rank; see split_part.h.
#include "data/split_part.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "common/crc32c.h"
#include "common/error.h"

namespace ringtrain::train {
namespace {

// What every rank must see alike in a split. Ranks reading different files at one path (a stale node-local copy)
// would otherwise train or evaluate on a mixture, with a model sized to other data.
std::string split_summary(const io::SplitIndex& s) {
  const io::DatasetMeta& m = s.meta;
  const std::vector<int64_t> sizes = s.shard_sizes();
  return fmt::format("{} samples in {} shards (sizes CRC-32C {:08x}), {}x{}x{} samples, {} classes, mean [{}], std "
                     "[{}], split id '{}'",
                     s.total_samples(), s.shards.size(), crc32c(sizes.data(), sizes.size() * sizeof(int64_t)),
                     m.shape.channels, m.shape.height, m.shape.width, m.num_classes, fmt::join(m.mean, ", "),
                     fmt::join(m.stddev, ", "), m.split_id);
}

void require_same_split(const dist::World& world, const SplitPart& part) {
  const std::string mine = split_summary(part.split);
  const std::string first = world.broadcast_string(mine);
  world.all_succeed([&] {
    if (mine != first)
      throw DataError(fmt::format("{} '{}' differs between ranks: rank {} sees {}; rank 0 sees {}. Every rank must "
                                  "read the same files (is a node-local copy stale or partial?)",
                                  part.key, part.split.dir.string(), world.rank(), mine, first));
  });
}

}  // namespace

SplitPart open_split_part(const dist::World& world, const std::filesystem::path& dir, const char* key) {
  SplitPart part;
  part.key = key;
  world.all_succeed([&] {
    try {
      part.split = io::open_split(dir);
    } catch (const DataError& e) {
      throw DataError(fmt::format("{} (from {})", e.what(), key));
    }
  });
  if (world.size() > 1) require_same_split(world, part);
  part.range = io::rank_range(part.split.total_samples(), world.rank(), world.size());
  world.all_succeed([&] { part.reader = std::make_unique<io::ShardReader>(part.split, part.range); });
  return part;
}

}  // namespace ringtrain::train
