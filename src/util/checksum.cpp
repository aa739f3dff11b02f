// Owns the FNV-1a hash used for parameter checksums.
#include "util/checksum.h"

#include <fmt/format.h>

namespace ringtrain::util {

uint64_t fnv1a64(const void* data, std::size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hex64(uint64_t value) { return fmt::format("{:016x}", value); }

}  // namespace ringtrain::util
