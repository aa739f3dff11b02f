// Owns writing a split as K shard files of nearly equal size (what `prepare` produces), streaming samples
// so that a split larger than memory (ImageNet-like synthetic data) never has to be held at once.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <span>
#include <vector>

#include "io/dataset_meta.h"

namespace ringtrain::io {

struct SplitWriteOptions {
  int shards = 1;
  int64_t samples = 0;
  int64_t chunk_samples = 64;  // HDF5 chunk along N; one chunk is the unit of disk I/O
};

// Fills `images` (count x C x H x W) and `labels` (count) for global samples [first, first+count).
using SampleSource =
    std::function<void(int64_t first, int64_t count, std::span<uint8_t> images, std::span<int32_t> labels)>;

// One split of the splits a prepare writes together (train and test).
struct SplitToWrite {
  std::filesystem::path dir;
  DatasetMeta meta;
  SplitWriteOptions options;
  SampleSource source;
  bool described_only = false;  // a split of no samples (write_description_split)
};

// Writes every split's shard-XXXXX-of-YYYYY.h5 files into its folder (created if missing). Everything is checked
// first (each split, and the disk space of all of them together); every shard of every split is written under a
// temporary name, and only once all are complete do they replace the folders' earlier shards. So a failed or
// interrupted prepare leaves no new shard in place and the earlier dataset as it was: never a new train split
// beside an old test split. Refuses (DataError) a folder that already holds shards unless `overwrite` is set;
// with it, the earlier shards stay until the new ones are complete, so both must fit on the disk.
void write_splits(const std::vector<SplitToWrite>& splits, bool overwrite);

// write_splits of one split.
void write_split(const std::filesystem::path& dir, const DatasetMeta& meta, const SplitWriteOptions& options,
                 const SampleSource& source, bool overwrite);

// A split of one shard of no samples that carries only the description of its samples (shape, classes, the
// normalisation's mean and std, class names): what `ringtrain import` writes for predict and export to read an
// imported model's input from, as they read a trained model's from its training data.
void write_description_split(const std::filesystem::path& dir, const DatasetMeta& meta, bool overwrite);

// Creates `dir` if missing and removes the temporaries (shard-*.h5.tmp) of a prepare that was killed; an earlier
// prepare's shards stay until remove_earlier_shards, once the new ones are all written.
void make_split_folder(const std::filesystem::path& dir);

// Removes the shard files (shard-*.h5) in `dir`, not the temporaries: a prepare's last step before its renames.
void remove_earlier_shards(const std::filesystem::path& dir);

// The name of shard `index` of `count`: shard-00000-of-00008.h5.
std::string shard_file_name(int index, int count);

// Checked for both splits before either is written, so a refusal never leaves train/ new and test/ old:
// DataError when a folder already holds shards and `overwrite` is not set.
void refuse_existing_splits(const std::vector<std::filesystem::path>& split_dirs, bool overwrite);

// Why writing shard `shard` of the split in `dir` failed, for a DataError: the source's own errors as they are, a
// full disk with its remedy, HDF5's account of anything else kept short.
std::string why_shard_failed(const std::filesystem::path& shard, const std::filesystem::path& dir,
                             const std::exception& e);

}  // namespace ringtrain::io
