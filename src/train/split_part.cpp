// Owns opening one split for this rank; see split_part.h.
#include "train/split_part.h"

#include <fmt/format.h>

#include "common/error.h"

namespace ringtrain::train {

SplitPart open_split_part(const RunContext& run, const std::filesystem::path& dir, const char* key) {
  SplitPart part;
  part.key = key;
  run.world.all_succeed([&] {
    try {
      part.split = io::open_split(dir);
    } catch (const DataError& e) {
      throw DataError(fmt::format("{} (from {})", e.what(), key));
    }
  });
  part.range = io::rank_range(part.split.total_samples(), run.world.rank(), run.ranks());
  run.world.all_succeed([&] { part.reader = std::make_unique<io::ShardReader>(part.split, part.range); });
  return part;
}

}  // namespace ringtrain::train
