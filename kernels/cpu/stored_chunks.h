// Owns how an element-wise CPU kernel written over fp32 arrays runs on tensors stored in any element type
// (kernels/element_type.h): fp32 tensors are handed over in place; 16-bit ones a chunk at a time, each operand's
// chunk widened into a buffer that stays in L1 and the result rounded back, so each tensor crosses memory once at its
// own width, with the arithmetic of fp32 tensors holding the same values. The chunks may be shared among threads.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>

#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/thread_runs.h"
#include "kernels/element_type.h"

namespace ringtrain::kernels::cpu {

constexpr int64_t kStoredChunk = 4096;  // 16 KiB of fp32 per operand

inline const void* element_at(const void* base, ElementType type, int64_t i) {
  return static_cast<const std::byte*>(base) + static_cast<std::ptrdiff_t>(element_bytes(type)) * i;
}
inline void* element_at(void* base, ElementType type, int64_t i) {
  return static_cast<std::byte*>(base) + static_cast<std::ptrdiff_t>(element_bytes(type)) * i;
}

// kernel(count, const float* input..., float* out) over y = f(inputs) for n values of n.type, the chunks shared
// among `threads` (one: the calling thread alone), each thread with buffers of its own. An output chunk is written
// after its inputs are read, so y may alias an input.
template <std::size_t Inputs, class Kernel>
void for_each_stored_chunk(int threads, Elements n, const std::array<const void*, Inputs>& inputs, void* y,
                           Kernel kernel) {
  const int64_t chunks = (n.n + kStoredChunk - 1) / kStoredChunk;
  for_each_thread_run(threads, chunks, [&](int64_t first_chunk, int64_t end_chunk, int) {
    std::array<std::array<float, kStoredChunk>, Inputs> wide;
    std::array<float, kStoredChunk> out;
    for (int64_t c = first_chunk; c < end_chunk; ++c) {
      const int64_t first = c * kStoredChunk, count = std::min(kStoredChunk, n.n - first);
      if (n.type == ElementType::f32) {
        std::apply([&](auto... in) {
          kernel(count, static_cast<const float*>(element_at(in, n.type, first))...,
                 static_cast<float*>(element_at(y, n.type, first)));
        }, inputs);
        continue;
      }
      for (std::size_t i = 0; i < Inputs; ++i)
        widen({count, n.type}, element_at(inputs[i], n.type, first), wide[i].data());
      std::apply([&](const auto&... in) { kernel(count, in.data()..., out.data()); }, wide);
      narrow(out.data(), {count, n.type}, element_at(y, n.type, first));
    }
  });
}

}  // namespace ringtrain::kernels::cpu
