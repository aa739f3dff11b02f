// The trace recorder on its own: the step window is bounded, spans land in their step, and the JSON is
// Chrome trace-event format with named tracks.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "obs/phase.h"
#include "obs/trace.h"

using namespace ringtrain;

TEST(Trace, KeepsOnlyTheLastStepsOfTheWindow) {
  obs::Trace trace(3, 4);
  trace.add("setup", 0.0, 0.1);
  for (int64_t step = 0; step < 10; ++step) {
    trace.begin_step(step);
    trace.add("forward", 1.0 + step, 1.5 + step);
    trace.add("allreduce", 1.2 + step, 1.4 + step, obs::Trace::kBucketTrack + 1, 64);
  }
  EXPECT_EQ(trace.steps_held(), 4);
  const auto spans = trace.spans();
  ASSERT_EQ(spans.size(), 8u);
  EXPECT_EQ(spans.front().step, 6);
  EXPECT_EQ(spans.back().step, 9);
  EXPECT_EQ(spans.back().track, obs::Trace::kBucketTrack + 1);
}

TEST(Trace, WritesChromeTraceEventsWithNamedTracks) {
  obs::Trace trace(1, 10);
  trace.begin_step(0);
  {
    obs::Phase phase(&trace, "forward");
  }
  double total = 0;
  {
    obs::Phase phase(&trace, "optimizer", &total);
    EXPECT_GE(phase.end(), 0.0);
    EXPECT_EQ(phase.end(), 0.0) << "a phase ends once";
  }
  EXPECT_GE(total, 0.0);
  trace.add("allreduce", 0, 0, obs::Trace::kBucketTrack + 2, 128);
  const auto file = std::filesystem::temp_directory_path() / ("ringtrain-trace-" + std::to_string(::getpid()) + ".json");
  trace.write(file);
  std::ifstream in(file);
  const auto json = nlohmann::json::parse(in);
  std::filesystem::remove(file);
  int spans = 0;
  std::set<std::string> track_names;
  for (const auto& e : json.at("traceEvents")) {
    EXPECT_EQ(e.at("pid").get<int>(), 1);
    if (e.at("ph") == "X") {
      ++spans;
      EXPECT_GE(e.at("dur").get<double>(), 0.0);
    } else if (e.at("name") == "thread_name") {
      track_names.insert(e.at("args").at("name").get<std::string>());
    }
  }
  EXPECT_EQ(spans, 3);
  EXPECT_EQ(track_names, (std::set<std::string>{"step", "allreduce bucket 2"}));
}
