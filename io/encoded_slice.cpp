// Owns EncodedSlice; see encoded_slice.h.
#include "io/encoded_slice.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/crc32c.h"
#include "common/error.h"
#include "io/dataset_meta.h"
#include "io/h5_check.h"
#include "io/h5_handle.h"
#include "io/hdf5_lock.h"
#include "io/shard_header.h"

namespace ringtrain::io::detail {
namespace fs = std::filesystem;

namespace {

constexpr int kMaxJpegSide = 65535;  // a JPEG's frame header holds each side in 16 bits

// Rows [first, first + count) of a dataset of rank 1 or 2 (`columns` values a row) into `out`.
template <typename T>
std::vector<T> read_rows(hid_t file, const char* name, hid_t memory_type, int64_t first, int64_t count, hsize_t columns) {
  const H5Dataset set(H5_CHECK(H5Dopen2(file, name, H5P_DEFAULT)));
  const H5Dataspace space(H5_CHECK(H5Dget_space(set.id())));
  const int rank = columns > 1 ? 2 : 1;
  const hsize_t start[2] = {static_cast<hsize_t>(first), 0}, extent[2] = {static_cast<hsize_t>(count), columns};
  H5_CHECK(H5Sselect_hyperslab(space.id(), H5S_SELECT_SET, start, nullptr, extent, nullptr));
  const H5Dataspace memory(H5_CHECK(H5Screate_simple(rank, extent, nullptr)));
  std::vector<T> values(static_cast<std::size_t>(count) * columns);
  H5_CHECK(H5Dread(set.id(), memory_type, memory.id(), space.id(), H5P_DEFAULT, values.data()));
  return values;
}

}  // namespace

EncodedSlice::EncodedSlice(hid_t file, fs::path path, int64_t first_row, int64_t rows)
    : path_(std::move(path)), first_row_(first_row) {
  offsets_ = read_rows<int64_t>(file, shard_names::encoded_offsets, H5T_NATIVE_INT64, first_row, rows + 1, 1);
  sizes_ = read_rows<int32_t>(file, shard_names::image_sizes, H5T_NATIVE_INT32, first_row, rows, 2);
  crcs_ = read_rows<uint32_t>(file, shard_names::sample_crc32c, H5T_NATIVE_UINT32, first_row, rows, 1);
  dataset_ = H5_CHECK(H5Dopen2(file, shard_names::encoded, H5P_DEFAULT));
  hsize_t total = 0;
  {
    const H5Dataspace space(H5_CHECK(H5Dget_space(dataset_)));
    H5_CHECK(H5Sget_simple_extent_dims(space.id(), &total, nullptr));
  }
  for (std::size_t i = 0; i + 1 < offsets_.size(); ++i)
    if (offsets_[i] < 0 || offsets_[i + 1] < offsets_[i] || static_cast<hsize_t>(offsets_[i + 1]) > total)
      throw DataError(fmt::format("shard '{}' is damaged: sample {} claims bytes [{}, {}) of {} encoded bytes; {}",
                                  path_.string(), first_row + static_cast<int64_t>(i), offsets_[i], offsets_[i + 1],
                                  total, rewrite_advice));
  // The sizes are checked against every decode; one outside what a JPEG can record (a flipped byte) would turn that
  // check off, or make a crop of nothing.
  for (int64_t row = 0; row < rows; ++row)
    if (const int h = height(row), w = width(row); h < 1 || w < 1 || h > kMaxJpegSide || w > kMaxJpegSide)
      throw DataError(fmt::format("{} is damaged: its photo's size is recorded as {}x{} (image_sizes), which no JPEG "
                                  "has; {}",
                                  where(row), w, h, rewrite_advice));
  map_chunks();
}

EncodedSlice::EncodedSlice(EncodedSlice&& other) noexcept
    : path_(std::move(other.path_)),
      first_row_(other.first_row_),
      dataset_(std::exchange(other.dataset_, H5I_INVALID_HID)),
      offsets_(std::move(other.offsets_)),
      sizes_(std::move(other.sizes_)),
      crcs_(std::move(other.crcs_)),
      chunk_addresses_(std::move(other.chunk_addresses_)),
      chunk_bytes_(other.chunk_bytes_),
      fd_(std::exchange(other.fd_, -1)) {}

EncodedSlice::~EncodedSlice() {
  if (fd_ >= 0) ::close(fd_);
  if (dataset_ >= 0) H5Dclose(dataset_);
}

int64_t EncodedSlice::bytes(int64_t row) const {
  return offsets_[static_cast<std::size_t>(row + 1)] - offsets_[static_cast<std::size_t>(row)];
}

int64_t EncodedSlice::largest_bytes() const {
  int64_t largest = 0;
  for (std::size_t i = 0; i + 1 < offsets_.size(); ++i) largest = std::max(largest, offsets_[i + 1] - offsets_[i]);
  return largest;
}

std::string EncodedSlice::where(int64_t row) const {
  return fmt::format("shard '{}', sample {}", path_.string(), first_row_ + row);
}

// Unfiltered, allocated chunks are plain bytes in the file: their addresses are read once. Anything else keeps the
// HDF5 path.
void EncodedSlice::map_chunks() {
  const H5PropList create(H5_CHECK(H5Dget_create_plist(dataset_)));
  if (H5_CHECK(H5Pget_layout(create.id())) != H5D_CHUNKED || H5_CHECK(H5Pget_nfilters(create.id())) != 0) return;
  hsize_t chunk = 0;
  if (H5_CHECK(H5Pget_chunk(create.id(), 1, &chunk)) != 1 || chunk == 0) return;
  const H5Dataspace space(H5_CHECK(H5Dget_space(dataset_)));
  hsize_t total = 0, stored = 0;
  H5_CHECK(H5Sget_simple_extent_dims(space.id(), &total, nullptr));
  H5_CHECK(H5Dget_num_chunks(dataset_, space.id(), &stored));
  const hsize_t expected = (total + chunk - 1) / chunk;
  if (stored != expected || expected == 0) return;
  std::vector<haddr_t> addresses(expected, HADDR_UNDEF);
  for (hsize_t i = 0; i < stored; ++i) {
    hsize_t origin = 0, size = 0;
    unsigned filter_mask = 0;
    haddr_t address = HADDR_UNDEF;
    H5_CHECK(H5Dget_chunk_info(dataset_, space.id(), i, &origin, &filter_mask, &address, &size));
    if (origin / chunk >= expected || size != chunk || address == HADDR_UNDEF) return;
    addresses[origin / chunk] = address;
  }
  if (std::find(addresses.begin(), addresses.end(), HADDR_UNDEF) != addresses.end()) return;
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  fd_ = fd;
  chunk_addresses_ = std::move(addresses);
  chunk_bytes_ = static_cast<int64_t>(chunk);
}

void EncodedSlice::read_direct(int64_t begin, int64_t end, uint8_t* target) const {
  while (begin < end) {
    const int64_t chunk = begin / chunk_bytes_;
    const int64_t stop = std::min(end, (chunk + 1) * chunk_bytes_);
    auto offset = static_cast<off_t>(chunk_addresses_[static_cast<std::size_t>(chunk)] +
                                     static_cast<haddr_t>(begin - chunk * chunk_bytes_));
    auto left = static_cast<std::size_t>(stop - begin);
    while (left > 0) {
      const ssize_t got = ::pread(fd_, target, left, offset);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0)
        throw DataError(fmt::format("reading shard '{}' failed at byte {}: {}; {}", path_.string(), offset,
                                    got == 0 ? "unexpected end of file" : std::strerror(errno), rewrite_advice));
      target += got;
      offset += got;
      left -= static_cast<std::size_t>(got);
    }
    begin = stop;
  }
}

void EncodedSlice::read_through_hdf5(int64_t begin, int64_t end, uint8_t* target) const {
  const Hdf5Lock lock;  // readers on several threads: pread needs no lock, HDF5 does
  try {
    const H5Dataspace space(H5_CHECK(H5Dget_space(dataset_)));
    const auto start = static_cast<hsize_t>(begin), count = static_cast<hsize_t>(end - begin);
    H5_CHECK(H5Sselect_hyperslab(space.id(), H5S_SELECT_SET, &start, nullptr, &count, nullptr));
    const H5Dataspace memory(H5_CHECK(H5Screate_simple(1, &count, nullptr)));
    H5_CHECK(H5Dread(dataset_, H5T_NATIVE_UINT8, memory.id(), space.id(), H5P_DEFAULT, target));
  } catch (const Error& e) {
    throw DataError(fmt::format("reading shard '{}' failed, the file is truncated or corrupt ({}); {}", path_.string(),
                                hdf5_detail(e), rewrite_advice));
  }
}

void EncodedSlice::read(int64_t row, std::vector<uint8_t>& out) const {
  const int64_t begin = offsets_[static_cast<std::size_t>(row)], end = offsets_[static_cast<std::size_t>(row + 1)];
  const std::size_t at = out.size();
  out.resize(at + static_cast<std::size_t>(end - begin));
  if (end > begin) {
    try {
      if (fd_ >= 0)
        read_direct(begin, end, out.data() + at);
      else
        read_through_hdf5(begin, end, out.data() + at);
    } catch (const DataError& e) {
      throw DataError(fmt::format("{}: {}", where(row), e.what()));
    }
  }
  const uint32_t crc = crc32c(out.data() + at, static_cast<std::size_t>(end - begin));
  if (crc != crcs_[static_cast<std::size_t>(row)])
    throw DataError(fmt::format("{} is damaged: its bytes fail their checksum (CRC-32C {:08x} stored, {:08x} read); {}",
                                where(row), crcs_[static_cast<std::size_t>(row)], crc, rewrite_advice));
}

}  // namespace ringtrain::io::detail
