// Owns deciding, before any pixel is decoded, which image files make which shard of which split: the folders
// scanned, the test split held out per class (seeded) when no test folder is given, the training files in a seeded
// random order, each split dealt into shards of nearly equal counts. Every rank of a parallel prepare computes the
// same plan from the same folders and writes the shards it owns (shard k: rank k mod ranks). A shard is a list of
// 4-byte file numbers into its folder's compact file list, so the plan of an ImageNet-sized tree stays small.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "io/image_folder.h"

namespace ringtrain::io {

struct PlannedShard {
  int index = 0;
  std::vector<uint32_t> files;  // into the split's folder
};

struct SplitPlan {
  std::string name;  // "train" or "test"
  std::filesystem::path dir;
  std::shared_ptr<const ImageFolder> folder;
  std::vector<PlannedShard> shards;
  int64_t files() const;
  // An estimate of the size on disk of `shard`'s files, for the space its shard reserves: the mean of up to 64 of
  // them, spread over it, times its count. Asked by the rank that writes the shard alone (stat()ing every file of an
  // ImageNet tree, or a sample of every shard's on every rank, would cost a parallel file system minutes).
  double source_bytes(const PlannedShard& shard) const;
};

struct ImagesPlan {
  std::vector<std::string> class_names;
  SplitPlan train, test;
  std::string test_origin;  // "folder 'X'" or "held out: F per class, seed S"
};

struct PlanOptions {
  std::filesystem::path source, test_source, out;  // test_source empty: hold out test_fraction per class
  double test_fraction = 0.1;
  uint64_t seed = 1;
  int shards = 1;  // per split, at most its file count
};

// Throws DataError for a folder scan_image_folder refuses, or a hold-out that leaves a split empty.
ImagesPlan plan_images(const PlanOptions& options);

// The shards of `plan` that `rank` of `ranks` writes.
std::vector<const PlannedShard*> shards_of_rank(const SplitPlan& plan, int rank, int ranks);

}  // namespace ringtrain::io
