// Proves the learning-rate arithmetic: linear scaling, warm-up, cosine decay.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "train/lr_schedule.h"

using ringtrain::config::JobConfig;
using ringtrain::config::LrSchedule;
using ringtrain::train::LearningRateSchedule;

namespace {
JobConfig::Optimizer opt(double base_lr, int base_batch, double warmup, LrSchedule kind, double min_lr = 0) {
  JobConfig::Optimizer o;
  o.base_lr = base_lr;
  o.base_batch = base_batch;
  o.warmup_epochs = warmup;
  o.schedule = kind;
  o.min_lr = min_lr;
  return o;
}
}  // namespace

TEST(LearningRate, ScalesLinearlyWithGlobalBatch) {
  // Goyal et al.: 0.1 at 256 -> 0.4 at 1024.
  const LearningRateSchedule s(opt(0.1, 256, 0, LrSchedule::constant), 1024, 100, 3);
  EXPECT_DOUBLE_EQ(s.peak(), 0.4);
  EXPECT_DOUBLE_EQ(s.at(0), 0.4);
  EXPECT_DOUBLE_EQ(s.at(299), 0.4);
}

TEST(LearningRate, SquareRootAndNoScalingFollowTheirRule) {
  auto o = opt(0.1, 256, 0, LrSchedule::constant);
  o.lr_scaling = ringtrain::config::LrScaling::sqrt;
  const LearningRateSchedule root(o, 1024, 100, 3);
  EXPECT_DOUBLE_EQ(root.peak(), 0.2);  // 0.1 x sqrt(1024 / 256)
  EXPECT_EQ(root.arithmetic(o, 1024), "0.1 x sqrt(1024/256) = 0.2 (square-root scaling)");
  o.lr_scaling = ringtrain::config::LrScaling::none;
  const LearningRateSchedule fixed(o, 1024, 100, 3);
  EXPECT_DOUBLE_EQ(fixed.peak(), 0.1);
  EXPECT_EQ(fixed.arithmetic(o, 1024), "0.1 (no scaling with the global batch)");
  o.lr_scaling = ringtrain::config::LrScaling::linear;
  EXPECT_EQ(LearningRateSchedule(o, 1024, 100, 3).arithmetic(o, 1024), "0.1 x 1024/256 = 0.4 (linear scaling)");
}

TEST(LearningRate, WarmupClimbsLinearlyFromBaseLr) {
  const LearningRateSchedule s(opt(0.1, 256, 2, LrSchedule::constant), 1024, 50, 10);
  EXPECT_EQ(s.warmup_steps(), 100);
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_NEAR(s.at(50), 0.25, 1e-12);
  EXPECT_NEAR(s.at(99), 0.1 + 0.3 * 99 / 100, 1e-12);
  EXPECT_DOUBLE_EQ(s.at(100), 0.4);
}

TEST(LearningRate, CosineDecaysToMinAfterWarmup) {
  const LearningRateSchedule s(opt(0.2, 128, 1, LrSchedule::cosine, 0.001), 128, 100, 5);
  EXPECT_DOUBLE_EQ(s.at(100), 0.2);  // end of warm-up: peak
  const double mid = 0.001 + (0.2 - 0.001) * 0.5 * (1 + std::cos(std::numbers::pi * 0.5));
  EXPECT_NEAR(s.at(300), mid, 1e-12);
  EXPECT_NEAR(s.at(500), 0.001, 1e-12);
  for (int64_t t = 101; t < 500; ++t) EXPECT_LE(s.at(t), s.at(t - 1));
}

TEST(LearningRate, SmallerGlobalBatchHasNoUpwardWarmup) {
  const LearningRateSchedule s(opt(0.1, 256, 1, LrSchedule::constant), 64, 10, 2);
  EXPECT_DOUBLE_EQ(s.peak(), 0.025);
  EXPECT_DOUBLE_EQ(s.at(0), 0.025);
  EXPECT_DOUBLE_EQ(s.at(5), 0.025);
}
