// Owns the table-driven CRC-32C (reflected polynomial 0x82F63B78); a few MB per second is plenty for
// TensorBoard records of a few dozen bytes.
#include "util/crc32c.h"

#include <array>

namespace ringtrain::util {
namespace {

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr auto kTable = make_table();

}  // namespace

uint32_t crc32c(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < bytes; ++i) crc = kTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

}  // namespace ringtrain::util
