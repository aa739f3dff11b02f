// Owns opening one split for this rank; see split_part.h.
#include "data/split_part.h"

#include <fmt/format.h>

#include "common/error.h"

namespace ringtrain::train {

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
  part.range = io::rank_range(part.split.total_samples(), world.rank(), world.size());
  world.all_succeed([&] { part.reader = std::make_unique<io::ShardReader>(part.split, part.range); });
  return part;
}

}  // namespace ringtrain::train
