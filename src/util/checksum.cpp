// Owns the FNV-1a hash used for parameter checksums, and how a disagreement between ranks is described.
#include "util/checksum.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

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

std::string describe_checksum_groups(const std::vector<uint64_t>& by_rank) {
  std::map<uint64_t, std::vector<int>> ranks_of;
  for (std::size_t r = 0; r < by_rank.size(); ++r) ranks_of[by_rank[r]].push_back(static_cast<int>(r));
  std::vector<std::pair<uint64_t, std::vector<int>>> groups(ranks_of.begin(), ranks_of.end());
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    return a.second.size() != b.second.size() ? a.second.size() > b.second.size() : a.second.front() < b.second.front();
  });
  std::string out;
  for (const auto& [checksum, ranks] : groups)
    out += fmt::format("{}{} {} {} {}", out.empty() ? "" : "; ", ranks.size() == 1 ? "rank" : "ranks",
                       fmt::join(ranks, ", "), ranks.size() == 1 ? "holds" : "hold", hex64(checksum));
  return out;
}

}  // namespace ringtrain::util
