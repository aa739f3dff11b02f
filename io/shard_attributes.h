// Owns what every shard writer shares: the root attributes that describe a shard (classes, shape, statistics,
// provenance, storage, its place in the split) and the read-back that proves a written shard's datasets whole
// before it takes its name. Internal to io/: callers hold the HDF5 lock.
#pragma once
#include <hdf5.h>

#include <filesystem>
#include <initializer_list>
#include <utility>

#include "io/dataset_meta.h"

namespace ringtrain::io::detail {

void write_shard_attributes(hid_t file, const DatasetMeta& meta, int index, int count);

// Each named dataset of the file has every chunk in its index and at least its bytes stored; DataError otherwise.
// (Its content is the source's; readers judge that, as they do any shard's.)
void verify_written_datasets(const std::filesystem::path& file,
                             std::initializer_list<std::pair<const char*, double>> datasets_and_bytes);

}  // namespace ringtrain::io::detail
