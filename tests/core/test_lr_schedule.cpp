// Proves the learning-rate arithmetic: linear scaling, warm-up, and each decay (cosine, steps, poly) against its
// formula written out here.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "common/error.h"
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

// A warm-up of 5 epochs in a 3-epoch run keeps the slope asked (PyTorch's LinearLR with total_iters past the end):
// it ends at 3/5 of the climb, and a resume with more epochs goes on from there.
TEST(LearningRate, AWarmupLongerThanTheRunKeepsItsSlope) {
  const LearningRateSchedule short_run(opt(0.1, 256, 5, LrSchedule::cosine), 512, 50, 3);
  const LearningRateSchedule resumed(opt(0.1, 256, 5, LrSchedule::cosine), 512, 50, 90);
  for (const int64_t step : {0, 75, 149}) {
    EXPECT_NEAR(short_run.at(step), 0.1 + 0.1 * static_cast<double>(step) / 250, 1e-15) << step;
    EXPECT_EQ(short_run.at(step), resumed.at(step)) << step;
  }
  EXPECT_DOUBLE_EQ(resumed.at(250), 0.2);
}

// optimizer.warmup_start = "zero": MLPerf's LARS reference, rescaled_lr x step / warmup_steps, so the first step's
// rate is 0; it climbs also where the global batch is the base batch (Goyal's would have nothing to climb).
TEST(LearningRate, WarmupFromZeroClimbsAsMlperfsLarsReference) {
  auto o = opt(0.1, 256, 2, LrSchedule::constant);
  o.warmup_start = ringtrain::config::WarmupStart::zero;
  const LearningRateSchedule s(o, 1024, 50, 10);
  EXPECT_DOUBLE_EQ(s.at(0), 0.0);
  EXPECT_NEAR(s.at(50), 0.4 * 50 / 100, 1e-12);
  EXPECT_NEAR(s.at(99), 0.4 * 99 / 100, 1e-12);
  EXPECT_DOUBLE_EQ(s.at(100), 0.4);
  const LearningRateSchedule same_batch(o, 256, 50, 10);
  EXPECT_TRUE(same_batch.warmup_climbs());
  EXPECT_NEAR(same_batch.at(25), 0.1 / 4, 1e-12);
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

// PyTorch's MultiStepLR: lr = peak x gamma^(number of milestones <= epoch), the milestones counted from the job's
// first epoch (Goyal et al.: 5 warm-up epochs, then x 0.1 at epochs 30, 60 and 80).
TEST(LearningRate, StepsMultiplyByTheDecayFactorAtEachMilestone) {
  auto o = opt(0.1, 256, 5, LrSchedule::steps);
  o.milestones = {30, 60, 80};
  o.decay_factor = 0.1;
  const int64_t per_epoch = 10;
  const LearningRateSchedule s(o, 1024, per_epoch, 90);
  EXPECT_EQ(s.milestone_steps(), (std::vector<int64_t>{300, 600, 800}));
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);  // warm-up as before
  for (int64_t step = 50; step < 900; ++step) {
    const double epoch = static_cast<double>(step) / per_epoch;
    const int passed = (epoch >= 30) + (epoch >= 60) + (epoch >= 80);
    EXPECT_NEAR(s.at(step), 0.4 * std::pow(0.1, passed), 1e-15) << "step " << step;
  }
  EXPECT_DOUBLE_EQ(s.at(299), 0.4);
  EXPECT_NEAR(s.at(300), 0.04, 1e-15);
  EXPECT_EQ(s.decay_text(), "x 0.1 at steps 300, 600, 800");
}

// A milestone inside the warm-up multiplies the warm-up's rate from there on, as PyTorch's ChainedScheduler(LinearLR,
// MultiStepLR) does: the climb goes on at a tenth.
TEST(LearningRate, AMilestoneInsideTheWarmupMultipliesItsRate) {
  auto o = opt(0.1, 256, 5, LrSchedule::steps);
  o.milestones = {3, 30};
  o.decay_factor = 0.1;
  const LearningRateSchedule s(o, 1024, 10, 40);  // warm-up 50 steps from 0.1 to 0.4; milestones at 30 and 300
  EXPECT_NEAR(s.at(29), 0.1 + 0.3 * 29 / 50, 1e-15);
  EXPECT_NEAR(s.at(30), (0.1 + 0.3 * 30 / 50) * 0.1, 1e-15);
  EXPECT_NEAR(s.at(49), (0.1 + 0.3 * 49 / 50) * 0.1, 1e-15);
  EXPECT_NEAR(s.at(50), 0.04, 1e-15);
  EXPECT_NEAR(s.at(300), 0.004, 1e-15);
}

TEST(LearningRate, StepsTakeFractionalMilestones) {
  auto o = opt(1.0, 8, 0, LrSchedule::steps);
  o.milestones = {0.5, 1.25};
  o.decay_factor = 0.5;
  const LearningRateSchedule s(o, 8, 4, 2);  // milestones at steps 2 and 5
  EXPECT_EQ(s.milestone_steps(), (std::vector<int64_t>{2, 5}));
  EXPECT_DOUBLE_EQ(s.at(1), 1.0);
  EXPECT_DOUBLE_EQ(s.at(2), 0.5);
  EXPECT_DOUBLE_EQ(s.at(4), 0.5);
  EXPECT_DOUBLE_EQ(s.at(5), 0.25);
}

// MLPerf's LARS reference (TensorFlow's polynomial_decay after warm-up): lr = (peak - end) x (1 - t / T)^power + end,
// t the steps since warm-up, T the steps after it.
TEST(LearningRate, PolyDecaysWithItsPowerToMinAfterWarmup) {
  auto o = opt(2.0, 256, 2, LrSchedule::poly, 1e-4);
  o.poly_power = 2;
  const LearningRateSchedule s(o, 1024, 50, 10);  // peak 8, warm-up 100 steps, 400 steps of decay
  EXPECT_DOUBLE_EQ(s.at(100), 8.0);
  for (int64_t step = 100; step <= 500; ++step) {
    const double t = static_cast<double>(step - 100), decay_steps = 400;
    EXPECT_NEAR(s.at(step), (8.0 - 1e-4) * std::pow(1 - t / decay_steps, 2) + 1e-4, 1e-12) << "step " << step;
  }
  EXPECT_NEAR(s.at(500), 1e-4, 1e-15);
  EXPECT_EQ(s.decay_text(), "poly decay (power 2) to 0.0001");
  o.poly_power = 1;  // a straight line
  const LearningRateSchedule linear(o, 1024, 50, 10);
  EXPECT_NEAR(linear.at(300), (8.0 - 1e-4) * 0.5 + 1e-4, 1e-12);
}

// A decay must end below where it starts: min_lr above the scaled peak (0.05 x 8/128 here) is refused naming the key.
TEST(LearningRate, MinAboveThePeakIsRefused) {
  for (const LrSchedule kind : {LrSchedule::cosine, LrSchedule::poly}) {
    try {
      const LearningRateSchedule s(opt(0.05, 128, 0, kind, 0.01), 8, 10, 2);
      FAIL() << "min_lr 0.01 above the peak 0.003125 was taken";
    } catch (const ringtrain::JobFileError& e) {
      EXPECT_NE(std::string(e.what()).find("'optimizer.min_lr' = 0.01 is above the peak rate 0.003125"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_NO_THROW(LearningRateSchedule(opt(0.05, 128, 0, LrSchedule::constant, 0.01), 8, 10, 2));
}

TEST(LearningRate, SaysWhatTheRunsLengthCutsShort) {
  // A schedule that fits says nothing.
  EXPECT_TRUE(LearningRateSchedule(opt(0.1, 256, 2, LrSchedule::cosine), 256, 50, 10).cut_short().empty());
  // Warm-up of 5 epochs x 50 steps in a 3-epoch run: climbs the whole run.
  const auto warm = LearningRateSchedule(opt(0.1, 256, 5, LrSchedule::cosine), 512, 50, 3).cut_short();
  ASSERT_EQ(warm.size(), 1u);
  EXPECT_NE(warm[0].find("warm-up of 250 steps and the run has 150: the rate climbs at the slope asked for the whole "
                         "run and ends at 0.1596, short of its peak 0.2"),
            std::string::npos)
      << warm[0];
  // At the base batch the warm-up starts at the peak: nothing climbs, nothing is cut short.
  EXPECT_TRUE(LearningRateSchedule(opt(0.1, 256, 5, LrSchedule::cosine), 256, 50, 3).cut_short().empty());
  // Milestones 1 and 30 in a 3-epoch run: only the one at 30 is past the end (step 149).
  auto o = opt(0.1, 256, 0, LrSchedule::steps);
  o.milestones = {1, 30};
  const auto steps = LearningRateSchedule(o, 256, 50, 3).cut_short();
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_NE(steps[0].find("milestones at steps 1500 come after the run's last step (149)"), std::string::npos)
      << steps[0];
}
