// Owns CRC-32C (Castagnoli), the checksum TFRecord framing uses; Debian 12 packages no C/C++ library for it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ringtrain::util {

uint32_t crc32c(const void* data, std::size_t bytes);
// TFRecord's masked form: rotate right by 15 and add a constant, so a CRC of data holding CRCs stays strong.
inline uint32_t masked_crc32c(const void* data, std::size_t bytes) {
  const uint32_t crc = crc32c(data, bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace ringtrain::util
