// The epoch record's rules: median and straggler over per-rank step times (the straggler against the other ranks'
// median), starvation threshold, memory.
#include <gtest/gtest.h>

#include <vector>

#include "obs/run_stats.h"

using namespace ringtrain;

TEST(StepTimeSpread, NamesTheSlowestRankOnlyWhenMoreThanTenPercentOverTheMedian) {
  const auto even = obs::step_time_spread({0.100, 0.104, 0.098, 0.108});
  EXPECT_DOUBLE_EQ(even.min_s, 0.098);
  EXPECT_DOUBLE_EQ(even.max_s, 0.108);
  EXPECT_DOUBLE_EQ(even.median_s, 0.102);
  EXPECT_EQ(even.slowest_rank, 3);
  EXPECT_EQ(even.straggler_rank, -1) << "5.9 % over the median is no straggler";
  EXPECT_EQ(obs::straggler_warning(even), "");

  const auto slow = obs::step_time_spread({0.100, 0.100, 0.150, 0.101, 0.099});
  EXPECT_DOUBLE_EQ(slow.median_s, 0.100);
  EXPECT_EQ(slow.straggler_rank, 2);
  const std::string warning = obs::straggler_warning(slow);
  EXPECT_NE(warning.find("rank 2"), std::string::npos) << warning;
  EXPECT_NE(warning.find("50 %"), std::string::npos) << warning;
}

// Among steps of microseconds a rank 50 % over the median holds nobody up noticeably: a millisecond of difference is
// the least that is named.
TEST(StepTimeSpread, NamesNoStragglerUnderAMillisecondOfDifference) {
  EXPECT_EQ(obs::step_time_spread({0.0001, 0.00015, 0.0001}).straggler_rank, -1);
  EXPECT_EQ(obs::step_time_spread({0.0030, 0.0041, 0.0030}).straggler_rank, 1);
}

// With 2 ranks the median of all is halfway to the straggler: a rank 20 % slower than the other was 9 % over it and
// missed, and one 10 times slower was called 82 % slower. The others' median is the other rank.
TEST(StepTimeSpread, WithTwoRanksTheStragglerIsMeasuredAgainstTheOther) {
  const auto pair = obs::step_time_spread({0.100, 0.120});
  EXPECT_DOUBLE_EQ(pair.median_s, 0.110);
  EXPECT_DOUBLE_EQ(pair.others_median_s, 0.100);
  EXPECT_EQ(pair.straggler_rank, 1);
  const std::string warning = obs::straggler_warning(obs::step_time_spread({0.010, 0.100}));
  EXPECT_NE(warning.find("900 % more than the other ranks' median (10.0 ms)"), std::string::npos) << warning;
}

TEST(StepTimeSpread, BoundaryAndDegenerateInputs) {
  EXPECT_EQ(obs::step_time_spread({1.0, 1.1, 1.0}).straggler_rank, -1) << "exactly 10 % is not more than 10 %";
  EXPECT_EQ(obs::step_time_spread({1.0, 1.1001, 1.0}).straggler_rank, 1);
  EXPECT_EQ(obs::step_time_spread({0.5}).straggler_rank, -1) << "one rank is never its own straggler";
  EXPECT_EQ(obs::step_time_spread({}).straggler_rank, -1);
}

TEST(Starvation, WarnsAboveFivePercentAndNamesTheKnob) {
  const obs::LoaderLoad reading{0.050, 0.010, 4};
  EXPECT_EQ(obs::starvation_warning(0.004, 0.100, 4, reading), "") << "4 % is fine";
  EXPECT_EQ(obs::starvation_warning(0.005, 0.100, 4, reading), "") << "exactly 5 % is fine";
  const std::string warning = obs::starvation_warning(0.020, 0.100, 4, reading);
  EXPECT_NE(warning.find("20.0 %"), std::string::npos) << warning;
  EXPECT_NE(warning.find("data.prefetch_batches (now 4)"), std::string::npos) << warning;
  EXPECT_EQ(obs::starvation_warning(1.0, 0.0, 4, reading), "") << "no steps, no verdict";
}

// The remedy follows what the loader measured: its threads decoding, or its thread reading.
TEST(Starvation, NamesTheLoadersBottleneck) {
  const std::string decoding = obs::starvation_warning(0.050, 0.100, 4, {0.002, 0.300, 8});
  EXPECT_NE(decoding.find("the loader's 8 threads spend 300.0 ms"), std::string::npos) << decoding;
  EXPECT_NE(decoding.find("raise data.loader_threads (now 8)"), std::string::npos) << decoding;
  EXPECT_EQ(decoding.find("faster storage"), std::string::npos) << decoding;
  EXPECT_EQ(decoding.find("--max-side"), std::string::npos) << "a split of raw pixels has no photos to shrink";
  const std::string photos = obs::starvation_warning(0.050, 0.100, 4, {0.002, 0.300, 1, 0.0, true});
  EXPECT_NE(photos.find("the loader's 1 thread spends 300.0 ms"), std::string::npos) << photos;
  EXPECT_NE(photos.find("or store smaller photos (prepare images --max-side)"), std::string::npos) << photos;
  const std::string reading = obs::starvation_warning(0.050, 0.100, 4, {0.200, 0.010, 8});
  EXPECT_NE(reading.find("faster storage"), std::string::npos) << reading;
  EXPECT_EQ(reading.find("loader_threads"), std::string::npos) << reading;
}

// data.decode = gpu: the decoding thread's time per batch against the loader's; the slowest stage is named.
TEST(Starvation, NamesTheGpuDecodeWhenItsThreadIsTheSlowestStage) {
  const std::string decode = obs::starvation_warning(0.050, 0.100, 4, {0.004, 0.0, 8, 0.065});
  EXPECT_NE(decode.find("GPU decode is the bottleneck"), std::string::npos) << decode;
  EXPECT_NE(decode.find("65.0 ms a batch decoding against 4.0 ms"), std::string::npos) << decode;
  EXPECT_NE(decode.find("--max-side"), std::string::npos) << decode;
  EXPECT_EQ(decode.find("faster storage"), std::string::npos) << decode;
  const std::string reading = obs::starvation_warning(0.050, 0.100, 4, {0.200, 0.0, 8, 0.020});
  EXPECT_NE(reading.find("faster storage"), std::string::npos) << reading;
  EXPECT_EQ(reading.find("GPU decode"), std::string::npos) << reading;
}

TEST(Memory, ResidentSetGrowsWithTouchedMemory) {
  const double before = obs::peak_rss_mb();
  EXPECT_GT(before, 1.0);
  std::vector<char> block(64u << 20, 1);  // 64 MiB, written so every page is resident
  const double now = obs::current_rss_mb();
  EXPECT_GT(obs::peak_rss_mb(), before + 32) << "peak after touching 64 MiB";
  EXPECT_GT(now, 32.0);
  EXPECT_EQ(block[12345], 1);
}
