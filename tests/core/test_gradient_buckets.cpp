// Proves bucket formation (from the end of the buffer, tensors never split) and readiness counting.
#include <gtest/gtest.h>

#include "dist/gradient_buckets.h"

using ringtrain::dist::GradientBuckets;

TEST(GradientBuckets, FormedFromTheEndWithoutSplittingTensors) {
  // tensors of 10, 20, 5, 5, 40 floats; bucket size 25
  const GradientBuckets b({{0, 10}, {10, 20}, {30, 5}, {35, 5}, {40, 40}}, 25);
  const auto& k = b.buckets();
  ASSERT_EQ(k.size(), 4u);
  EXPECT_EQ(k[0].begin, 40);  // the 40-float tensor alone: larger than a bucket
  EXPECT_EQ(k[0].count, 40);
  EXPECT_EQ(k[1].begin, 30);  // 5 + 5; adding 20 would pass 25
  EXPECT_EQ(k[1].count, 10);
  EXPECT_EQ(k[2].begin, 10);
  EXPECT_EQ(k[2].count, 20);
  EXPECT_EQ(k[3].begin, 0);
  EXPECT_EQ(k[3].count, 10);
  int64_t covered = 0;
  for (const auto& x : k) covered += x.count;
  EXPECT_EQ(covered, 80);
}

TEST(GradientBuckets, ReadyOnlyWhenEveryFloatArrived) {
  GradientBuckets b({{0, 10}, {10, 20}, {30, 5}, {35, 5}, {40, 40}}, 25);
  EXPECT_TRUE(b.mark_ready(40, 40) == std::vector<int>{0});
  EXPECT_TRUE(b.mark_ready(35, 5).empty());
  EXPECT_TRUE(b.mark_ready(30, 5) == std::vector<int>{1});
  EXPECT_FALSE(b.all_ready());
  // one leaf spanning two buckets completes both at once
  EXPECT_TRUE((b.mark_ready(0, 30) == std::vector<int>{2, 3}));
  EXPECT_TRUE(b.all_ready());
  b.reset();
  EXPECT_FALSE(b.all_ready());
  EXPECT_TRUE(b.mark_ready(40, 40) == std::vector<int>{0});
}

TEST(GradientBuckets, OneBucketWhenEverythingFits) {
  GradientBuckets b({{0, 3}, {3, 4}}, 1 << 20);
  ASSERT_EQ(b.buckets().size(), 1u);
  EXPECT_EQ(b.buckets()[0].begin, 0);
  EXPECT_EQ(b.buckets()[0].count, 7);
  EXPECT_TRUE(b.mark_ready(3, 4).empty());
  EXPECT_TRUE(b.mark_ready(0, 3) == std::vector<int>{0});
}
