// Owns reading encoded samples (JPEG bytes) from one shard's slice of a partition: the slice's offsets, image sizes
// and per-sample CRC-32C, read once when it opens, and each sample's bytes read by pread() where the `encoded`
// dataset's chunks are plain bytes in the file (what `prepare` writes), through HDF5 otherwise. Every sample read
// is checked against its CRC-32C: a flipped byte is an error naming the shard and the sample, never a wrong image.
// Internal to io/: callers hold the HDF5 lock to open one; read() may be called from several threads at once.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <vector>

namespace ringtrain::io::detail {

class EncodedSlice {
 public:
  // Rows [first_row, first_row + rows) of the shard open as `file`. Throws DataError naming the shard when its
  // datasets cannot be read or disagree (offsets not increasing, past the end of `encoded`).
  EncodedSlice(hid_t file, std::filesystem::path path, int64_t first_row, int64_t rows);
  ~EncodedSlice();
  EncodedSlice(EncodedSlice&&) noexcept;
  EncodedSlice& operator=(EncodedSlice&&) = delete;
  EncodedSlice(const EncodedSlice&) = delete;

  // Appends the bytes of the slice's sample `row` (0-based in the slice) to `out`.
  void read(int64_t row, std::vector<uint8_t>& out) const;
  int height(int64_t row) const { return sizes_[static_cast<std::size_t>(2 * row)]; }
  int width(int64_t row) const { return sizes_[static_cast<std::size_t>(2 * row + 1)]; }
  int64_t bytes(int64_t row) const;
  int64_t largest_bytes() const;  // of any sample in the slice
  // "shard 'PATH', sample N" for messages about a sample.
  std::string where(int64_t row) const;

 private:
  void map_chunks();
  void read_direct(int64_t begin, int64_t end, uint8_t* target) const;
  void read_through_hdf5(int64_t begin, int64_t end, uint8_t* target) const;

  std::filesystem::path path_;
  int64_t first_row_ = 0;
  hid_t dataset_ = H5I_INVALID_HID;  // `encoded`
  std::vector<int64_t> offsets_;     // rows + 1
  std::vector<int32_t> sizes_;       // rows x (height, width)
  std::vector<uint32_t> crcs_;       // rows
  std::vector<haddr_t> chunk_addresses_;  // empty: read through HDF5
  int64_t chunk_bytes_ = 0;
  int fd_ = -1;
};

}  // namespace ringtrain::io::detail
