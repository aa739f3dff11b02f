// Owns how a split's global sample range is divided among ranks and mapped onto shard files.
// Pure arithmetic, no HDF5: the sharding tests exercise it for any ranks x shards.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringtrain::io {

struct SampleRange {
  int64_t begin = 0, end = 0;  // [begin, end) in global sample order
  int64_t size() const { return end - begin; }
  bool operator==(const SampleRange&) const = default;
};

// Contiguous, nearly equal parts: the first (total % ranks) ranks get ceil(total/ranks), the rest floor.
SampleRange rank_range(int64_t total, int rank, int ranks);

struct ShardSlice {
  std::size_t shard = 0;      // index into the split's shards
  int64_t begin = 0, end = 0;  // [begin, end) local to that shard
  int64_t size() const { return end - begin; }
};

// The shard pieces that hold `range`, in order; only these files need to be opened by the rank.
std::vector<ShardSlice> slices_for_range(const std::vector<int64_t>& shard_sizes, SampleRange range);

}  // namespace ringtrain::io
