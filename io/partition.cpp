// Owns the rank/shard arithmetic: which global samples a rank owns and which shard pieces hold them.
#include "io/partition.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "common/error.h"

namespace ringtrain::io {

SampleRange rank_range(int64_t total, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks || total < 0)
    throw Error(ExitCode::internal,
                fmt::format("rank_range: rank {} of {} ranks over {} samples is not a valid partition", rank, ranks,
                            total));
  const int64_t base = total / ranks;
  const int64_t extra = total % ranks;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

std::vector<ShardSlice> slices_for_range(const std::vector<int64_t>& shard_sizes, SampleRange range) {
  const int64_t total = std::accumulate(shard_sizes.begin(), shard_sizes.end(), int64_t{0});
  if (range.begin < 0 || range.end < range.begin || range.end > total)
    throw Error(ExitCode::internal, fmt::format("slices_for_range: range [{}, {}) is outside the split's {} samples",
                                                range.begin, range.end, total));
  std::vector<ShardSlice> slices;
  int64_t shard_begin = 0;
  for (std::size_t shard = 0; shard < shard_sizes.size() && shard_begin < range.end; ++shard) {
    const int64_t shard_end = shard_begin + shard_sizes[shard];
    const int64_t begin = std::max(range.begin, shard_begin);
    const int64_t end = std::min(range.end, shard_end);
    if (begin < end) slices.push_back({shard, begin - shard_begin, end - shard_begin});
    shard_begin = shard_end;
  }
  return slices;
}

}  // namespace ringtrain::io
