// Owns reading one rank's partition of a split: opens only the shard files that hold the partition and
// reads batches of samples by partition-local index. Not thread-safe per instance; HDF5 calls are
// serialised process-wide (io/hdf5_lock.h) so a training loader and an evaluation loader can coexist.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "io/dataset_meta.h"
#include "io/partition.h"

namespace ringtrain::io {

class ShardReader {
 public:
  ShardReader(const SplitIndex& split, SampleRange range);
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  int64_t size() const;  // samples in the partition
  const DatasetMeta& meta() const;
  const std::vector<std::filesystem::path>& opened_files() const;

  // Reads samples at partition-local indices (any order, repeats allowed) into `images`
  // (indices.size() x C x H x W uint8, in the order given) and `labels`. Groups contiguous runs per shard
  // into few HDF5 reads. Throws DataError naming the file on a read failure or a label outside
  // [0, num_classes).
  void read(std::span<const int64_t> indices, std::span<uint8_t> images, std::span<int32_t> labels);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringtrain::io
