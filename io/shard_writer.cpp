// Owns write_splits: streaming each split's SampleSource into K shard files, each written under a temporary name
// and renamed into place only once every shard of every split is complete and closed, its images and labels each
// with their CRC-32C.
#include "io/shard_writer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <hdf5.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <ranges>
#include <cmath>
#include <limits>
#include <string_view>
#include <system_error>
#include <vector>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/host_memory.h"
#include "io/chunk_coverage.h"
#include "io/data_checksum.h"
#include "io/h5_attributes.h"
#include "io/h5_check.h"
#include "io/h5_handle.h"
#include "io/h5_write_file.h"
#include "io/hdf5_lock.h"
#include "io/shard_attributes.h"
#include "io/shard_header.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

// The nearest folder of `dir` that exists: where the split's bytes will land.
fs::path existing_ancestor(fs::path dir) {
  std::error_code error;
  dir = fs::absolute(dir, error);
  while (!dir.empty() && !fs::exists(dir, error) && dir != dir.parent_path()) dir = dir.parent_path();
  return dir;
}

// Before anything is allocated or written: a sample the reader can take, and memory for one shard's buffers (sizes
// in double, so an absurd shape cannot overflow the arithmetic). The disk is weighed for a prepare's splits together.
template <class Fail>
void check_sizes(const DatasetMeta& meta, const SplitWriteOptions& options, Fail fail) {
  const double sample_bytes = static_cast<double>(meta.shape.channels) * meta.shape.height * meta.shape.width;
  if (sample_bytes > static_cast<double>(detail::kMaxSampleValues))
    fail(fmt::format("a {} sample holds {:.3g} values; ringtrain reads samples of at most {} values", detail::describe(meta.shape),
                     sample_bytes, detail::kMaxSampleValues));
  const double shard_samples = std::ceil(static_cast<double>(options.samples) / options.shards);
  const double buffers = shard_samples * sizeof(int32_t) +
                         static_cast<double>(std::min<int64_t>(options.chunk_samples, static_cast<int64_t>(shard_samples))) * sample_bytes;
  if (const AvailableMemory memory = available_memory();
      memory.bytes > 0 && buffers > 0.8 * static_cast<double>(memory.bytes))
    fail(fmt::format("writing a shard of {:.0f} samples needs {} of memory, with {}; use more --shards{}",
                     shard_samples, byte_size_text(buffers), memory.text(), memory.or_remedy()));
}

// `described_only`: a split of no samples (write_description_split).
void validate(const fs::path& dir, const DatasetMeta& meta, const SplitWriteOptions& options, bool described_only = false) {
  const auto fail = [&](const std::string& why) {
    throw DataError(fmt::format("cannot write split '{}': {}", dir.string(), why));
  };
  if (options.shards < 1) fail(fmt::format("{} shards requested, need at least 1", options.shards));
  if (options.samples < options.shards && !described_only)
    fail(fmt::format("{} samples cannot fill {} shards; use at most {} shards", options.samples, options.shards,
                     std::max<int64_t>(options.samples, 1)));
  if (options.chunk_samples < 1) fail(fmt::format("chunk_samples is {}, need at least 1", options.chunk_samples));
  if (meta.shape.channels < 1 || meta.shape.height < 1 || meta.shape.width < 1)
    fail(fmt::format("sample shape {} has an empty dimension", detail::describe(meta.shape)));
  if (meta.num_classes < 1) fail(fmt::format("{} classes, need at least 1", meta.num_classes));
  if (!meta.class_names.empty() && meta.class_names.size() != static_cast<std::size_t>(meta.num_classes))
    fail(fmt::format("{} class names for {} classes", meta.class_names.size(), meta.num_classes));
  // A shard keeps its class names one a line.
  for (std::size_t c = 0; c < meta.class_names.size(); ++c)
    if (meta.class_names[c].find_first_of("\r\n") != std::string::npos)
      fail(fmt::format("class name {} ('{}') holds a line break, which a shard's list of names (one a line) cannot "
                       "keep; rename it",
                       c, meta.class_names[c]));
  const auto channels = static_cast<std::size_t>(meta.shape.channels);
  if (meta.mean.size() != channels || meta.stddev.size() != channels)
    fail(fmt::format("mean/std have {}/{} values for {} channels", meta.mean.size(), meta.stddev.size(), channels));
  check_sizes(meta, options, fail);
}

// A split folder's shard files (shard-*.h5) and temporaries (shard-*.h5.tmp).
struct ShardFiles {
  std::vector<fs::path> shards, temporaries;
};

ShardFiles shard_files_in(const fs::path& dir) {
  ShardFiles found;
  std::error_code error;
  for (fs::directory_iterator it(dir, error); !error && it != fs::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(shard_names::file_prefix)) continue;
    if (name.ends_with(".h5")) found.shards.push_back(it->path());
    if (name.ends_with(".h5.tmp")) found.temporaries.push_back(it->path());
  }
  if (error) throw DataError(fmt::format("split folder '{}' cannot be read: {}", dir.string(), error.message()));
  return found;
}

void remove_files(const std::vector<fs::path>& files) {
  std::error_code error;
  for (const fs::path& file : files)
    if (!fs::remove(file, error) && error)
      throw DataError(fmt::format("cannot remove old shard '{}': {}", file.string(), error.message()));
}

// Existing shards of an earlier prepare (possibly with another shard count) would mix with the new ones and
// fail open_split's shard_count check, so they are all removed, not just overwritten by name. Temporaries
// (shard-*.h5.tmp) of a prepare that was killed are never a shard: they go without asking, except `keep`.
void clear_old_shards(const fs::path& dir, bool overwrite, const std::vector<fs::path>& keep = {}) {
  ShardFiles found = shard_files_in(dir);
  if (!found.shards.empty() && !overwrite)
    throw DataError(fmt::format("'{}' already holds {} shard files (e.g. '{}'); pass --overwrite to replace them or "
                                "choose another --out folder",
                                dir.string(), found.shards.size(), found.shards.front().filename().string()));
  for (const fs::path& temporary : found.temporaries)
    if (std::find(keep.begin(), keep.end(), temporary) == keep.end()) found.shards.push_back(temporary);
  remove_files(found.shards);
}

// Largest number of samples per chunk that HDF5 accepts (a chunk must stay below 4 GiB) and that fits the
// shard (a chunk may not exceed a fixed dimension).
hsize_t chunk_rows(const SplitWriteOptions& options, int64_t shard_samples, int64_t sample_bytes) {
  const int64_t max_by_size = std::max<int64_t>(1, (int64_t{std::numeric_limits<uint32_t>::max()} - 1) / sample_bytes);
  return static_cast<hsize_t>(std::min({options.chunk_samples, shard_samples, max_by_size}));
}

void write_shard(const fs::path& file_path, const DatasetMeta& meta, const SplitWriteOptions& options, int index,
                 int64_t first_sample, int64_t shard_samples, const SampleSource& source) {
  const int64_t sample_bytes = meta.shape.elements();
  // A shard of no samples (write_description_split) has chunks of one, its images extensible so they may exceed it.
  const hsize_t rows_per_chunk = std::max<hsize_t>(1, chunk_rows(options, shard_samples, sample_bytes));
  const hsize_t image_dims[4] = {static_cast<hsize_t>(shard_samples), static_cast<hsize_t>(meta.shape.channels),
                                 static_cast<hsize_t>(meta.shape.height), static_cast<hsize_t>(meta.shape.width)};
  const hsize_t chunk_dims[4] = {rows_per_chunk, image_dims[1], image_dims[2], image_dims[3]};
  const hsize_t label_dims[1] = {static_cast<hsize_t>(shard_samples)};

  // Its bytes, and HDF5's chunk index (a B-tree entry of ~60 bytes a chunk) and headers.
  const double chunks = std::ceil(static_cast<double>(shard_samples) / static_cast<double>(rows_per_chunk));
  const double expected = chunks * static_cast<double>(rows_per_chunk) * static_cast<double>(sample_bytes) +
                          static_cast<double>(shard_samples) * sizeof(int32_t) + chunks * 128 + 64.0 * 1024;
  H5WriteFile file(file_path, expected);
  detail::write_shard_attributes(file.id(), meta, index, options.shards);

  const hsize_t extensible[4] = {H5S_UNLIMITED, image_dims[1], image_dims[2], image_dims[3]};
  const H5Dataspace image_space(H5_CHECK(H5Screate_simple(4, image_dims, shard_samples == 0 ? extensible : nullptr)));
  const H5PropList image_layout(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  // Chunked along N without filters: a reader's random sample is one contiguous byte range on disk. The CRC-32C
  // attributes written last stand in for a filter's checksum; `inspect` verifies them.
  H5_CHECK(H5Pset_chunk(image_layout.id(), 4, chunk_dims));
  H5Dataset images(H5_CHECK(H5Dcreate2(file.id(), shard_names::images, H5T_STD_U8LE, image_space.id(),
                                             H5P_DEFAULT, image_layout.id(), H5P_DEFAULT)));
  const H5Dataspace label_space(H5_CHECK(H5Screate_simple(1, label_dims, nullptr)));
  // A label that was never written reads as -1, which every reader refuses as out of range, not as class 0.
  const H5PropList label_layout(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  const int32_t unwritten_label = -1;
  H5_CHECK(H5Pset_fill_value(label_layout.id(), H5T_NATIVE_INT32, &unwritten_label));
  H5Dataset labels(H5_CHECK(H5Dcreate2(file.id(), shard_names::labels, H5T_STD_I32LE, label_space.id(),
                                             H5P_DEFAULT, label_layout.id(), H5P_DEFAULT)));

  std::vector<uint8_t> chunk_images(static_cast<std::size_t>(rows_per_chunk * static_cast<hsize_t>(sample_bytes)));
  std::vector<int32_t> shard_labels(static_cast<std::size_t>(shard_samples));  // 4 bytes a sample: small
  uint32_t images_crc = 0;  // of the images in row order, as `inspect` reads them back
  for (int64_t row = 0; row < shard_samples; row += static_cast<int64_t>(rows_per_chunk)) {
    const int64_t rows = std::min<int64_t>(static_cast<int64_t>(rows_per_chunk), shard_samples - row);
    const std::span<uint8_t> block_images(chunk_images.data(), static_cast<std::size_t>(rows * sample_bytes));
    const std::span<int32_t> block_labels(shard_labels.data() + row, static_cast<std::size_t>(rows));
    source(first_sample + row, rows, block_images, block_labels);
    images_crc = crc32c_extend(images_crc, block_images.data(), block_images.size());
    for (int64_t i = 0; i < rows; ++i)
      if (block_labels[static_cast<std::size_t>(i)] < 0 || block_labels[static_cast<std::size_t>(i)] >= meta.num_classes)
        throw DataError(fmt::format("sample {} has label {}, outside [0, {}); the source data is inconsistent",
                                    first_sample + row + i, block_labels[static_cast<std::size_t>(i)],
                                    meta.num_classes));
    const hsize_t start[4] = {static_cast<hsize_t>(row), 0, 0, 0};
    const hsize_t count[4] = {static_cast<hsize_t>(rows), image_dims[1], image_dims[2], image_dims[3]};
    H5_CHECK(H5Sselect_hyperslab(image_space.id(), H5S_SELECT_SET, start, nullptr, count, nullptr));
    const H5Dataspace memory_space(H5_CHECK(H5Screate_simple(4, count, nullptr)));
    H5_CHECK(H5Dwrite(images.id(), H5T_NATIVE_UINT8, memory_space.id(), image_space.id(), H5P_DEFAULT,
                      chunk_images.data()));
  }
  if (shard_samples > 0)
    H5_CHECK(H5Dwrite(labels.id(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, shard_labels.data()));
  detail::write_data_checksum(images.id(), images_crc);
  detail::write_data_checksum(labels.id(), crc32c(shard_labels.data(), shard_labels.size() * sizeof(int32_t)));
  // Checked, datasets first: closing one writes its cached chunks, and a file closed while they are open has its
  // real close (and any failure of it) deferred to the last of them.
  images.close();
  labels.close();
  file.commit();
}

// The splits of one prepare must fit on their file systems together, before anything is written.
void check_room_for_all(const std::vector<SplitToWrite>& splits) {
  struct Need {
    fs::path ancestor;
    double bytes = 0;
    std::vector<std::string> what;  // "40 samples of 1x8x8"
    std::vector<std::string> dirs;
  };
  std::vector<Need> needs;  // per existing ancestor
  for (const SplitToWrite& s : splits) {
    const double bytes = static_cast<double>(s.options.samples) * (static_cast<double>(s.meta.shape.elements()) + 4.0);
    const fs::path ancestor = existing_ancestor(s.dir);
    auto need = std::find_if(needs.begin(), needs.end(), [&](const Need& n) { return n.ancestor == ancestor; });
    if (need == needs.end()) need = needs.insert(needs.end(), Need{ancestor, 0.0, {}, {}});
    need->bytes += bytes;
    need->what.push_back(fmt::format("{} samples of {}", s.options.samples, detail::describe(s.meta.shape)));
    need->dirs.push_back(s.dir.string());
  }
  for (const Need& need : needs) {
    std::error_code error;
    const fs::space_info space = fs::space(need.ancestor, error);
    if (!error && need.bytes > static_cast<double>(space.available))
      throw DataError(fmt::format("cannot write split '{}'{}: {} take {} and the file system holding '{}' has {} free; "
                                  "use fewer samples or another --out folder",
                                  need.dirs.front(),
                                  need.dirs.size() > 1 ? fmt::format(" (with '{}')", fmt::join(need.dirs.begin() + 1,
                                                                                            need.dirs.end(), "', '"))
                                                       : std::string(),
                                  fmt::join(need.what, " and "), byte_size_text(need.bytes), need.ancestor.string(),
                                  byte_size_text(static_cast<double>(space.available))));
  }
}

// A shard written under its temporary name, and the name it takes once every shard of the prepare is complete.
struct WrittenShard {
  fs::path temporary, final;
  bool placed = false;  // renamed to its final name: only then is a file of that name this prepare's
};

void create_split_folder(const fs::path& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error)
    throw DataError(fmt::format("cannot create split folder '{}': {}; give --out a folder this user may write (or one "
                                "that does not exist yet)",
                                dir.string(), error.message()));
}

// Every shard of `split` under a temporary name (a prepare killed now leaves no file that is a shard).
void write_temporaries(const SplitToWrite& split, std::vector<WrittenShard>& written) {
  create_split_folder(split.dir);
  // Held across the source callbacks too: the open handles of the shard being written are HDF5 state.
  const Hdf5Lock lock;
  const SplitWriteOptions& options = split.options;
  const int64_t base = options.samples / options.shards;
  const int64_t extra = options.samples % options.shards;
  int64_t first_sample = 0;
  for (int index = 0; index < options.shards; ++index) {
    const int64_t shard_samples = base + (index < extra ? 1 : 0);
    const fs::path final_path = split.dir / shard_file_name(index, options.shards);
    fs::path temporary_path = final_path;
    temporary_path += ".tmp";
    written.push_back({temporary_path, final_path});
    try {
      write_shard(temporary_path, split.meta, options, index, first_sample, shard_samples, split.source);
      detail::verify_written_datasets(
          temporary_path,
          {{shard_names::images, static_cast<double>(shard_samples) * static_cast<double>(split.meta.shape.elements())},
           {shard_names::labels, static_cast<double>(shard_samples) * sizeof(int32_t)}});
    } catch (const DataError&) {
      throw;
    } catch (const std::exception& e) {
      throw DataError(fmt::format("cannot write split '{}': {}", split.dir.string(),
                                  why_shard_failed(temporary_path, split.dir, e)));
    }
    first_sample += shard_samples;
  }
}

// Only now are the folders' earlier shards replaced: until here a failure leaves them as they were. The first split
// (train) is renamed last, so a kill among the renames leaves it short of shards: nothing reads as a whole pair.
void put_in_place(const std::vector<SplitToWrite>& splits, std::vector<WrittenShard>& written, bool overwrite) {
  std::vector<fs::path> ours;
  for (const WrittenShard& shard : written) ours.push_back(shard.temporary);
  for (const SplitToWrite& split : splits) clear_old_shards(split.dir, overwrite, ours);
  for (WrittenShard& shard : std::views::reverse(written)) {
    std::error_code error;
    fs::rename(shard.temporary, shard.final, error);
    if (error)
      throw DataError(fmt::format("cannot put shard '{}' in place: {}", shard.final.string(), error.message()));
    shard.placed = true;
  }
}

}  // namespace

// "train-3fa2c1d0": one tag for the splits of one prepare, so a shard of the sibling split is told apart.
std::string split_id(const fs::path& dir, uint64_t tag) {
  return fmt::format("{}-{:016x}", dir.filename().string(), tag);
}

void write_splits(const std::vector<SplitToWrite>& given, bool overwrite) {
  std::vector<SplitToWrite> splits = given;
  const uint64_t tag = (uint64_t{std::random_device{}()} << 32) ^
                       static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  for (SplitToWrite& split : splits)
    if (split.meta.split_id.empty()) split.meta.split_id = split_id(split.dir, tag);
  std::vector<fs::path> dirs;
  for (const SplitToWrite& split : splits) {
    validate(split.dir, split.meta, split.options, split.described_only);
    dirs.push_back(split.dir);
  }
  check_room_for_all(splits);
  refuse_existing_splits(dirs, overwrite);
  std::vector<WrittenShard> written;
  try {
    for (const SplitToWrite& split : splits) write_temporaries(split, written);
    put_in_place(splits, written, overwrite);
  } catch (const DataError& e) {
    std::error_code error;
    for (const WrittenShard& shard : written) {
      fs::remove(shard.temporary, error);
      if (shard.placed) fs::remove(shard.final, error);  // renamed before a later rename failed; else an earlier one's
    }
    throw DataError(fmt::format("{}; nothing of this prepare is left in place, and shards already in {} are as they "
                                "were",
                                e.what(), dirs.size() == 1 ? "that folder" : "those folders"));
  } catch (...) {
    std::error_code error;
    for (const WrittenShard& shard : written) fs::remove(shard.temporary, error);
    throw;
  }
}

void write_split(const fs::path& dir, const DatasetMeta& meta, const SplitWriteOptions& options,
                 const SampleSource& source, bool overwrite) {
  write_splits({{dir, meta, options, source}}, overwrite);
}

void write_description_split(const fs::path& dir, const DatasetMeta& meta, bool overwrite) {
  const SplitWriteOptions one_empty_shard{.shards = 1, .samples = 0};
  write_splits({{dir, meta, one_empty_shard, [](int64_t, int64_t, std::span<uint8_t>, std::span<int32_t>) {}, true}},
               overwrite);
}

std::string shard_file_name(int index, int count) {
  return fmt::format("{}{:05d}-of-{:05d}.h5", shard_names::file_prefix, index, count);
}

void make_split_folder(const fs::path& dir) {
  create_split_folder(dir);
  remove_files(shard_files_in(dir).temporaries);
}

void remove_earlier_shards(const fs::path& dir) { remove_files(shard_files_in(dir).shards); }

void refuse_existing_splits(const std::vector<std::filesystem::path>& split_dirs, bool overwrite) {
  if (overwrite) return;
  for (const fs::path& dir : split_dirs) {
    std::error_code error;
    if (fs::is_directory(dir, error) && !detail::list_shard_files(dir).empty())
      throw DataError(fmt::format("'{}' already holds shards; pass --overwrite to replace them or choose another "
                                  "--out folder",
                                  dir.string()));
  }
}

std::string why_shard_failed(const fs::path& shard, const fs::path& dir, const std::exception& e) {
  if (dynamic_cast<const DiskSpaceError*>(&e) != nullptr)
    return fmt::format("{}; free space there or pick another --out folder, then re-run prepare with --overwrite",
                       e.what());
  const auto* known = dynamic_cast<const Error*>(&e);
  if (known != nullptr && known->code() != ExitCode::library) return e.what();
  // A disk that filled up after the room was checked: HDF5's stack buries the system's words; they lead here.
  if (known != nullptr && std::string_view(e.what()).find("No space left on device") != std::string_view::npos)
    return fmt::format("shard '{}' cannot be written: No space left on device; free space in '{}' or pick another "
                       "--out folder, then re-run prepare with --overwrite",
                       shard.string(), dir.string());
  if (known != nullptr)
    return fmt::format("shard '{}' cannot be written ({}); check the free space and permissions of '{}'", shard.string(),
                       detail::hdf5_detail(e), dir.string());
  return fmt::format("shard '{}' cannot be written: {}", shard.string(), e.what());
}

}  // namespace ringtrain::io
