// Owns open_split: turning a split folder into a checked SplitIndex, or one DataError that says which file
// is wrong and how to get a valid split back.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <numeric>

#include "common/error.h"
#include "common/path_probe.h"
#include "io/dataset_meta.h"
#include "io/hdf5_lock.h"
#include "io/shard_header.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

int64_t SplitIndex::total_samples() const {
  return std::accumulate(shards.begin(), shards.end(), int64_t{0},
                         [](int64_t sum, const ShardInfo& shard) { return sum + shard.samples; });
}

std::vector<int64_t> SplitIndex::shard_sizes() const {
  std::vector<int64_t> sizes;
  sizes.reserve(shards.size());
  for (const ShardInfo& shard : shards) sizes.push_back(shard.samples);
  return sizes;
}

SplitIndex open_split(const fs::path& dir) {
  const PathProbe probe = probe_path(dir);
  if (probe.kind == PathProbe::Kind::missing)
    throw DataError(fmt::format("split folder '{}' does not exist; create it with `ringtrain prepare fashion-mnist "
                                "--out DIR` (or `prepare synthetic`) and point at DIR/train or DIR/test",
                                dir.string()));
  if (probe.kind == PathProbe::Kind::unreachable)
    throw DataError(fmt::format("split folder '{}' {}; check the path and its permissions", dir.string(),
                                probe.describe()));
  if (probe.kind != PathProbe::Kind::directory)
    throw DataError(fmt::format("split folder '{}' is not a folder; point at the train/ or test/ folder that "
                                "`ringtrain prepare` wrote",
                                dir.string()));
  const std::vector<fs::path> files = detail::list_shard_files(dir);
  if (files.empty())
    throw DataError(fmt::format("split folder '{}' holds no {}*.h5 files; {}", dir.string(),
                                shard_names::file_prefix, detail::rewrite_advice));

  const Hdf5Lock lock;
  std::vector<detail::ShardHeader> headers;
  headers.reserve(files.size());
  for (const fs::path& file : files) {
    detail::ShardHeader header = detail::read_shard_header(file);
    if (header.unreadable)  // a permission to fix, not a split to rewrite
      throw DataError(fmt::format("shard '{}' {}", file.string(), fmt::join(header.problems, "; ")));
    if (!header.problems.empty())
      throw DataError(fmt::format("shard '{}' {}; {}", file.string(), fmt::join(header.problems, "; "),
                                  detail::rewrite_advice));
    headers.push_back(std::move(header));
  }
  const std::vector<std::string> problems = detail::check_split_consistency(headers);
  if (!problems.empty())
    throw DataError(fmt::format("split folder '{}' is inconsistent: {}; {}", dir.string(), fmt::join(problems, "; "),
                                detail::rewrite_advice));

  SplitIndex split;
  split.dir = dir;
  split.meta = detail::meta_of(headers.front());
  for (const detail::ShardHeader& header : headers) split.shards.push_back({header.path, header.image_count});
  return split;
}

}  // namespace ringtrain::io
