// Owns the node-shared gradient sum; see node_sum.h.
#include "kernels/cpu/node_sum.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/thread_runs.h"

namespace ringtrain::kernels::cpu {
namespace {

// Chunks small enough that the running sum stays in L1 while each rank's values stream past it once.
constexpr int64_t kChunk = 2048;

void sum_chunk_and_clear(std::span<float* const> arrays, std::size_t own, int64_t begin, int64_t n) {
  alignas(64) float sum[kChunk];
  const auto bytes = static_cast<std::size_t>(n) * sizeof(float);
  std::memcpy(sum, arrays[0] + begin, bytes);
  for (std::size_t k = 1; k < arrays.size(); ++k) {
    const float* __restrict__ values = arrays[k] + begin;
    for (int64_t i = 0; i < n; ++i) sum[i] += values[i];
  }
  for (std::size_t k = 0; k < arrays.size(); ++k)
    if (k != own) std::memset(arrays[k] + begin, 0, bytes);
  std::memcpy(arrays[own] + begin, sum, bytes);
}

}  // namespace

void sum_slice_and_clear(std::span<float* const> arrays, std::size_t own, int64_t begin, int64_t count, int threads) {
  if (arrays.size() == 1) return;  // one rank: its values are the sum
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  for_each_thread_run(threads, chunks, [&](int64_t first, int64_t end, int) {
    for (int64_t c = first; c < end; ++c) {
      const int64_t at = begin + c * kChunk;
      sum_chunk_and_clear(arrays, own, at, std::min(kChunk, begin + count - at));
    }
  });
}

}  // namespace ringtrain::kernels::cpu
