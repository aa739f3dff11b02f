// Owns the per-rank timeline of a run in Chrome trace-event format (opens in Perfetto and chrome://tracing):
// complete events ("ph":"X") for the step's phases on the main track and one track per gradient bucket for
// the reductions. Bounded: only the spans of the last `keep_steps` steps are held, so a long run never fills
// memory or disk; spans outside a step (evaluation, checkpoints) count with the step before them.
#pragma once
#include <cstdint>
#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

namespace ringtrain::obs {

struct TraceSpan {
  std::string name;
  int track = 0;               // 0: the step's phases; kBucketTrack + b: the reductions of bucket b
  double begin_s = 0, end_s = 0;  // util::now_s() clock
  int64_t step = -1;
  int64_t bytes = -1;          // payload of a reduction; -1: none
};

class Trace {
 public:
  static constexpr int kBucketTrack = 100;

  Trace(int rank, int keep_steps);
  void begin_step(int64_t step);  // later spans belong to `step`; steps older than the window are dropped
  void add(const std::string& name, double begin_s, double end_s, int track = 0, int64_t bytes = -1);
  // A span of an earlier step, learnt late (a device's phases are read once the device has finished them):
  // kept with that step while the window still holds it, else with the current one.
  void add_to_step(int64_t step, const std::string& name, double begin_s, double end_s, int track = 0,
                   int64_t bytes = -1);
  // Writes {"traceEvents": [...]} with thread-name metadata; times in microseconds since the trace began.
  void write(const std::filesystem::path& file) const;
  std::vector<TraceSpan> spans() const;  // what write() would write, oldest first
  int64_t steps_held() const;

 private:
  struct Step {
    int64_t step = -1;
    std::vector<TraceSpan> spans;
  };
  int rank_;
  size_t keep_steps_;
  double origin_s_;
  mutable std::mutex mutex_;  // a communication thread may report bucket spans
  mutable std::mutex write_mutex_;  // the watchdog's thread may write the file while the main thread does
  std::deque<Step> steps_;
};

}  // namespace ringtrain::obs
