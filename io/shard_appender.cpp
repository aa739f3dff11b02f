// Owns ShardAppender and settling a shard's statistics; see shard_appender.h.
#include "io/shard_appender.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/crc32c.h"
#include "common/error.h"
#include "io/data_checksum.h"
#include "io/h5_check.h"
#include "io/h5_file_format.h"
#include "io/h5_handle.h"
#include "io/h5_write_file.h"
#include "io/shard_attributes.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

// Encoded bytes are appended in blocks of this size (HDF5's chunk of `encoded`): a few photos at a time.
constexpr hsize_t kEncodedChunkBytes = hsize_t{1} << 20;
// Raw samples: 64 a chunk (as write_split), fewer when a sample is large (a chunk stays below 4 GiB and a few MiB).
hsize_t raw_chunk_rows(int64_t sample_bytes) {
  return static_cast<hsize_t>(std::clamp<int64_t>((int64_t{16} << 20) / std::max<int64_t>(sample_bytes, 1), 1, 64));
}

DatasetMeta with_placeholder_statistics(DatasetMeta meta) {
  std::fill(meta.mean.begin(), meta.mean.end(), 0.0f);
  std::fill(meta.stddev.begin(), meta.stddev.end(), 0.0f);
  return meta;
}

// A small array written whole (contiguous) with its CRC-32C.
template <typename T>
void write_small_dataset(hid_t file, const char* name, hid_t file_type, hid_t memory_type, std::span<const hsize_t> dims,
                         const std::vector<T>& values) {
  const H5Dataspace space(H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  H5Dataset set(H5_CHECK(H5Dcreate2(file, name, file_type, space.id(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Dwrite(set.id(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
  detail::write_data_checksum(set.id(), crc32c(values.data(), values.size() * sizeof(T)));
  set.close();
}

}  // namespace

struct ShardAppender::Impl {
  ShardPlace place;
  DatasetMeta meta;
  H5WriteFile file;
  H5Dataset data;  // `images` (raw) or `encoded` (jpeg), extendible along its first dimension
  int64_t sample_bytes = 0;          // raw
  hsize_t flush_elements = 0;        // rows (raw) or bytes (jpeg) buffered before a write
  std::vector<uint8_t> pending;      // appended, not yet written
  hsize_t written = 0;               // rows (raw) or bytes (jpeg) in `data`
  uint32_t data_crc = 0;             // of `data` in order, as `inspect` reads it back
  std::vector<int32_t> labels;
  std::vector<int64_t> offsets{0};   // jpeg
  std::vector<int32_t> sizes;        // jpeg: height, width per sample
  std::vector<uint32_t> crcs;        // jpeg

  Impl(const ShardPlace& p, const DatasetMeta& m) : place(p), meta(m), file(p.temporary, p.expected_bytes) {
    detail::write_shard_attributes(file.id(), with_placeholder_statistics(meta), place.index, place.count);
    sample_bytes = meta.shape.elements();
    if (meta.storage == SampleStorage::jpeg) {
      flush_elements = kEncodedChunkBytes;
      create_data(shard_names::encoded, {0}, {kEncodedChunkBytes});
    } else {
      flush_elements = raw_chunk_rows(sample_bytes);
      const auto c = static_cast<hsize_t>(meta.shape.channels), h = static_cast<hsize_t>(meta.shape.height),
                 w = static_cast<hsize_t>(meta.shape.width);
      create_data(shard_names::images, {0, c, h, w}, {flush_elements, c, h, w});
    }
  }

  bool encoded() const { return meta.storage == SampleStorage::jpeg; }

  // Chunked without filters (a sample is one contiguous byte range on disk for the reader's direct path), unlimited
  // along the first dimension.
  void create_data(const char* name, std::vector<hsize_t> dims, std::vector<hsize_t> chunk) {
    std::vector<hsize_t> max_dims = dims;
    max_dims[0] = H5S_UNLIMITED;
    const H5Dataspace space(H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), max_dims.data())));
    const H5PropList layout(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
    H5_CHECK(H5Pset_chunk(layout.id(), static_cast<int>(chunk.size()), chunk.data()));
    data = H5Dataset(H5_CHECK(H5Dcreate2(file.id(), name, H5T_STD_U8LE, space.id(), H5P_DEFAULT, layout.id(), H5P_DEFAULT)));
  }

  hsize_t pending_elements() const {
    return encoded() ? pending.size() : pending.size() / static_cast<std::size_t>(sample_bytes);
  }

  void write_pending() {
    const hsize_t count = pending_elements();
    if (count == 0) return;
    const int rank = encoded() ? 1 : 4;
    hsize_t dims[4] = {written + count, static_cast<hsize_t>(meta.shape.channels), static_cast<hsize_t>(meta.shape.height),
                       static_cast<hsize_t>(meta.shape.width)};
    H5_CHECK(H5Dset_extent(data.id(), dims));
    const H5Dataspace file_space(H5_CHECK(H5Dget_space(data.id())));
    hsize_t start[4] = {written, 0, 0, 0};
    hsize_t extent[4] = {count, dims[1], dims[2], dims[3]};
    H5_CHECK(H5Sselect_hyperslab(file_space.id(), H5S_SELECT_SET, start, nullptr, extent, nullptr));
    const H5Dataspace memory(H5_CHECK(H5Screate_simple(rank, extent, nullptr)));
    H5_CHECK(H5Dwrite(data.id(), H5T_NATIVE_UINT8, memory.id(), file_space.id(), H5P_DEFAULT, pending.data()));
    data_crc = crc32c_extend(data_crc, pending.data(), pending.size());
    written += count;
    pending.clear();
  }

  void append(const AppendedSample& sample) {
    if (sample.label < 0 || sample.label >= meta.num_classes)
      throw DataError(fmt::format("sample {} of shard '{}' has label {}, outside [0, {})", labels.size(),
                                  place.temporary.string(), sample.label, meta.num_classes));
    if (!encoded() && sample.bytes.size() != static_cast<std::size_t>(sample_bytes))
      throw std::logic_error(fmt::format("a raw sample of {} bytes for samples of {}", sample.bytes.size(), sample_bytes));
    labels.push_back(sample.label);
    if (encoded()) {
      offsets.push_back(offsets.back() + static_cast<int64_t>(sample.bytes.size()));
      sizes.insert(sizes.end(), {sample.height, sample.width});
      crcs.push_back(crc32c(sample.bytes.data(), sample.bytes.size()));
    }
    pending.insert(pending.end(), sample.bytes.begin(), sample.bytes.end());
    if (pending_elements() >= flush_elements) write_pending();
  }

  void commit() {
    if (labels.empty())
      throw DataError(fmt::format("shard '{}' would hold no sample: every image planned for it failed to decode",
                                  place.temporary.string()));
    write_pending();
    detail::write_data_checksum(data.id(), data_crc);
    data.close();
    const hsize_t n = labels.size();
    write_small_dataset(file.id(), shard_names::labels, H5T_STD_I32LE, H5T_NATIVE_INT32, std::span(&n, 1), labels);
    if (encoded()) {
      const hsize_t offset_count = n + 1, size_dims[2] = {n, 2};
      write_small_dataset(file.id(), shard_names::encoded_offsets, H5T_STD_I64LE, H5T_NATIVE_INT64,
                          std::span(&offset_count, 1), offsets);
      write_small_dataset(file.id(), shard_names::image_sizes, H5T_STD_I32LE, H5T_NATIVE_INT32, std::span(size_dims), sizes);
      write_small_dataset(file.id(), shard_names::sample_crc32c, H5T_STD_U32LE, H5T_NATIVE_UINT32, std::span(&n, 1), crcs);
    }
    file.commit();
    const double data_bytes = encoded() ? static_cast<double>(offsets.back())
                                        : static_cast<double>(n) * static_cast<double>(sample_bytes);
    detail::verify_written_datasets(place.temporary, {{encoded() ? shard_names::encoded : shard_names::images, data_bytes},
                                                      {shard_names::labels, static_cast<double>(n) * sizeof(int32_t)}});
  }
};

ShardAppender::ShardAppender(const ShardPlace& place, const DatasetMeta& meta)
    : impl_(std::make_unique<Impl>(place, meta)) {}
ShardAppender::~ShardAppender() = default;
void ShardAppender::append(const AppendedSample& sample) { impl_->append(sample); }
int64_t ShardAppender::samples() const { return static_cast<int64_t>(impl_->labels.size()); }
void ShardAppender::commit() { impl_->commit(); }

void settle_shard_statistics(const fs::path& shard, std::span<const float> mean, std::span<const float> stddev) {
  {
    H5File file(H5_CHECK(H5Fopen(shard.c_str(), H5F_ACC_RDWR, checksummed_file_access().id())));
    for (const auto& [name, values] : {std::pair{shard_names::mean, mean}, std::pair{shard_names::stddev, stddev}}) {
      H5Attribute attribute(H5_CHECK(H5Aopen(file.id(), name, H5P_DEFAULT)));
      H5_CHECK(H5Awrite(attribute.id(), H5T_NATIVE_FLOAT, values.data()));
      attribute.close();
    }
    H5_CHECK(H5Fflush(file.id(), H5F_SCOPE_LOCAL));
    file.close();
  }
  // The rename that follows makes the shard visible: its statistics are on disk first.
  const int fd = ::open(shard.c_str(), O_RDONLY | O_CLOEXEC);
  const bool synced = fd >= 0 && ::fsync(fd) == 0;
  const int error = errno;
  if (fd >= 0) ::close(fd);
  if (!synced)
    throw DataError(fmt::format("shard '{}' cannot be synced to disk: {}", shard.string(), std::strerror(error)));
}

}  // namespace ringtrain::io
