// A tiny 2-rank training run of the ringtrain binary with run.trace = true, read back: the traces parse, hold
// every phase, hold only the last run.trace_steps steps, and show gradient reductions in flight while
// backward computes (the overlap claim); the epoch record carries the observability fields.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Span {
  double begin = 0, end = 0;
  int tid = 0;
};

class TraceRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    work_ = fs::temp_directory_path() / ("ringtrain-trace-run-" + std::to_string(::getpid()));
    fs::remove_all(work_);
    fs::create_directories(work_);
    const std::string bin = RINGTRAIN_BIN;
    const std::string prepare = bin + " prepare synthetic --shape 1,8,8 --classes 3 --samples 64 --test-samples 8 "
                                      "--shards 2 --out " + (work_ / "data").string() + " > " +
                                (work_ / "prepare.log").string() + " 2>&1";
    ASSERT_EQ(std::system(prepare.c_str()), 0) << prepare;
    std::ofstream job(work_ / "job.toml");
    job << "[data]\ntrain = \"" << (work_ / "data/train").string() << "\"\ntest = \"" << (work_ / "data/test").string()
        << "\"\n[train]\nepochs = 1\nbatch_per_rank = 4\n[optimizer]\nbase_lr = 0.01\nbase_batch = 8\n"
           "[model]\nname = \"trace-test\"\n"
           "[[model.layers]]\ntype = \"conv2d\"\nfilters = 4\nkernel = 3\npadding = 1\n"
           "[[model.layers]]\ntype = \"relu\"\n[[model.layers]]\ntype = \"flatten\"\n"
           "[[model.layers]]\ntype = \"dense\"\nunits = 16\n[[model.layers]]\ntype = \"relu\"\n"
           "[[model.layers]]\ntype = \"dense\"\nunits = 3\n"
           "[run]\ndir = \"" << (work_ / "run").string() << "\"\ndevice = \"cpu\"\nthreads = 1\n"
           "trace = true\ntrace_steps = 3\n"
           // 1 KiB buckets: [dense 2 + bias of dense 1], [dense 1 weights], [conv], so reductions start
           // mid-backward (the nonblocking reducer's; a node-shared copy sums once backward has ended)
           "[dist]\nbucket_mb = 0.001\nreducer = \"nonblocking\"\n";
    job.close();
    const std::string run = std::string(MPIEXEC) + " -np 2 --oversubscribe " + bin + " train " +
                            (work_ / "job.toml").string() + " > " + (work_ / "train.log").string() + " 2>&1";
    ASSERT_EQ(std::system(run.c_str()), 0) << run << "; see " << (work_ / "train.log").string();
  }
  static void TearDownTestSuite() {
    if (!::testing::Test::HasFailure()) fs::remove_all(work_);
  }
  static nlohmann::json read_json(const fs::path& file) {
    std::ifstream in(file);
    EXPECT_TRUE(in.good()) << file;
    return nlohmann::json::parse(in);  // throws (test fails) on malformed JSON
  }
  static fs::path work_;
};
fs::path TraceRun::work_;

TEST_F(TraceRun, EveryRankWritesABoundedTraceWithEveryPhase) {
  for (int rank = 0; rank < 2; ++rank) {
    const auto trace = read_json(work_ / "run" / ("trace-rank" + std::to_string(rank) + ".json"));
    std::set<std::string> names;
    std::set<int64_t> steps;
    for (const auto& e : trace.at("traceEvents")) {
      if (e.at("ph") != "X") continue;
      names.insert(e.at("name").get<std::string>());
      EXPECT_EQ(e.at("pid").get<int>(), rank);
      if (e.at("name") == "forward") steps.insert(e.at("args").at("step").get<int64_t>());
    }
    for (const char* want : {"data_wait", "forward", "backward", "allreduce", "allreduce_wait", "optimizer", "eval",
                             "checkpoint"})
      EXPECT_TRUE(names.count(want)) << "rank " << rank << " trace lacks '" << want << "' spans";
    // 32 samples per rank / batch 4 = 8 steps; trace_steps = 3 keeps steps 5, 6, 7 only.
    EXPECT_EQ(steps, (std::set<int64_t>{5, 6, 7})) << "rank " << rank;
  }
}

TEST_F(TraceRun, ReductionsRunWhileBackwardComputes) {
  const auto trace = read_json(work_ / "run" / "trace-rank0.json");
  std::map<int64_t, Span> backward;
  std::map<int64_t, std::vector<Span>> reductions;
  std::set<int> bucket_tracks;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const double ts = e.at("ts").get<double>(), dur = e.at("dur").get<double>();
    const int64_t step = e.at("args").at("step").get<int64_t>();
    const Span span{ts, ts + dur, e.at("tid").get<int>()};
    if (e.at("name") == "backward") backward[step] = span;
    if (e.at("name") == "allreduce") {
      reductions[step].push_back(span);
      bucket_tracks.insert(span.tid);
      EXPECT_GT(e.at("args").at("bytes").get<int64_t>(), 0);
    }
  }
  EXPECT_EQ(bucket_tracks.size(), 3u) << "3 buckets of <= 1 KiB: one track per bucket";
  ASSERT_EQ(backward.size(), 3u);
  for (const auto& [step, b] : backward) {
    ASSERT_EQ(reductions[step].size(), 3u) << "step " << step;
    int overlapping = 0;
    for (const auto& r : reductions[step]) overlapping += (r.begin >= b.begin && r.begin < b.end) ? 1 : 0;
    // Every bucket but the one holding the first layer starts before backward has finished.
    EXPECT_GE(overlapping, 2) << "step " << step << ": reductions must start while backward still computes";
  }
}

}  // namespace

namespace {

TEST_F(TraceRun, EpochRecordCarriesReductionStepSpreadAndMemory) {
  std::ifstream in(work_ / "run" / "metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line))
    if (line.find("\"kind\":\"epoch\"") != std::string::npos) last = line;
  ASSERT_FALSE(last.empty()) << "no epoch record";
  const auto rec = nlohmann::json::parse(last);
  // The reductions' own time covers the exposed wait: the last bucket is launched before the wait begins.
  EXPECT_GT(rec.at("allreduce_total_s").get<double>(), 0.0);
  EXPECT_GE(rec.at("allreduce_total_s").get<double>(), 0.9 * rec.at("allreduce_s").get<double>());
  const double lo = rec.at("step_time_min_s"), mid = rec.at("step_time_median_s"), hi = rec.at("step_time_max_s");
  EXPECT_GT(lo, 0.0);
  EXPECT_LE(lo, mid);
  EXPECT_LE(mid, hi);
  const int slowest = rec.at("step_time_max_rank");
  EXPECT_TRUE(slowest == 0 || slowest == 1);
  EXPECT_TRUE(rec.at("straggler_rank").is_null() || rec.at("straggler_rank") == slowest);
  ASSERT_EQ(rec.at("peak_rss_mb_per_rank").size(), 2u);
  for (const auto& mb : rec.at("peak_rss_mb_per_rank")) EXPECT_GE(mb.get<double>(), rec.at("baseline_rss_mb").get<double>() * 0.5);
  EXPECT_GT(rec.at("memory_needed_mb").get<double>(), 0.0);
  EXPECT_TRUE(rec.at("warnings").is_array());
  EXPECT_GE(rec.at("data_wait_fraction").get<double>(), 0.0);
  int event_files = 0;  // run.tensorboard defaults to true: rank 0 writes one
  for (const auto& entry : fs::directory_iterator(work_ / "run"))
    event_files += entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0 ? 1 : 0;
  EXPECT_EQ(event_files, 1);
}

}  // namespace
