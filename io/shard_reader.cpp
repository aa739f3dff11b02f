// Owns ShardReader: the open shard files of one rank's partition, the partition's labels (read once and
// range-checked up front), and batched random reads of images.
#include "io/shard_reader.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "common/crc32c.h"
#include "common/error.h"
#include "io/data_checksum.h"
#include "io/encoded_slice.h"
#include "io/h5_check.h"
#include "io/h5_handle.h"
#include "io/hdf5_lock.h"
#include "io/shard_header.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

// A read-only POSIX descriptor for the direct path; closed with the shard.
struct FileDescriptor {
  int fd = -1;
  FileDescriptor() = default;
  explicit FileDescriptor(int f) : fd(f) {}
  FileDescriptor(FileDescriptor&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  FileDescriptor& operator=(FileDescriptor&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

struct OpenShard {
  fs::path path;
  int64_t partition_begin = 0;  // partition-local index of the slice's first sample
  int64_t row_begin = 0;        // that sample's row in the shard file
  int64_t rows = 0;
  H5File file;
  H5Dataset images;
  H5Dataspace file_space;  // reused for every read's selection
  // Direct path: where each chunk of `images` lies in the file, when the chunks are stored unfiltered and hold
  // whole samples (what `prepare` writes). Empty: read through HDF5.
  std::vector<haddr_t> chunk_offsets;
  int64_t rows_per_chunk = 0;
  FileDescriptor raw;
  std::optional<detail::EncodedSlice> encoded;  // encoded splits: the slice's offsets, sizes, checksums
};

// A run of consecutive distinct rows of one shard, and the span of the sorted request that asks for them
// (more entries than rows when the batch repeats an index).
struct Run {
  std::size_t shard = 0;
  int64_t row = 0;  // first row in the shard file
  int64_t length = 0;
  std::size_t request_begin = 0, request_end = 0;
};

}  // namespace

struct ShardReader::Impl {
  DatasetMeta meta;
  SampleRange range;
  int64_t sample_bytes = 0;
  std::vector<fs::path> opened_files;
  std::vector<OpenShard> shards;
  std::vector<int32_t> labels;  // one per partition sample
  H5Dataspace one_sample_space;  // memory space of the most common run, made once

  // Scratch reused across reads so a steady-state read allocates nothing.
  std::vector<std::pair<int64_t, std::size_t>> request;  // (partition index, position in the caller's batch)
  std::vector<Run> runs;
  std::vector<uint8_t> staging;

  [[noreturn]] void fail_read(const OpenShard& shard, const std::exception& error) const {
    throw DataError(fmt::format("reading samples from shard '{}' failed, the file is truncated or corrupt ({}); {}",
                                shard.path.string(), detail::hdf5_detail(error), detail::rewrite_advice));
  }

  void open(const SplitIndex& split, const ShardSlice& slice, int64_t partition_begin);
  template <class Fail>
  void open_images(const SplitIndex& split, const ShardSlice& slice, OpenShard& shard, hid_t access, Fail fail) const;
  void map_chunks(OpenShard& shard, const hsize_t (&dims)[4]) const;
  void read_run_direct(const OpenShard& shard, const Run& run, uint8_t* target) const;
  void plan(std::span<const int64_t> indices);
  void read_runs(std::span<uint8_t> images);
  void copy_from_staging(const Run& run, const uint8_t* staged, std::span<uint8_t> images) const;
};

template <class Fail>
void ShardReader::Impl::open_images(const SplitIndex& split, const ShardSlice& slice, OpenShard& shard, hid_t access,
                                    Fail fail) const {
  shard.images = H5Dataset(H5_CHECK(H5Dopen2(shard.file.id(), shard_names::images, access)));
  shard.file_space = H5Dataspace(H5_CHECK(H5Dget_space(shard.images.id())));
  hsize_t dims[4] = {};
  if (H5_CHECK(H5Sget_simple_extent_ndims(shard.file_space.id())) != 4) fail("no longer has rank-4 images");
  H5_CHECK(H5Sget_simple_extent_dims(shard.file_space.id(), dims, nullptr));
  const SampleShape shape{static_cast<int>(dims[1]), static_cast<int>(dims[2]), static_cast<int>(dims[3])};
  // The folder may have been rewritten since open_split read the headers.
  if (static_cast<int64_t>(dims[0]) != split.shards[slice.shard].samples || !(shape == meta.shape))
    fail(fmt::format("changed since the split was opened ({} samples of {}, expected {} of {})", dims[0],
                     detail::describe(shape), split.shards[slice.shard].samples, detail::describe(meta.shape)));

  map_chunks(shard, dims);
}

void ShardReader::Impl::open(const SplitIndex& split, const ShardSlice& slice, int64_t partition_begin) {
  OpenShard shard;
  shard.path = split.shards[slice.shard].path;
  shard.partition_begin = partition_begin;
  shard.row_begin = slice.begin;
  shard.rows = slice.size();
  const auto fail = [&](const std::string& why) {
    throw DataError(fmt::format("shard '{}' {}; {}", shard.path.string(), why, detail::rewrite_advice));
  };
  try {
    shard.file = H5File(H5_CHECK(H5Fopen(shard.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
    const H5PropList access(H5_CHECK(H5Pcreate(H5P_DATASET_ACCESS)));
    // No chunk cache: HDF5 then reads just the requested samples' bytes instead of whole chunks, which is
    // what random access wants (a shuffled batch rarely touches a chunk twice). Measured on 64 random
    // 1x28x28 samples of 30,000: 237 us per batch without the cache, 552 us with the default 1 MiB one.
    H5_CHECK(H5Pset_chunk_cache(access.id(), 0, 0, H5D_CHUNK_CACHE_W0_DEFAULT));
    if (meta.storage == SampleStorage::jpeg)
      shard.encoded.emplace(shard.file.id(), shard.path, slice.begin, slice.size());
    else
      open_images(split, slice, shard, access.id(), fail);

    // The shard's labels whole (4 bytes a sample), so their CRC-32C is checked: a flipped byte in a label would
    // otherwise train on another class, unseen.
    const H5Dataset label_set(H5_CHECK(H5Dopen2(shard.file.id(), shard_names::labels, H5P_DEFAULT)));
    hsize_t total = 0;
    {
      const H5Dataspace label_space(H5_CHECK(H5Dget_space(label_set.id())));
      H5_CHECK(H5Sget_simple_extent_dims(label_space.id(), &total, nullptr));
    }
    if (total < static_cast<hsize_t>(slice.end)) fail(fmt::format("holds {} labels, fewer than its samples", total));
    std::vector<int32_t> all(static_cast<std::size_t>(total));
    H5_CHECK(H5Dread(label_set.id(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, all.data()));
    if (const std::optional<uint32_t> stored = detail::read_data_checksum(label_set.id())) {
      const uint32_t read = crc32c(all.data(), all.size() * sizeof(int32_t));
      if (*stored != read)
        fail(fmt::format("is damaged: its labels fail their checksum (CRC-32C {:08x} stored, {:08x} read)", *stored,
                         read));
    }
    std::copy_n(all.begin() + slice.begin, slice.size(), labels.begin() + partition_begin);
  } catch (const DataError&) {
    throw;
  } catch (const Error& e) {
    fail(fmt::format("cannot be read, the file is truncated or corrupt ({})", detail::hdf5_detail(e)));
  }
  for (int64_t i = 0; i < slice.size(); ++i) {
    const int32_t label = labels[static_cast<std::size_t>(partition_begin + i)];
    if (label < 0 || label >= meta.num_classes)
      fail(fmt::format("has label {} at sample {}, outside [0, {})", label, slice.begin + i, meta.num_classes));
  }
  opened_files.push_back(shard.path);
  shards.push_back(std::move(shard));
}

// HDF5 spends most of a small sample's read in mapping the hyperslab selection onto chunks (1x28x28: 312 us per
// shuffled batch of 64 against 62 us for the same pread()s). Unfiltered chunks of whole samples are plain bytes
// in the file, so their offsets are looked up once here and samples are then read with pread(). Anything else
// (filters, partial-sample chunks, unallocated chunks, a contiguous layout) keeps the HDF5 path.
void ShardReader::Impl::map_chunks(OpenShard& shard, const hsize_t (&dims)[4]) const {
  const H5PropList create(H5_CHECK(H5Dget_create_plist(shard.images.id())));
  if (H5_CHECK(H5Pget_layout(create.id())) != H5D_CHUNKED || H5_CHECK(H5Pget_nfilters(create.id())) != 0) return;
  hsize_t chunk[4] = {};
  if (H5_CHECK(H5Pget_chunk(create.id(), 4, chunk)) != 4 || chunk[0] == 0) return;
  if (chunk[1] != dims[1] || chunk[2] != dims[2] || chunk[3] != dims[3]) return;
  const hsize_t expected = (dims[0] + chunk[0] - 1) / chunk[0];
  hsize_t stored = 0;
  H5_CHECK(H5Dget_num_chunks(shard.images.id(), shard.file_space.id(), &stored));
  if (stored != expected || expected == 0) return;
  std::error_code ec;
  const auto file_bytes = fs::file_size(shard.path, ec);
  if (ec) return;
  const hsize_t chunk_bytes = chunk[0] * static_cast<hsize_t>(sample_bytes);
  std::vector<haddr_t> offsets(expected, HADDR_UNDEF);
  for (hsize_t i = 0; i < stored; ++i) {
    hsize_t origin[4] = {};
    unsigned filter_mask = 0;
    haddr_t address = HADDR_UNDEF;
    hsize_t size = 0;
    H5_CHECK(H5Dget_chunk_info(shard.images.id(), shard.file_space.id(), i, origin, &filter_mask, &address, &size));
    const hsize_t index = origin[0] / chunk[0];
    if (index >= expected || size != chunk_bytes || address == HADDR_UNDEF) return;
    if (address + size > file_bytes)
      throw DataError(fmt::format("shard '{}' is truncated: chunk {} of 'images' ends at byte {} of a {}-byte file; {}",
                                  shard.path.string(), index, address + size, file_bytes, detail::rewrite_advice));
    offsets[index] = address;
  }
  if (std::find(offsets.begin(), offsets.end(), HADDR_UNDEF) != offsets.end()) return;
  FileDescriptor raw(::open(shard.path.c_str(), O_RDONLY | O_CLOEXEC));
  if (raw.fd < 0) return;
  shard.chunk_offsets = std::move(offsets);
  shard.rows_per_chunk = static_cast<int64_t>(chunk[0]);
  shard.raw = std::move(raw);
}

// A run's rows are contiguous in the file within one chunk; a run crossing a chunk boundary takes one pread per
// chunk.
void ShardReader::Impl::read_run_direct(const OpenShard& shard, const Run& run, uint8_t* target) const {
  const auto bytes = static_cast<std::size_t>(sample_bytes);
  int64_t row = run.row;
  const int64_t end = run.row + run.length;
  while (row < end) {
    const int64_t chunk = row / shard.rows_per_chunk;
    const int64_t rows = std::min(end, (chunk + 1) * shard.rows_per_chunk) - row;
    auto offset = static_cast<off_t>(shard.chunk_offsets[static_cast<std::size_t>(chunk)] +
                                     static_cast<haddr_t>(row - chunk * shard.rows_per_chunk) * bytes);
    std::size_t left = static_cast<std::size_t>(rows) * bytes;
    while (left > 0) {
      const ssize_t got = ::pread(shard.raw.fd, target, left, offset);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0)
        throw DataError(fmt::format("reading samples from shard '{}' failed at byte {}: {}; {}", shard.path.string(),
                                    offset, got == 0 ? "unexpected end of file" : std::strerror(errno),
                                    detail::rewrite_advice));
      target += got;
      offset += got;
      left -= static_cast<std::size_t>(got);
    }
    row += rows;
  }
}

ShardReader::ShardReader(const SplitIndex& split, SampleRange range) : impl_(std::make_unique<Impl>()) {
  impl_->meta = split.meta;
  impl_->range = range;
  impl_->sample_bytes = split.meta.shape.elements();
  const std::vector<ShardSlice> slices = slices_for_range(split.shard_sizes(), range);
  impl_->labels.resize(static_cast<std::size_t>(range.size()));
  const Hdf5Lock lock;
  try {
    int64_t partition_begin = 0;
    for (const ShardSlice& slice : slices) {
      impl_->open(split, slice, partition_begin);
      partition_begin += slice.size();
    }
  } catch (...) {
    impl_.reset();  // closes the files opened so far while the lock is still held
    throw;
  }
}

ShardReader::~ShardReader() {
  const Hdf5Lock lock;
  impl_.reset();
}

int64_t ShardReader::size() const { return impl_->range.size(); }
const DatasetMeta& ShardReader::meta() const { return impl_->meta; }
const std::vector<fs::path>& ShardReader::opened_files() const { return impl_->opened_files; }

// Sorts the request and cuts it into runs of consecutive rows, never crossing a shard boundary.
void ShardReader::Impl::plan(std::span<const int64_t> indices) {
  request.clear();
  for (std::size_t position = 0; position < indices.size(); ++position) request.emplace_back(indices[position], position);
  std::sort(request.begin(), request.end());
  runs.clear();
  std::size_t shard = 0;
  for (std::size_t i = 0; i < request.size(); ++i) {
    const int64_t index = request[i].first;
    while (index >= shards[shard].partition_begin + shards[shard].rows) ++shard;
    const int64_t row = shards[shard].row_begin + (index - shards[shard].partition_begin);
    if (!runs.empty()) {
      Run& last = runs.back();
      if (last.shard == shard && row == last.row + last.length - 1) {  // repeat of the run's last row
        last.request_end = i + 1;
        continue;
      }
      if (last.shard == shard && row == last.row + last.length) {
        ++last.length;
        last.request_end = i + 1;
        continue;
      }
    }
    runs.push_back({shard, row, 1, i, i + 1});
  }
}

// `staged` holds the run's rows in order; each request entry gets its row.
void ShardReader::Impl::copy_from_staging(const Run& run, const uint8_t* staged, std::span<uint8_t> images) const {
  const auto bytes = static_cast<std::size_t>(sample_bytes);
  const int64_t first_index = request[run.request_begin].first;
  for (std::size_t i = run.request_begin; i < run.request_end; ++i) {
    const auto [index, position] = request[i];
    std::memcpy(images.data() + position * bytes, staged + static_cast<std::size_t>(index - first_index) * bytes, bytes);
  }
}

// One H5Dread per run. A single read of the union of a shard's runs (H5S_SELECT_OR) was measured and is
// far slower: HDF5 1.10 maps an irregular selection onto the chunks element by element (profile:
// H5S_select_iterate, H5S_hyper_add_span_element), so its CPU cost grows with every byte, while a single
// block is mapped in one step. 64 random samples of a shard, 1x28x28 (30,000 samples): 237 us per batch run
// by run vs 3.8 ms as a union; 3x224x224 (1,024 samples): 1.1 ms vs 620 ms.
void ShardReader::Impl::read_runs(std::span<uint8_t> images) {
  const auto bytes = static_cast<std::size_t>(sample_bytes);
  const auto channels = static_cast<hsize_t>(meta.shape.channels);
  const auto height = static_cast<hsize_t>(meta.shape.height);
  const auto width = static_cast<hsize_t>(meta.shape.width);
  if (!one_sample_space.valid()) {
    const hsize_t one[4] = {1, channels, height, width};
    one_sample_space = H5Dataspace(H5_CHECK(H5Screate_simple(4, one, nullptr)));
  }
  for (const Run& run : runs) {
    OpenShard& shard = shards[run.shard];
    // A single sample asked for once (the common case in a shuffled batch) goes straight to its place.
    const bool direct = run.length == 1 && run.request_end - run.request_begin == 1;
    uint8_t* target = images.data() + request[run.request_begin].second * bytes;
    if (!direct) {
      staging.resize(static_cast<std::size_t>(run.length) * bytes);
      target = staging.data();
    }
    if (shard.raw.fd >= 0) {
      read_run_direct(shard, run, target);
      if (!direct) copy_from_staging(run, staging.data(), images);
      continue;
    }
    try {
      const hsize_t start[4] = {static_cast<hsize_t>(run.row), 0, 0, 0};
      const hsize_t count[4] = {static_cast<hsize_t>(run.length), channels, height, width};
      H5_CHECK(H5Sselect_hyperslab(shard.file_space.id(), H5S_SELECT_SET, start, nullptr, count, nullptr));
      H5Dataspace run_space;
      if (run.length != 1) run_space = H5Dataspace(H5_CHECK(H5Screate_simple(4, count, nullptr)));
      const hid_t memory = run.length == 1 ? one_sample_space.id() : run_space.id();
      H5_CHECK(H5Dread(shard.images.id(), H5T_NATIVE_UINT8, memory, shard.file_space.id(), H5P_DEFAULT, target));
    } catch (const Error& e) {
      fail_read(shard, e);
    }
    if (!direct) copy_from_staging(run, staging.data(), images);
  }
}

void ShardReader::read(std::span<const int64_t> indices, std::span<uint8_t> images, std::span<int32_t> labels) {
  Impl& impl = *impl_;
  const auto count = indices.size();
  if (impl.meta.storage != SampleStorage::raw)
    throw Error(ExitCode::internal, "ShardReader::read: an encoded split's samples are read with read_encoded");
  if (images.size() != count * static_cast<std::size_t>(impl.sample_bytes) || labels.size() != count)
    throw Error(ExitCode::internal,
                fmt::format("ShardReader::read: {} indices need {} image bytes and {} labels, got {} and {}", count,
                            count * static_cast<std::size_t>(impl.sample_bytes), count, images.size(), labels.size()));
  for (const int64_t index : indices)
    if (index < 0 || index >= impl.range.size())
      throw Error(ExitCode::internal, fmt::format("ShardReader::read: index {} is outside the partition's {} samples",
                                                  index, impl.range.size()));
  for (std::size_t i = 0; i < count; ++i) labels[i] = impl.labels[static_cast<std::size_t>(indices[i])];
  if (count == 0) return;

  const Hdf5Lock lock;
  impl.plan(indices);
  impl.read_runs(images);
}

namespace {

const OpenShard& shard_of(const std::vector<OpenShard>& shards, int64_t index) {
  return *(std::upper_bound(shards.begin(), shards.end(), index,
                            [](int64_t at, const OpenShard& s) { return at < s.partition_begin; }) -
           1);
}

void check_index(int64_t index, const SampleRange& range, const char* caller) {
  if (index < 0 || index >= range.size())
    throw Error(ExitCode::internal,
                fmt::format("ShardReader::{}: index {} is outside the partition's {} samples", caller, index, range.size()));
}

}  // namespace

int64_t ShardReader::largest_stored_sample_bytes() const {
  if (impl_->meta.storage != SampleStorage::jpeg) return impl_->sample_bytes;
  int64_t largest = 0;
  for (const OpenShard& shard : impl_->shards) largest = std::max(largest, shard.encoded->largest_bytes());
  return largest;
}

std::string ShardReader::sample_place(int64_t index) const {
  const OpenShard& shard = shard_of(impl_->shards, index);
  const int64_t row = index - shard.partition_begin;
  if (shard.encoded) return shard.encoded->where(row);
  return fmt::format("shard '{}', sample {}", shard.path.string(), shard.row_begin + row);
}

ShardReader::EncodedSample ShardReader::read_encoded_sample(int64_t index, std::vector<uint8_t>& bytes) const {
  const Impl& impl = *impl_;
  if (impl.meta.storage != SampleStorage::jpeg)
    throw Error(ExitCode::internal, "ShardReader::read_encoded_sample: not an encoded split");
  check_index(index, impl.range, "read_encoded_sample");
  const OpenShard& shard = shard_of(impl.shards, index);
  const int64_t row = index - shard.partition_begin;
  shard.encoded->read(row, bytes);
  return {shard.encoded->height(row), shard.encoded->width(row)};
}

void ShardReader::read_labels(std::span<const int64_t> indices, std::span<int32_t> labels) const {
  for (std::size_t i = 0; i < indices.size(); ++i) {
    check_index(indices[i], impl_->range, "read_labels");
    labels[i] = impl_->labels[static_cast<std::size_t>(indices[i])];
  }
}

void ShardReader::read_encoded(std::span<const int64_t> indices, EncodedBatch& batch, std::span<int32_t> labels) {
  if (labels.size() != indices.size())
    throw Error(ExitCode::internal, "ShardReader::read_encoded: labels of another size than the indices");
  batch.clear();
  read_labels(indices, labels);
  for (const int64_t index : indices) {
    const EncodedSample sample = read_encoded_sample(index, batch.bytes);
    batch.offsets.push_back(batch.bytes.size());
    batch.heights.push_back(sample.height);
    batch.widths.push_back(sample.width);
  }
}

}  // namespace ringtrain::io
