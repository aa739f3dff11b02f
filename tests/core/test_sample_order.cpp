// Proves the per-epoch order: a permutation, reproducible from (seed, epoch, rank), different across epochs
// and ranks, identity without shuffle.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "data/sample_order.h"

using ringtrain::train::epoch_order;

TEST(SampleOrder, IsAPermutationAndReproducible) {
  const auto a = epoch_order(1001, 7, 3, 1, true);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expect(1001);
  std::iota(expect.begin(), expect.end(), 0);
  EXPECT_EQ(sorted, expect);
  EXPECT_EQ(a, epoch_order(1001, 7, 3, 1, true));
  EXPECT_NE(a, expect);
}

TEST(SampleOrder, DiffersAcrossEpochsRanksAndSeeds) {
  const auto base = epoch_order(500, 7, 0, 0, true);
  EXPECT_NE(base, epoch_order(500, 7, 1, 0, true));
  EXPECT_NE(base, epoch_order(500, 7, 0, 1, true));
  EXPECT_NE(base, epoch_order(500, 8, 0, 0, true));
}

TEST(SampleOrder, IdentityWithoutShuffle) {
  const auto a = epoch_order(10, 7, 3, 1, false);
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(a[static_cast<size_t>(i)], i);
  EXPECT_TRUE(epoch_order(0, 1, 0, 0, true).empty());
}
