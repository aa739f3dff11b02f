// Owns writing TensorBoard scalar summaries without TensorFlow: an events.out.tfevents.* file of TFRecords
// (length, masked CRC-32C, payload, masked CRC-32C), each an Event protobuf {wall_time, step,
// summary {value {tag, simple_value}}} encoded by hand (five fields do not justify a protobuf dependency).
// `tensorboard --logdir runs/` shows the curves while the run goes on: every record is flushed.
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
  // Creates <dir>/events.out.tfevents.<unix seconds>.<host>.<pid> and writes the file-version record.
  explicit TensorBoardWriter(const std::filesystem::path& dir);
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  const std::filesystem::path& file() const { return file_; }

 private:
  void record(const std::string& event);
  std::filesystem::path file_;
  std::ofstream out_;
};

}  // namespace ringtrain::obs
