// Owns the per-epoch permutation of a partition.
#include "data/sample_order.h"

#include <cstddef>
#include <numeric>
#include <utility>

namespace ringtrain::train {
namespace {
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

std::vector<int64_t> epoch_order(int64_t partition_size, uint64_t seed, int64_t epoch, int rank, bool shuffle) {
  std::vector<int64_t> order(static_cast<std::size_t>(partition_size));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle) return order;
  uint64_t state = mix(mix(mix(seed) ^ static_cast<uint64_t>(epoch)) ^ static_cast<uint64_t>(rank));
  for (int64_t i = partition_size - 1; i > 0; --i) {
    state = mix(state);
    // Multiply-shift maps 32 random bits onto [0, i] (Lemire); partitions stay far below 2^32 samples.
    const auto j = static_cast<int64_t>(((state >> 32) * static_cast<uint64_t>(i + 1)) >> 32);
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

}  // namespace ringtrain::train
