// Owns the node-shared gradient sum; see node_sum.h.
#include "kernels/cpu/node_sum.h"

#include <algorithm>
#include <cstring>

namespace ringtrain::kernels::cpu {

void sum_slice_and_clear(std::span<float* const> arrays, std::size_t own, int64_t begin, int64_t count) {
  // Chunks small enough that the running sum stays in L1 while each rank's values stream past it once.
  if (arrays.size() == 1) return;  // one rank: its values are the sum
  constexpr int64_t kChunk = 2048;
  alignas(64) float sum[kChunk];
  for (int64_t c = begin; c < begin + count; c += kChunk) {
    const int64_t n = std::min(kChunk, begin + count - c);
    const auto bytes = static_cast<std::size_t>(n) * sizeof(float);
    std::memcpy(sum, arrays[0] + c, bytes);
    for (std::size_t k = 1; k < arrays.size(); ++k) {
      const float* __restrict__ values = arrays[k] + c;
      for (int64_t i = 0; i < n; ++i) sum[i] += values[i];
    }
    for (std::size_t k = 0; k < arrays.size(); ++k)
      if (k != own) std::memset(arrays[k] + c, 0, bytes);
    std::memcpy(arrays[own] + c, sum, bytes);
  }
}

}  // namespace ringtrain::kernels::cpu
