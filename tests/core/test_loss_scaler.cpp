// Proves fp16's loss-scale rule (train/loss_scaler.h): it halves on an overflow and doubles after the growth
// interval of finite steps in a row, an overflow restarts that count, it stays within its bounds, a run that
// overflows at every scale ends with an error naming the step and the fix, and a checkpoint's state carries over.
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "train/loss_scaler.h"

using ringtrain::AgreedError;
using ringtrain::train::LossScaler;
using ringtrain::train::LossScaleState;

namespace {

TEST(LossScaler, HalvesOnOverflowAndDoublesAfterTheGrowthInterval) {
  LossScaler s(65536, 3);
  EXPECT_EQ(s.scale(), 65536.0f);
  s.after_step(false, 0);
  EXPECT_EQ(s.scale(), 32768.0f);
  s.after_step(true, 1);
  s.after_step(true, 2);
  EXPECT_EQ(s.scale(), 32768.0f) << "two finite steps of three";
  s.after_step(false, 3);  // an overflow restarts the count
  EXPECT_EQ(s.scale(), 16384.0f);
  for (int step = 4; step < 7; ++step) s.after_step(true, step);
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_EQ(s.state().finite_in_a_row, 0);
  EXPECT_EQ(s.state().skipped_steps, 2);
}

TEST(LossScaler, AZeroGrowthIntervalNeverGrows) {
  LossScaler s(1024, 0);
  for (int step = 0; step < 5000; ++step) s.after_step(true, step);
  EXPECT_EQ(s.scale(), 1024.0f);
}

TEST(LossScaler, OverflowingAtEveryScaleEndsTheRunNamingTheStep) {
  LossScaler s(65536, 2000);
  for (int step = 0; step + 1 < LossScaler::kMaxSkipsInARow; ++step) s.after_step(false, step);
  s.after_step(true, 100);  // one finite step: the run goes on
  for (int step = 0; step + 1 < LossScaler::kMaxSkipsInARow; ++step) s.after_step(false, 101 + step);
  try {
    s.after_step(false, 500);
    FAIL() << "expected an AgreedError";
  } catch (const AgreedError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("optimizer step 501"), std::string::npos) << message;
    EXPECT_NE(message.find("train.precision = \"bf16\""), std::string::npos) << message;
  }
  EXPECT_GE(s.scale(), 0x1p-24f) << "the scale stops at its floor";
}

TEST(LossScaler, ACheckpointsStateCarriesOverAndAMissingOneIsIgnored) {
  LossScaler s(65536, 10);
  s.restore({});
  EXPECT_FALSE(s.restored());
  EXPECT_EQ(s.scale(), 65536.0f);
  s.restore(LossScaleState{512, 9, 4});
  EXPECT_TRUE(s.restored());
  EXPECT_EQ(s.scale(), 512.0f);
  s.after_step(true, 0);  // the tenth finite step in a row: it grows at once
  EXPECT_EQ(s.scale(), 1024.0f);
  s.after_step(false, 1);
  EXPECT_EQ(s.state().skipped_steps, 5) << "the job's skipped steps continue from the checkpoint's";
}

// A run resumed among skipped steps ends where the uninterrupted one would: its skips in a row continue.
TEST(LossScaler, SkipsInARowContinueFromTheCheckpoint) {
  LossScaler whole(65536, 2000);
  for (int step = 0; step < 30; ++step) whole.after_step(false, step);
  LossScaler resumed(65536, 2000);
  resumed.restore(whole.state());
  EXPECT_EQ(resumed.state().skips_in_a_row, 30);
  for (int step = 30; step + 1 < LossScaler::kMaxSkipsInARow; ++step) resumed.after_step(false, step);
  EXPECT_THROW(resumed.after_step(false, LossScaler::kMaxSkipsInARow - 1), AgreedError);
}

}  // namespace
