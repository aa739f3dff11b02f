// Owns examining one shard file's header (datasets' types and extents, root attributes) and checking a
// split's shards against each other. Shared by open_split, which stops at the first problem, and
// inspect_split, which lists them all. Internal to io/: callers hold the HDF5 lock.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "io/dataset_meta.h"

namespace ringtrain::io::detail {

// The most values one sample may hold (2^31): what the reader accepts, and so what prepare may write.
inline constexpr uint64_t kMaxSampleValues = uint64_t{1} << 31;
// The most classes a shard may declare: far beyond any real dataset, and what keeps per-class tables in range.
inline constexpr int kMaxClasses = 1 << 24;

// What one shard says about itself. Every field a problem prevented reading stays empty/-1.
struct ShardHeader {
  std::filesystem::path path;
  bool datasets_readable = false;  // every dataset opened with the expected rank and type
  SampleStorage storage = SampleStorage::raw;  // from the `storage` attribute
  int64_t image_count = -1;
  SampleShape image_shape;  // from the images extent
  int64_t label_count = -1;
  std::optional<int> num_classes, shard_index, shard_count;
  std::optional<SampleShape> attribute_shape;
  std::vector<float> mean, stddev;
  std::string provenance;
  std::vector<std::string> class_names;
  std::string split_id;  // empty in shards written before it existed
  std::vector<std::string> problems;  // phrases completing "shard 'PATH' ...", e.g. "has no dataset 'labels'"
  // The file cannot be opened for reading (permissions): its one problem says so and how to fix it, and no
  // rewrite of the split is called for.
  bool unreadable = false;
};

// The folder's shard-*.h5 regular files, sorted by name. The folder must exist.
std::vector<std::filesystem::path> list_shard_files(const std::filesystem::path& dir);
// Whether the folder holds one such file; false for a folder that cannot be read or does not exist.
bool holds_shard_files(const std::filesystem::path& dir) noexcept;

// Never throws for bad content: a file that cannot be read, is not HDF5, is truncated, or is missing pieces
// (datasets, attributes, chunks of its data) yields problems. Reads no sample data: cheap enough for every rank.
ShardHeader read_shard_header(const std::filesystem::path& file);

// Orders `headers` by shard_index (headers without one last) and returns split-level problems: index
// gaps or repeats, shard_count disagreeing with the files, shape/classes/statistics differing between shards.
std::vector<std::string> check_split_consistency(std::vector<ShardHeader>& headers);

DatasetMeta meta_of(const ShardHeader& header);

std::string describe(const SampleShape& shape);  // "3x224x224"

// The advice every data problem ends with: how to get a valid split back.
inline constexpr const char* rewrite_advice =
    "re-run `ringtrain prepare` (fashion-mnist, synthetic, arrays or images) with --overwrite to rewrite the split";

// The detail line HDF5 gave for a failed call, without ringtrain's call-site preamble.
std::string hdf5_detail(const std::exception& error);

}  // namespace ringtrain::io::detail
