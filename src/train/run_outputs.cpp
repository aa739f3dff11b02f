// Owns run.dir's claim and rank 0's run files; see run_outputs.h.
#include "train/run_outputs.h"

#include <fmt/format.h>

#include <filesystem>

#include "common/error.h"
#include "io/whole_file.h"

namespace ringtrain::train {
namespace {

namespace fs = std::filesystem;

// A run.dir file written whole or not at all.
void write_file(const fs::path& path, const std::string& text) {
  if (const std::string why = io::write_whole_file(path, text); !why.empty())
    throw JobFileError(fmt::format("'{}' cannot be written: {}; free space on its file system or pick another "
                                   "run.dir with --set run.dir=...",
                                   path.string(), why));
}

}  // namespace

RunOutputs::RunOutputs(const RunContext& run) : run_(run) {
  run_.world.all_succeed([&] {
    if (run_.root()) dir_.emplace(run_.job, run_.resume);
  });
}

void RunOutputs::open(const util::VersionList& versions, int64_t epochs_done, int64_t steps_done) {
  run_.world.all_succeed([&] {
    if (!run_.root()) return;
    const fs::path& dir = run_.job.run.dir;
    write_file(dir / "job.resolved.toml", run_.job.resolved_toml);
    write_file(dir / "versions.json", util::versions_json(versions) + "\n");
    const fs::path file = dir / "metrics.jsonl";
    metrics_.emplace(run_.resume ? MetricsLog::resume(file, epochs_done) : MetricsLog::start(file));
    if (run_.job.run.tensorboard) tensorboard_.emplace(dir, run_.resume ? steps_done + 1 : -1);
  });
}

std::string RunOutputs::run_id() const { return dir_ ? dir_->run_id() : std::string(); }

std::vector<std::string> RunOutputs::claim_lines() const {
  if (!dir_) return {};
  std::vector<std::string> lines{fmt::format(
      "run.dir: run {}{}", dir_->run_id(),
      dir_->moved_aside().empty()
          ? std::string()
          : fmt::format("; the earlier run's files were moved to {}{}", dir_->moved_aside().string(),
                        run_.job.run.overwrite ? " (run.overwrite)" : ""))};
  if (!dir_->unlocked_because().empty())
    lines.push_back(fmt::format("warning: run.dir cannot be locked on this file system ({}): nothing stops a second "
                                "run from using it at the same time",
                                dir_->unlocked_because()));
  return lines;
}

std::vector<std::string> RunOutputs::open_lines() const {
  if (!metrics_ || metrics_->dropped() == 0) return {};
  return {fmt::format("metrics.jsonl: {} record(s) written after the checkpoint this run resumes from were dropped",
                      metrics_->dropped())};
}

void RunOutputs::record(const nlohmann::ordered_json& record) {
  if (metrics_) metrics_->append(record);
}

void RunOutputs::curves(int64_t step, const Scalars& values) {
  if (tensorboard_) tensorboard_->scalars(step, values);
}

void RunOutputs::finish() {
  run_.world.all_succeed([&] {
    if (metrics_) metrics_->finish();
  });
}

}  // namespace ringtrain::train
