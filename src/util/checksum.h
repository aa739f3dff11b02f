// Owns param_checksum: a 64-bit FNV-1a hash of raw parameter bytes, printed as 16 hex digits. Bit-exact by
// design: two ranks agree only if every parameter is bit-identical.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringtrain::util {

uint64_t fnv1a64(const void* data, std::size_t bytes, uint64_t seed = 0xcbf29ce484222325ull);
std::string hex64(uint64_t value);

// Ranks grouped by the checksum they hold, largest group first (ties: lowest rank first), e.g.
// "ranks 0, 2, 3 hold 1f..e0; rank 1 holds 9a..04": names the odd rank out. `by_rank[r]` is rank r's.
std::string describe_checksum_groups(const std::vector<uint64_t>& by_rank);

}  // namespace ringtrain::util
