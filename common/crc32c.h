// Owns CRC-32C (Castagnoli): the checksum of TFRecord framing (TensorBoard event files) and of every array
// ringtrain stores in a checkpoint or shard. Debian 12 packages no C/C++ library for it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ringtrain {

uint32_t crc32c(const void* data, std::size_t bytes);
// The CRC of the earlier bytes followed by these: crc32c_extend(crc32c(a), b) == crc32c(a + b), so data read or
// written block by block is checked without holding it whole.
uint32_t crc32c_extend(uint32_t crc, const void* data, std::size_t bytes);

// TFRecord's masked form: rotate right by 15 and add a constant, so a CRC of data holding CRCs stays strong.
inline uint32_t masked_crc32c(const void* data, std::size_t bytes) {
  const uint32_t crc = crc32c(data, bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace ringtrain
