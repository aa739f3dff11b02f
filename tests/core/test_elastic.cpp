// Proves the arithmetic of an elastic restart (dist.on_shrink, train/on_shrink.h) and its membership record
// (train/membership_record.h): the accumulation steps that keep the global batch, the refusal where the ranks do
// not divide it (exit 3), the batch-norm group a resume on a world it does not divide gets, the learning rate a kept
// per-rank batch gets by each lr_scaling rule, and the record's fields, with what the launcher did not say left null.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "common/error.h"
#include "config/sync_batchnorm_fit.h"
#include "train/lr_schedule.h"
#include "train/membership_record.h"
#include "train/on_shrink.h"

using ringtrain::Error;
using ringtrain::ExitCode;
using ringtrain::config::LrScaling;
using ringtrain::config::OnShrink;
using ringtrain::train::accumulation_for_global_batch;
using ringtrain::config::fit_sync_batchnorm_group;
using ringtrain::train::LearningRateSchedule;
using ringtrain::train::membership_record;
using ringtrain::train::MembershipChange;
using ringtrain::train::WorldChange;

TEST(OnShrink, KeepGlobalBatchAccumulatesWhatTheLostRanksCarried) {
  EXPECT_EQ(accumulation_for_global_batch(128, 32, 2), 2);   // 4 ranks x 32 -> 2 ranks x 32 x 2
  EXPECT_EQ(accumulation_for_global_batch(128, 32, 1), 4);
  EXPECT_EQ(accumulation_for_global_batch(256, 32, 4), 2);   // 8 ranks x 32 -> 4, and back up to 8:
  EXPECT_EQ(accumulation_for_global_batch(256, 32, 8), 1);
}

// 8 ranks in groups of 4 that lose a node and resume on 6 go on in groups of 3, said in the header; a group that
// divides the new world, a fresh run (refused where the device opens) and no group at all stay as the job says.
TEST(OnShrink, AResumeFitsTheBatchNormGroupToTheLargestDivisorOfTheWorld) {
  for (const auto& [group, ranks, fitted] : {std::tuple{4, 6, 3}, {8, 6, 6}, {2, 1, 1}, {4, 7, 1}, {4, 12, 4}, {0, 5, 0}}) {
    const auto resumed = fit_sync_batchnorm_group(group, ranks, true);
    EXPECT_EQ(resumed.group, fitted) << group << " on " << ranks;
    EXPECT_EQ(resumed.note.empty(), group == fitted);
    EXPECT_EQ(fit_sync_batchnorm_group(group, ranks, false).group, group);
  }
  EXPECT_EQ(fit_sync_batchnorm_group(4, 6, true).note,
            "dist.sync_batchnorm_group = 4 does not divide the 6 ranks relaunched on: batch norm statistics over groups "
            "of 3 (the largest divisor of 6 up to 4)");
}

TEST(OnShrink, KeepGlobalBatchIsRefusedWithExit3WhereTheRanksDoNotDivideIt) {
  for (const auto& [global, per_rank, ranks] : {std::tuple{128, 32, 3}, {128, 48, 2}, {64, 32, 4}}) {
    try {
      accumulation_for_global_batch(global, per_rank, ranks);
      ADD_FAILURE() << global << " / (" << per_rank << " x " << ranks << ") accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::job_file);
      const std::string what = e.what();
      EXPECT_NE(what.find("global batch " + std::to_string(global)), std::string::npos) << what;
      EXPECT_NE(what.find("keep_per_rank_batch"), std::string::npos) << what;  // the way out
    }
  }
}

// The rule keep_per_rank_batch's resume takes its rate from: 4 ranks x 32 -> 2 ranks x 32 halves the global batch
// and, under linear scaling, the peak rate (the resume itself: faults_recovery's reshard case).
TEST(OnShrink, ThePeakRateFollowsTheGlobalBatchByLrScaling) {
  ringtrain::config::JobConfig::Optimizer opt;
  opt.base_lr = 0.1, opt.base_batch = 128;
  opt.lr_scaling = LrScaling::linear;
  EXPECT_DOUBLE_EQ(LearningRateSchedule::peak_for(opt, 64) / LearningRateSchedule::peak_for(opt, 128), 0.5);
  opt.lr_scaling = LrScaling::sqrt;
  EXPECT_DOUBLE_EQ(LearningRateSchedule::peak_for(opt, 64) / LearningRateSchedule::peak_for(opt, 128), std::sqrt(0.5));
  opt.lr_scaling = LrScaling::none;
  EXPECT_DOUBLE_EQ(LearningRateSchedule::peak_for(opt, 64), 0.1);
}

TEST(MembershipRecord, NamesBothWorldsTheNodeTheStepAndTheSecondsLost) {
  const WorldChange change{4, 2, 128, 128, 8, 2, 0.05, 0.05, OnShrink::keep_global_batch};
  const auto r = membership_record(change, MembershipChange{"n2", 12.5});
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["kind"], "membership");
  EXPECT_EQ((*r)["old_ranks"], 4);
  EXPECT_EQ((*r)["new_ranks"], 2);
  EXPECT_EQ((*r)["failed_node"], "n2");
  EXPECT_EQ((*r)["resumed_from_step"], 8);
  EXPECT_DOUBLE_EQ((*r)["seconds_lost"].get<double>(), 12.5);
  EXPECT_EQ((*r)["on_shrink"], "keep_global_batch");
  EXPECT_EQ((*r)["accumulate_steps"], 2);
}

TEST(MembershipRecord, WhatTheLauncherDidNotSayIsNullAndAPlainResumeHasNone) {
  const WorldChange shrunk{2, 1, 64, 32, 5, 1, 0.05, 0.025, OnShrink::keep_per_rank_batch};
  const auto r = membership_record(shrunk, {});
  ASSERT_TRUE(r);  // a resume on fewer ranks by hand is a membership change too
  EXPECT_TRUE((*r)["failed_node"].is_null());
  EXPECT_TRUE((*r)["seconds_lost"].is_null());
  EXPECT_DOUBLE_EQ((*r)["new_peak_lr"].get<double>(), 0.025);
  const WorldChange same{2, 2, 64, 64, 5, 1, 0.05, 0.05, OnShrink::keep_per_rank_batch};
  EXPECT_FALSE(membership_record(same, {}));
  EXPECT_TRUE(membership_record(same, MembershipChange{"n3", 1.0}));  // a restart on as many nodes
  const WorldChange fresh{0, 2, 0, 64, 0, 1, 0, 0.05, OnShrink::keep_per_rank_batch};
  EXPECT_FALSE(membership_record(fresh, MembershipChange{"n3", 1.0}));
}
