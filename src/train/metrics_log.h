// Owns `<run.dir>/metrics.jsonl` on rank 0: one JSON object per line, appended with one write each, never lost
// in silence. A write that fails (a full disk) leaves no partial line: the record is held in memory, said once,
// and written with the next append once it can be; at the end of the run, records that still cannot be
// written are an error that prints them, so the results reach the user either way. On --resume, records a run
// wrote after the checkpoint it resumes from (an epoch whose checkpoint then failed, a torn last line) are
// dropped, so the file never holds an epoch twice.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <deque>
#include <filesystem>
#include <string>

namespace ringtrain::train {

class MetricsLog {
 public:
  // A fresh run: an empty file (an earlier one was moved aside by RunDirectory). Throws JobFileError.
  static MetricsLog start(const std::filesystem::path& file);
  // A resumed run: keeps the file's job records and the epoch records of the `epochs_done` epochs the
  // checkpoint holds, drops the rest (their count in dropped()). Throws JobFileError.
  static MetricsLog resume(const std::filesystem::path& file, int64_t epochs_done);

  MetricsLog(MetricsLog&& other) noexcept;
  MetricsLog& operator=(MetricsLog&&) = delete;
  MetricsLog(const MetricsLog&) = delete;
  ~MetricsLog();

  // Writes the record now, after any held ones; holds it when the write fails. Never throws for a failed write.
  void append(const nlohmann::ordered_json& record);
  // Writes what is held; throws JobFileError naming the file and the system's reason, with every held record
  // in the message, when they still cannot be written.
  void finish();

  int64_t held() const { return static_cast<int64_t>(held_.size()); }
  int64_t dropped() const { return dropped_; }
  const std::filesystem::path& file() const { return file_; }

 private:
  MetricsLog(std::filesystem::path file, int fd);
  bool write_held();

  std::filesystem::path file_;
  int fd_ = -1;
  std::deque<std::string> held_;  // lines not yet written, oldest first
  std::string last_failure_;
  int64_t dropped_ = 0;
};

}  // namespace ringtrain::train
