// Owns `inspect`: per-shard counts, class histograms and validation of every shard of a split.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "io/dataset_meta.h"

namespace ringtrain::io {

struct ShardReport {
  std::filesystem::path path;
  int64_t samples = 0;
  std::vector<int64_t> class_histogram;  // num_classes entries
  std::vector<std::string> problems;     // empty when the shard is valid
  std::vector<std::string> unchecked;    // datasets without a stored CRC-32C (shards of an older ringtrain)
  bool unreadable = false;               // its one problem is a permission to fix, not a split to rewrite
};

struct SplitReport {
  std::filesystem::path dir;
  DatasetMeta meta;
  std::vector<ShardReport> shards;
  std::vector<std::string> problems;  // split-level problems (inconsistent shards, missing files)
  bool valid() const;
};

// Never throws for a bad dataset: every problem found is listed (label out of range, wrong image shape or
// dtype, truncated file, a chunk missing, data failing its CRC-32C, ...). Reads every label and every image to
// verify their checksums. Throws DataError only when `dir` does not exist.
SplitReport inspect_split(const std::filesystem::path& dir);

// Human-readable report for the terminal.
std::string format_report(const SplitReport& report);

}  // namespace ringtrain::io
