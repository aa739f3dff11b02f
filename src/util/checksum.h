// Owns param_checksum: a 64-bit FNV-1a hash of raw parameter bytes, printed as 16 hex digits. Bit-exact by
// design: two ranks agree only if every parameter is bit-identical.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ringtrain::util {

uint64_t fnv1a64(const void* data, std::size_t bytes, uint64_t seed = 0xcbf29ce484222325ull);
std::string hex64(uint64_t value);

}  // namespace ringtrain::util
