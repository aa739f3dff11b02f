// Owns the bounded span store and its Chrome trace-event JSON.
#include "obs/trace.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "common/error.h"
#include "util/clock.h"

namespace ringtrain::obs {

Trace::Trace(int rank, int keep_steps)
    : rank_(rank), keep_steps_(static_cast<size_t>(std::max(1, keep_steps))), origin_s_(util::now_s()) {
  steps_.push_back({});  // setup spans before the first step
}

void Trace::begin_step(int64_t step) {
  std::lock_guard lock(mutex_);
  steps_.push_back({step, {}});
  while (steps_.size() > keep_steps_) steps_.pop_front();
}

void Trace::add(const std::string& name, double begin_s, double end_s, int track, int64_t bytes) {
  std::lock_guard lock(mutex_);
  Step& current = steps_.back();
  current.spans.push_back({name, track, begin_s, end_s, current.step, bytes});
}

void Trace::add_to_step(int64_t step, const std::string& name, double begin_s, double end_s, int track,
                        int64_t bytes) {
  std::lock_guard lock(mutex_);
  auto held = std::find_if(steps_.rbegin(), steps_.rend(), [&](const Step& s) { return s.step == step; });
  Step& into = held == steps_.rend() ? steps_.back() : *held;
  into.spans.push_back({name, track, begin_s, end_s, into.step, bytes});
}

std::vector<TraceSpan> Trace::spans() const {
  std::lock_guard lock(mutex_);
  std::vector<TraceSpan> all;
  for (const auto& s : steps_) all.insert(all.end(), s.spans.begin(), s.spans.end());
  return all;
}

int64_t Trace::steps_held() const {
  std::lock_guard lock(mutex_);
  int64_t n = 0;
  for (const auto& s : steps_) n += s.step >= 0 ? 1 : 0;
  return n;
}

void Trace::write(const std::filesystem::path& file) const {
  const auto all = spans();
  nlohmann::json events = nlohmann::json::array();
  std::set<int> tracks{0};
  for (const auto& s : all) {
    nlohmann::json e{{"name", s.name},
                     {"cat", s.track == 0 ? "step" : "allreduce"},
                     {"ph", "X"},
                     {"pid", rank_},
                     {"tid", s.track},
                     {"ts", (s.begin_s - origin_s_) * 1e6},
                     {"dur", std::max(0.0, s.end_s - s.begin_s) * 1e6},
                     {"args", {{"step", s.step}}}};
    if (s.bytes >= 0) e["args"]["bytes"] = s.bytes;
    events.push_back(std::move(e));
    tracks.insert(s.track);
  }
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank_}, {"args", {{"name", fmt::format("rank {}", rank_)}}}});
  for (const int t : tracks)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", rank_},
                      {"tid", t},
                      {"args", {{"name", t == 0 ? std::string("step") : fmt::format("allreduce bucket {}", t - kBucketTrack)}}}});
  const std::filesystem::path tmp = file.string() + ".tmp";
  std::lock_guard writing(write_mutex_);
  {
    std::ofstream out(tmp);
    out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
    if (!out.flush()) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw JobFileError(fmt::format("cannot write the trace {} (rank {}): {}; check run.dir's free space", tmp.string(),
                                     rank_, std::strerror(errno)));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) throw JobFileError(fmt::format("cannot write the trace {} (rank {}): {}", file.string(), rank_, ec.message()));
}

}  // namespace ringtrain::obs
