// Owns writing one shard sample by sample when the samples' count is known only at the end (`prepare images`
// streams decoded or encoded images into it, skipping those that do not decode): raw samples into an extendible
// `images` dataset, or JPEG bytes into `encoded` with their offsets, image sizes and per-sample CRC-32C; the
// labels; every dataset's CRC-32C. Memory stays one chunk of data plus 24 bytes a sample. The file is written
// under a temporary name; the caller renames it once the whole split is written and its statistics are settled.
// Callers hold the HDF5 lock (io/hdf5_lock.h) around every call.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "io/dataset_meta.h"

namespace ringtrain::io {

struct AppendedSample {
  std::span<const uint8_t> bytes;  // raw: one sample's C x H x W pixels; jpeg: the image's JPEG bytes
  int32_t label = 0;
  int height = 0, width = 0;  // jpeg: the image's size
};

struct ShardPlace {
  std::filesystem::path temporary;  // written here
  int index = 0, count = 1;         // shard index within the split, shards in the split
  double expected_bytes = 0;        // reserved on disk up front (io/h5_write_file.h)
};

class ShardAppender {
 public:
  // `meta`'s mean and stddev are written as zeros (a value the header check refuses): the split's statistics are
  // known only when every shard is written, and settle_shard_statistics sets them.
  ShardAppender(const ShardPlace& place, const DatasetMeta& meta);
  ~ShardAppender();  // abandons a shard that was not committed (the caller removes the file)
  ShardAppender(const ShardAppender&) = delete;
  ShardAppender& operator=(const ShardAppender&) = delete;

  void append(const AppendedSample& sample);
  int64_t samples() const;

  // Writes what is buffered and the small datasets, their checksums, flushes, syncs and reads the file back.
  // DataError for an empty shard; DiskSpaceError when its file system is full.
  void commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Overwrites the placeholder statistics of a committed shard in place (no new space in the file) and syncs it.
void settle_shard_statistics(const std::filesystem::path& shard, std::span<const float> mean,
                             std::span<const float> stddev);

}  // namespace ringtrain::io
