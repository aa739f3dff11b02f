// Owns one split as one rank sees it: the split's index (every shard's header, checked), this rank's contiguous
// part of its samples, and the reader of the shards that hold that part.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include "io/dataset_meta.h"
#include "io/partition.h"
#include "dist/world.h"
#include "io/shard_reader.h"

namespace ringtrain::train {

struct SplitPart {
  std::string key;  // where the folder came from, for messages ("data.test")
  io::SplitIndex split;
  io::SampleRange range;
  std::unique_ptr<io::ShardReader> reader;
  const io::DatasetMeta& meta() const { return split.meta; }
};

// Collective: an error on any rank (a missing folder, a damaged shard) is every rank's, naming `key`.
SplitPart open_split_part(const dist::World& world, const std::filesystem::path& dir, const char* key);

}  // namespace ringtrain::train
