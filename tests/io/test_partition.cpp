// Proves the partition arithmetic for every ranks x shards combination the trainer may meet, and that real
// ShardReaders built from it read every sample of a split exactly once while opening only their own shards.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "io/partition.h"
#include "io/shard_reader.h"
#include "io_test_support.h"

namespace ringtrain::io {
namespace {

namespace fs = std::filesystem;

using testing::IoTest;

// Deliberately uneven: sizes from 1 to 17, so some shards are far smaller than a rank's share, and one
// case is the 8-shards-on-3-ranks split of 103 samples.
std::vector<int64_t> uneven_sizes(int shards) {
  if (shards == 8) return {30, 1, 2, 17, 9, 25, 4, 15};  // 103 samples
  std::vector<int64_t> sizes;
  for (int k = 0; k < shards; ++k) sizes.push_back(1 + (k * 7 + 3) % 17);
  return sizes;
}

void check_slices(const std::vector<int64_t>& sizes, SampleRange range) {
  const std::vector<ShardSlice> slices = slices_for_range(sizes, range);
  std::vector<int64_t> shard_start(sizes.size() + 1, 0);
  std::partial_sum(sizes.begin(), sizes.end(), shard_start.begin() + 1);

  int64_t next = range.begin;  // the slices, in order, must cover the range contiguously
  std::set<std::size_t> touched;
  for (const ShardSlice& slice : slices) {
    ASSERT_LT(slice.shard, sizes.size());
    EXPECT_GT(slice.size(), 0) << "an empty slice would open a file for nothing";
    EXPECT_GE(slice.begin, 0);
    EXPECT_LE(slice.end, sizes[slice.shard]);
    EXPECT_EQ(shard_start[slice.shard] + slice.begin, next);
    EXPECT_TRUE(touched.insert(slice.shard).second) << "shard " << slice.shard << " appears twice";
    next = shard_start[slice.shard] + slice.end;
  }
  EXPECT_EQ(next, range.end);

  std::set<std::size_t> needed;  // brute force: every shard holding at least one sample of the range
  for (std::size_t k = 0; k < sizes.size(); ++k)
    if (std::max(range.begin, shard_start[k]) < std::min(range.end, shard_start[k + 1])) needed.insert(k);
  EXPECT_EQ(touched, needed);
}

TEST(Partition, RankRangesTileTheSplitNearlyEqually) {
  for (const int64_t total : {int64_t{0}, int64_t{1}, int64_t{4}, int64_t{7}, int64_t{103}, int64_t{60000}}) {
    for (int ranks = 1; ranks <= 5; ++ranks) {
      int64_t next = 0, smallest = total, largest = 0;
      for (int rank = 0; rank < ranks; ++rank) {
        const SampleRange range = rank_range(total, rank, ranks);
        EXPECT_EQ(range.begin, next) << "total " << total << " rank " << rank << "/" << ranks;
        EXPECT_EQ(range.size(), total / ranks + (rank < total % ranks ? 1 : 0));
        smallest = std::min(smallest, range.size());
        largest = std::max(largest, range.size());
        next = range.end;
      }
      EXPECT_EQ(next, total);
      EXPECT_LE(largest - smallest, 1);
    }
  }
}

TEST(Partition, RejectsInvalidRanks) {
  EXPECT_THROW(rank_range(10, 3, 3), Error);
  EXPECT_THROW(rank_range(10, -1, 3), Error);
  EXPECT_THROW(rank_range(10, 0, 0), Error);
  EXPECT_THROW(slices_for_range({5, 5}, {0, 11}), Error);
}

TEST(Partition, SlicesCoverEachRankRangeAndOnlyNeededShards) {
  for (int shards = 1; shards <= 9; ++shards) {
    const std::vector<int64_t> sizes = uneven_sizes(shards);
    const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
    for (int ranks = 1; ranks <= 5; ++ranks)
      for (int rank = 0; rank < ranks; ++rank) {
        SCOPED_TRACE(::testing::Message() << shards << " shards, rank " << rank << "/" << ranks);
        check_slices(sizes, rank_range(total, rank, ranks));
      }
  }
  // Ranges inside one shard, at shard edges, and empty; with an empty shard in the middle.
  const std::vector<int64_t> with_empty{5, 0, 5};
  check_slices(with_empty, {5, 10});
  check_slices(with_empty, {4, 6});
  check_slices(with_empty, {5, 5});
  EXPECT_TRUE(slices_for_range(with_empty, {3, 3}).empty());
}

TEST(Partition, EightShardsOnThreeRanksOf103) {
  const std::vector<int64_t> sizes = uneven_sizes(8);
  ASSERT_EQ(std::accumulate(sizes.begin(), sizes.end(), int64_t{0}), 103);
  EXPECT_EQ(rank_range(103, 0, 3), (SampleRange{0, 35}));
  EXPECT_EQ(rank_range(103, 1, 3), (SampleRange{35, 69}));
  EXPECT_EQ(rank_range(103, 2, 3), (SampleRange{69, 103}));
  // Shard starts: 0 30 31 33 50 59 84 88. Rank 1 owns [35, 69): the tail of shard 3, shard 4, the head of
  // shard 5; the tiny shards 1 and 2 lie wholly in rank 0's range.
  const auto slices = slices_for_range(sizes, {35, 69});
  ASSERT_EQ(slices.size(), 3u);
  EXPECT_EQ(slices[0].shard, 3u);
  EXPECT_EQ(slices[0].begin, 2);
  EXPECT_EQ(slices[0].end, 17);
  EXPECT_EQ(slices[1].shard, 4u);
  EXPECT_EQ(slices[1].size(), 9);
  EXPECT_EQ(slices[2].shard, 5u);
  EXPECT_EQ(slices[2].begin, 0);
  EXPECT_EQ(slices[2].end, 10);
  EXPECT_EQ(slices_for_range(sizes, rank_range(103, 0, 3)).size(), 4u);  // shards 0-3
}

class ShardedReading : public IoTest {};

// Real files, real readers: the union over ranks of what each reads is the split, each sample once.
TEST_F(ShardedReading, EveryRankReadsItsSamplesAndOpensOnlyItsShards) {
  const SampleShape shape{1, 2, 3};
  for (int shards = 1; shards <= 9; ++shards) {
    const std::vector<int64_t> sizes = uneven_sizes(shards);
    const fs::path split_dir = dir() / ("split" + std::to_string(shards));
    testing::write_raw_split(split_dir, sizes, shape, 7);
    const SplitIndex split = open_split(split_dir);
    ASSERT_EQ(split.shard_sizes(), sizes);
    const int64_t total = split.total_samples();
    std::vector<int64_t> shard_start(sizes.size() + 1, 0);
    std::partial_sum(sizes.begin(), sizes.end(), shard_start.begin() + 1);

    for (int ranks = 1; ranks <= 5; ++ranks) {
      std::vector<int> times_read(static_cast<std::size_t>(total), 0);
      for (int rank = 0; rank < ranks; ++rank) {
        SCOPED_TRACE(::testing::Message() << shards << " shards, rank " << rank << "/" << ranks);
        const SampleRange range = rank_range(total, rank, ranks);
        ShardReader reader(split, range);
        ASSERT_EQ(reader.size(), range.size());

        std::vector<fs::path> expected_files;
        for (std::size_t k = 0; k < sizes.size(); ++k)
          if (std::max(range.begin, shard_start[k]) < std::min(range.end, shard_start[k + 1]))
            expected_files.push_back(split.shards[k].path);
        EXPECT_EQ(reader.opened_files(), expected_files);

        std::vector<int64_t> indices(static_cast<std::size_t>(range.size()));
        std::iota(indices.begin(), indices.end(), 0);
        std::vector<uint8_t> images(indices.size() * static_cast<std::size_t>(shape.elements()));
        std::vector<int32_t> labels(indices.size());
        reader.read(indices, images, labels);
        for (std::size_t i = 0; i < indices.size(); ++i) {
          const int64_t g = testing::signature_of(
              std::span<const uint8_t>(images).subspan(i * static_cast<std::size_t>(shape.elements())));
          ASSERT_GE(g, 0);
          ASSERT_LT(g, total);
          EXPECT_EQ(g, range.begin + static_cast<int64_t>(i)) << "partition order is global order";
          EXPECT_EQ(labels[i], g % 7);
          ++times_read[static_cast<std::size_t>(g)];
        }
      }
      EXPECT_TRUE(std::all_of(times_read.begin(), times_read.end(), [](int n) { return n == 1; }))
          << shards << " shards on " << ranks << " ranks: some sample read never or twice";
    }
  }
}

}  // namespace
}  // namespace ringtrain::io
