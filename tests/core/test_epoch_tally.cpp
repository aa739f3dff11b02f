// Proves what an epoch adds up to on one rank and how it is reported: finished steps sum into the epoch's
// totals and phase times, the steady window starts after the warm-up steps, the first non-finite loss is the
// one remembered, a bad label is a data error naming the step and the rank, the progress line's loss restarts
// after each line; the test split's classes are counted and ranked worst first, and its top-5 hits; and the epoch's
// log line and record read their numbers by name, the worst classes, top-5 accuracy, an epoch left unevaluated
// (train.eval_every_epochs) and the clipped gradients' norms included.
#include <gtest/gtest.h>

#include <cmath>
#include <exception>
#include <limits>

#include "common/error.h"
#include "train/class_hits.h"
#include "train/epoch_summary.h"
#include "train/epoch_tally.h"

using namespace ringtrain;

namespace {

train::FinishedStep step(int64_t index, double loss_sum, int64_t correct, double end_s) {
  train::FinishedStep f;
  f.step = index;
  f.loss.loss_sum = loss_sum;
  f.loss.correct = correct;
  f.samples = 10;
  f.times.forward = 0.5, f.times.backward = 1.0;
  f.end_s = end_s;
  return f;
}

TEST(EpochTally, FinishedStepsAddUpAndTheSteadyWindowFollowsTheWarmUp) {
  train::EpochTally tally(/*first_step=*/100, /*warmup_steps=*/2, /*epoch_start_s=*/50.0, 10, 0);
  tally.take({step(100, 20, 3, 51), step(101, 10, 4, 52)});
  tally.take({step(102, 5, 5, 54), step(103, 5, 6, 55)});
  EXPECT_DOUBLE_EQ(tally.train.loss_sum, 40);
  EXPECT_DOUBLE_EQ(tally.train.correct, 18);
  EXPECT_DOUBLE_EQ(tally.train.samples, 40);
  EXPECT_DOUBLE_EQ(tally.train.mean_loss(), 1.0);
  EXPECT_DOUBLE_EQ(tally.train.accuracy(), 0.45);
  EXPECT_DOUBLE_EQ(tally.times.forward, 2.0);
  EXPECT_DOUBLE_EQ(tally.times.backward, 4.0);
  // Steps 102 and 103 are past the warm-up: timed from the end of step 101.
  EXPECT_DOUBLE_EQ(tally.steady.begin_s, 52);
  EXPECT_DOUBLE_EQ(tally.steady.end_s, 55);
  EXPECT_DOUBLE_EQ(tally.steady.samples, 20);
  EXPECT_DOUBLE_EQ(tally.steady.seconds(), 3);
  EXPECT_EQ(tally.nonfinite_step, -1);
}

TEST(EpochTally, NoStepPastTheWarmUpGivesNoSteadyWindow) {
  train::EpochTally tally(0, 5, 0.0, 10, 0);
  tally.take({step(0, 1, 1, 1), step(1, 1, 1, 2)});
  EXPECT_DOUBLE_EQ(tally.steady.samples, 0);
  EXPECT_DOUBLE_EQ(tally.steady.seconds(), 0);
}

TEST(EpochTally, TheFirstNonFiniteLossIsRemembered) {
  train::EpochTally tally(0, 0, 0.0, 10, 0);
  tally.take({step(0, 1, 1, 1), step(1, std::numeric_limits<double>::infinity(), 1, 2),
              step(2, std::nan(""), 1, 3)});
  EXPECT_EQ(tally.nonfinite_step, 1);
}

// Held, not thrown: the rank that met it stops only at the step's agreement, with every other rank.
TEST(EpochTally, ABadLabelIsAHeldDataErrorNamingStepAndRank) {
  train::EpochTally tally(0, 0, 0.0, 10, 3);
  train::FinishedStep bad = step(6, 1, 1, 1), worse = step(7, 1, 1, 1);
  bad.loss.bad_labels = 2;
  worse.loss.bad_labels = 5;
  ASSERT_NO_THROW(tally.take({bad, worse}));
  ASSERT_TRUE(tally.data_failure);
  try {
    std::rethrow_exception(tally.data_failure);
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "2 labels of optimizer step 7 lie outside [0, 10) on rank 3; the dataset's labels do not "
                           "match its class count (re-run `ringtrain prepare`)");
  }
}

TEST(EpochTally, TheProgressLossIsTheMeanSinceTheLastLine) {
  train::EpochTally tally(0, 0, 0.0, 10, 0);
  EXPECT_TRUE(tally.interval_empty()) << "no line before a step has finished";
  tally.take({step(0, 30, 1, 1)});
  EXPECT_FALSE(tally.interval_empty());
  EXPECT_DOUBLE_EQ(tally.interval_loss(), 3.0);
  tally.restart_interval();
  EXPECT_TRUE(tally.interval_empty());
  EXPECT_DOUBLE_EQ(tally.interval_loss(), 0.0);
  tally.take({step(1, 10, 1, 2)});
  EXPECT_DOUBLE_EQ(tally.interval_loss(), 1.0);
  EXPECT_DOUBLE_EQ(tally.train.loss_sum, 40);  // the epoch's sums are not restarted
}

TEST(EpochTally, CountsSkippedStepsAndKeepsTheLastLossScale) {
  train::EpochTally tally(0, 0, 0.0, 10, 0);
  std::vector<train::FinishedStep> steps = {step(0, 1, 1, 1), step(1, 1, 1, 2), step(2, 1, 1, 3)};
  steps[0].loss_scale = 1024, steps[0].skipped = true;
  steps[1].loss_scale = 512;
  steps[2].loss_scale = 512, steps[2].skipped = true;
  tally.take(steps);
  EXPECT_EQ(tally.skipped_steps, 2);
  EXPECT_EQ(tally.loss_scale, 512.0f);
}

train::EpochReport two_rank_report() {
  train::EpochReport r;
  r.epoch = 2, r.epochs = 12, r.ranks = 2;
  r.global_batch = 128, r.steps = 100, r.steps_run = 100, r.per_step = 64;
  r.lr = 0.05;
  r.sums.train = {200, 9000, 12800};
  r.sums.test = {80, 1700, 2000};
  r.sums.times.data_wait = 0.2, r.sums.times.forward = 4, r.sums.times.backward = 8;
  r.sums.times.allreduce = 0.4, r.sums.times.optimizer = 0.6, r.sums.times.allreduce_total = 3;
  r.sums.times.batch_load = 0.08;
  r.samples_per_s = 1500, r.epoch_train_s = 6.4, r.eval_s = 0.5;  // the job's average: an earlier, slower epoch
  r.train_flops_per_sample = 1e7;
  r.per_rank = {{0.06, 300, 0}, {0.07, 320, 0}};
  r.param_checksum = "00000000000000ff";
  return r;
}

TEST(EpochReport, TheLineReadsItsNumbersByName) {
  EXPECT_EQ(two_rank_report().line(),
            "epoch 2/12: train loss 0.0156 acc 0.7031 | test loss 0.0400 acc 0.8500 | 2000 samples/s (job average "
            "1500) | mean over ranks: data wait 0.10s to device 0.04s forward 2.00s backward 4.00s all-reduce 0.20s "
            "exposed of 1.50s optimizer 0.30s | eval 0.5s | 10.0 GFLOP/s per rank");
  auto steady = two_rank_report();
  steady.steady_samples_per_s = 2100;
  EXPECT_NE(steady.line().find("| 2000 samples/s (steady 2100; job average 1500) |"), std::string::npos) << steady.line();
}

// A run resumed from a checkpoint at an epoch's last step records that epoch without a step of its own: its rates
// and times per step are unknown (null), not zero, so a plot of them shows no false dip.
TEST(EpochReport, AnEpochWithoutAStepInThisLaunchRecordsNoRates) {
  auto r = two_rank_report();
  r.steps_run = 0, r.epoch_train_s = 3e-7;
  r.sums.times = {};
  const auto rec = r.record();
  EXPECT_EQ(rec["steps_run"], 0);
  for (const char* key : {"epoch_samples_per_s", "flops_per_s_per_rank", "data_wait_fraction",
                          "allreduce_exposed_fraction", "step_time_min_s", "step_time_median_s", "step_time_max_s",
                          "step_time_max_rank"})
    EXPECT_TRUE(rec[key].is_null()) << key;
  EXPECT_DOUBLE_EQ(rec["samples_per_s"].get<double>(), 1500);
  EXPECT_NE(r.line().find("| no step of this epoch ran in this launch (job average 1500) |"), std::string::npos)
      << r.line();
  EXPECT_NE(r.line().find("| 0.0 GFLOP/s per rank"), std::string::npos) << r.line();
}

TEST(EpochReport, TheRecordReadsItsNumbersByName) {
  const auto rec = two_rank_report().record();
  EXPECT_EQ(rec["kind"], "epoch");
  EXPECT_DOUBLE_EQ(rec["test_acc"].get<double>(), 0.85);
  EXPECT_DOUBLE_EQ(rec["data_wait_s"].get<double>(), 0.1);
  EXPECT_EQ(rec["steps_run"], 100);
  EXPECT_DOUBLE_EQ(rec["samples_per_s"].get<double>(), 1500);
  EXPECT_DOUBLE_EQ(rec["epoch_samples_per_s"].get<double>(), 2000);
  EXPECT_DOUBLE_EQ(rec["batch_load_s"].get<double>(), 0.04);
  EXPECT_DOUBLE_EQ(rec["allreduce_s"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(rec["allreduce_total_s"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(rec["optimizer_s"].get<double>(), 0.3);
  EXPECT_DOUBLE_EQ(rec["peak_rss_mb"].get<double>(), 320);
  EXPECT_EQ(rec["peak_rss_mb_per_rank"].size(), 2u);
  EXPECT_TRUE(rec["device_memory_peak_mb"].is_null());  // the CPU twin has no device memory
  EXPECT_TRUE(rec["steady_samples_per_s"].is_null());   // no step past the warm-up was timed
  EXPECT_EQ(rec["param_checksum"], "00000000000000ff");
  EXPECT_TRUE(rec["loss_scale"].is_null());  // no loss scaling outside fp16
  EXPECT_TRUE(rec["skipped_steps"].is_null());
}

TEST(EpochTally, GradientNormsOfClippedStepsGiveTheirMeanAndMax) {
  train::EpochTally tally(0, 0, 0.0, 10, 0);
  std::vector<train::FinishedStep> steps{step(0, 1, 1, 1), step(1, 1, 1, 2), step(2, 1, 1, 3)};
  steps[0].grad_norm = 2.0, steps[1].grad_norm = 5.0;  // step 2 measured none (a skipped fp16 step)
  tally.take(steps);
  EXPECT_EQ(tally.grad_norm.steps, 2);
  EXPECT_DOUBLE_EQ(tally.grad_norm.mean(), 3.5);
  EXPECT_DOUBLE_EQ(tally.grad_norm.max, 5.0);
  auto r = two_rank_report();
  EXPECT_TRUE(r.record()["grad_norm_mean"].is_null()) << "clipping off";
  r.grad_norm = tally.grad_norm;
  EXPECT_DOUBLE_EQ(r.record()["grad_norm_mean"].get<double>(), 3.5);
  EXPECT_DOUBLE_EQ(r.record()["grad_norm_max"].get<double>(), 5.0);
  EXPECT_NE(r.line().find("| gradient norm mean 3.5 max 5"), std::string::npos) << r.line();
}

// gpu.cuda_graphs: how the epoch's steps ran, null without the key.
TEST(EpochReport, RecordsHowTheGraphedStepsRan) {
  auto r = two_rank_report();
  EXPECT_TRUE(r.record()["graph_steps"].is_null());
  r.graph_steps = train::StepActionCounts{3, 2, 45};
  EXPECT_EQ(r.record()["graph_steps"], (nlohmann::ordered_json{{"eager", 3}, {"captured", 2}, {"replayed", 45}}));
}

TEST(EpochReport, AnEpochLeftUnevaluatedSaysSoAndRecordsNoTestNumbers) {
  auto r = two_rank_report();
  r.evaluated = false;
  const auto rec = r.record();
  for (const char* key : {"test_loss", "test_acc", "test_top5"}) EXPECT_TRUE(rec[key].is_null()) << key;
  EXPECT_NE(r.line().find("| test not evaluated this epoch |"), std::string::npos) << r.line();
}

TEST(EpochReport, Fp16SaysItsLossScaleAndSkippedSteps) {
  auto r = two_rank_report();
  r.loss_scale = 32768, r.skipped_steps = 3;
  const auto rec = r.record();
  EXPECT_DOUBLE_EQ(rec["loss_scale"].get<double>(), 32768);
  EXPECT_EQ(rec["skipped_steps"], 3);
  EXPECT_NE(r.line().find("| fp16 loss scale 32768, 3 steps skipped"), std::string::npos) << r.line();
}

}  // namespace

train::ClassHits hits(std::vector<double> samples, std::vector<double> correct) {
  train::ClassHits h(static_cast<int>(samples.size()));
  h.samples = std::move(samples), h.correct = std::move(correct);
  return h;
}

TEST(WorstClasses, LowestAccuracyFirstTiesByIndexEmptyClassesLeftOut) {
  // accuracies: 0.9, 0.5, -, 0.5, 0.25, 1.0
  const auto h = hits({10, 4, 0, 8, 4, 2}, {9, 2, 0, 4, 1, 2});
  const auto worst = train::worst_classes(h, {"a", "b", "c", "d", "e", "f"});
  ASSERT_EQ(worst.size(), 3u);
  EXPECT_EQ(worst[0].index, 4);
  EXPECT_EQ(worst[0].name, "e");
  EXPECT_DOUBLE_EQ(worst[0].accuracy, 0.25);
  EXPECT_EQ(worst[0].samples, 4);
  EXPECT_EQ(worst[1].index, 1);  // 0.5, the lower index of the tie
  EXPECT_EQ(worst[2].index, 3);
  EXPECT_EQ(train::worst_classes(h, {}, 1).front().name, "") << "no names: the record uses the index";
}

TEST(WorstClasses, FewerClassesThanAskedGiveThemAll) {
  EXPECT_EQ(train::worst_classes(hits({3, 3}, {1, 2}), {}).size(), 2u);
  EXPECT_TRUE(train::worst_classes(hits({0, 0}, {0, 0}), {}).empty());
  EXPECT_TRUE(train::worst_classes(train::ClassHits(0), {}).empty());
}

TEST(ClassHits, CountTheFirstMaximumAsTheLossKernelsDo) {
  const float logits[] = {1, 3, 3,   // a tie between 1 and 2: predicts 1
                          5, 0, 0,   // predicts 0
                          0, 0, 9,   // predicts 2
                          0, 9, 0};  // label out of range: skipped
  const int32_t labels[] = {1, 2, 2, 7};
  train::ClassHits h(3);
  h.add({logits, labels, 4, 3});
  EXPECT_EQ(h.samples, (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(h.correct, (std::vector<double>{0, 1, 1}));
}

// Top-5 as `ringtrain evaluate` counts it: the label is a hit when fewer than 5 classes rank above it, a tie ranking
// the lower class first as top-1 does (constant logits, a collapsed model's, are a hit only for the first five
// classes, as torch.topk's five), a NaN elsewhere passed over as top-1 passes over it, a NaN at the label a miss.
TEST(ClassHits, CountTheLabelsAmongTheFiveHighestLogits) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float logits[] = {6, 5, 4, 3, 2, 1, 0,      // label 4: 4 classes higher, a hit
                          6, 5, 4, 3, 2, 1, 0,      // label 5: 5 classes higher, a miss
                          1, 1, 1, 1, 1, 1, 1,      // label 6: all tied, 6 lower classes rank first, a miss
                          1, 1, 1, 1, 1, 1, 1,      // label 4: all tied, 4 lower classes rank first, a hit
                          0, 9, 9, 9, 9, 9, 0,      // label 6 (0): 5 higher, a miss
                          nan, 5, 4, 3, 2, 1, 0,    // label 4: 3 classes above, a hit
                          nan, 5, 4, 3, 2, 1, 0,    // label 6: 5 classes above (not the NaN), a miss
                          6, 5, 4, 3, nan, 1, 0};   // label 4: NaN at the label, a miss
  const int32_t labels[] = {4, 5, 6, 4, 6, 4, 6, 4};
  train::ClassHits h(7);
  h.add({logits, labels, 8, 7});
  EXPECT_EQ(h.top5, 3);
}

TEST(EpochReport, TopFiveIsRecordedWithFiveClassesOrMore) {
  auto r = two_rank_report();
  EXPECT_TRUE(r.record()["test_top5"].is_null()) << "no class counts: fewer than 5 classes";
  r.sums.test_classes = hits({400, 400, 400, 400, 400}, {340, 340, 340, 340, 340});
  r.sums.test_classes.top5 = 1990;
  EXPECT_DOUBLE_EQ(r.record()["test_top5"].get<double>(), 1990.0 / 2000);
  EXPECT_NE(r.line().find("| test loss 0.0400 acc 0.8500 top-5 0.9950 |"), std::string::npos) << r.line();
  r.sums.test_classes = hits({1000, 1000, 0, 0}, {850, 850, 0, 0});
  EXPECT_TRUE(r.record()["test_top5"].is_null()) << "4 classes";
}

TEST(EpochReport, TheRecordAndLineNameTheWorstClasses) {
  auto r = two_rank_report();
  r.worst_classes = train::worst_classes(hits({100, 100, 100, 100}, {61, 90, 72, 75}), {"T-shirt", "Trouser", "Shirt", ""});
  const auto rec = r.record();
  ASSERT_EQ(rec["worst_classes"].size(), 3u);
  EXPECT_EQ(rec["worst_classes"][0]["class"], "T-shirt");
  EXPECT_EQ(rec["worst_classes"][0]["index"], 0);
  EXPECT_DOUBLE_EQ(rec["worst_classes"][0]["accuracy"].get<double>(), 0.61);
  EXPECT_EQ(rec["worst_classes"][0]["samples"], 100);
  EXPECT_EQ(rec["worst_classes"][2]["class"], 3) << "unnamed: the index";
  EXPECT_NE(r.line().find("| worst: T-shirt 0.61, Shirt 0.72, class 3 0.75"), std::string::npos) << r.line();
  EXPECT_TRUE(two_rank_report().record()["worst_classes"].empty());
}
