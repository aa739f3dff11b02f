// Owns reading one rank's partition of a split: opens only the shard files that hold the partition and
// reads batches of samples by partition-local index. Not thread-safe per instance; HDF5 calls are
// serialised process-wide (io/hdf5_lock.h) so a training loader and an evaluation loader can coexist.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/dataset_meta.h"
#include "io/partition.h"

namespace ringtrain::io {

// One batch of encoded samples (a split of SampleStorage::jpeg): each sample's JPEG bytes and its image's size.
struct EncodedBatch {
  std::vector<uint8_t> bytes;
  std::vector<std::size_t> offsets{0};  // sample i is bytes[offsets[i], offsets[i + 1])
  std::vector<int> heights, widths;

  std::size_t count() const { return heights.size(); }
  std::span<const uint8_t> sample(std::size_t i) const {
    return std::span(bytes).subspan(offsets[i], offsets[i + 1] - offsets[i]);
  }
  void clear() {
    bytes.clear();
    offsets.assign(1, 0);
    heights.clear();
    widths.clear();
  }
};

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

  // Encoded splits: the samples' JPEG bytes in the order given, each checked against its CRC-32C (DataError naming
  // the shard and sample when it fails), with their image sizes.
  void read_encoded(std::span<const int64_t> indices, EncodedBatch& batch, std::span<int32_t> labels);

  // One encoded sample's bytes (appended to `bytes`, checked against its CRC-32C) and its image's size. Safe to call
  // from several threads at once (the loader's decoding threads each read the samples they decode).
  struct EncodedSample {
    int height = 0, width = 0;
  };
  EncodedSample read_encoded_sample(int64_t index, std::vector<uint8_t>& bytes) const;

  // The labels of the partition's samples at `indices` (they are read when the reader opens).
  void read_labels(std::span<const int64_t> indices, std::span<int32_t> labels) const;

  // The bytes of the partition's largest sample as stored: C x H x W for a raw split, the longest JPEG's for an
  // encoded one (what a queued batch of its bytes holds per sample at most).
  int64_t largest_stored_sample_bytes() const;

  // "shard 'PATH', sample N": where the partition's sample `index` lives, for messages about it.
  std::string sample_place(int64_t index) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringtrain::io
