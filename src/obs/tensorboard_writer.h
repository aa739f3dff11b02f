// Owns writing TensorBoard scalar summaries without TensorFlow: an events.out.tfevents.* file of TFRecords
// (length, masked CRC-32C, payload, masked CRC-32C), each an Event protobuf {wall_time, step,
// summary {value {tag, simple_value}}} encoded by hand (five fields do not justify a protobuf dependency).
// `tensorboard --logdir runs/` shows the curves while the run goes on: every record is flushed. The curves are a
// view of metrics.jsonl, which keeps every record; so a write that fails (a full disk) leaves no partial record,
// says once on stderr where the curves stop and why, and the writer stops instead of ending the run.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace ringtrain::obs {

class TensorBoardWriter {
 public:
  // Creates <dir>/events.out.tfevents.<unix seconds>.<host>.<pid> and writes the file-version record. A resumed
  // run passes `purge_from`, the first step it will write: a SessionLog START event at that step makes TensorBoard
  // drop what the earlier files hold from that step on (what the run wrote after its checkpoint, trained again now),
  // as PyTorch's SummaryWriter(purge_step=...) does. -1: none.
  explicit TensorBoardWriter(const std::filesystem::path& dir, int64_t purge_from = -1);
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  const std::filesystem::path& file() const { return file_; }
  bool stopped() const { return stopped_; }

 private:
  void record(const std::string& event, int64_t step);
  std::filesystem::path file_;
  std::ofstream out_;
  std::streamoff written_ = 0;  // bytes of whole records in the file
  bool stopped_ = false;
};

}  // namespace ringtrain::obs
