// Owns how an element-wise CPU kernel written over FloatLanes (float_lanes.h) runs on tensors stored in any element
// type: fp32 and bf16 values are taken into the lanes and put back in registers (bf16 widened exactly and rounded to
// nearest even as kernels/cpu/bf16.h rounds it, so the bits are those of the scalar conversions), fp16 through
// stored_chunks.h's widened chunks. Each tensor crosses memory once at its own width, with no buffer in between.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>

#include "kernels/cpu/float_lanes.h"
#include "kernels/cpu/stored_chunks.h"
#include "kernels/cpu/thread_runs.h"
#include "kernels/element_type.h"

namespace ringtrain::kernels::cpu {

using Bf16Lanes = uint16_t __attribute__((vector_size(kFloatLanes * sizeof(uint16_t))));
using BitLanes = uint32_t __attribute__((vector_size(kFloatLanes * sizeof(uint32_t))));

[[gnu::always_inline]] inline FloatLanes load_bf16_lanes(const uint16_t* from) {
  Bf16Lanes stored;
  std::memcpy(&stored, from, sizeof stored);
  const BitLanes bits = __builtin_convertvector(stored, BitLanes) << 16;
  FloatLanes v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

[[gnu::always_inline]] inline void store_bf16_lanes(FloatLanes v, uint16_t* to) {
  BitLanes bits;
  std::memcpy(&bits, &v, sizeof bits);
  const BitLanes rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const BitLanes quiet_nan = (bits >> 16) | 0x40u;
  const BitLanes kept = (bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded;
  const Bf16Lanes stored = __builtin_convertvector(kept, Bf16Lanes);
  std::memcpy(to, &stored, sizeof stored);
}

// The lanes' loads and stores of one stored type.
struct Fp32LanesIo {
  using Stored = float;
  [[gnu::always_inline]] static FloatLanes load(const float* from) { return load_lanes(from); }
  [[gnu::always_inline]] static void store(FloatLanes v, float* to) { store_lanes(v, to); }
};
struct Bf16LanesIo {
  using Stored = uint16_t;
  [[gnu::always_inline]] static FloatLanes load(const uint16_t* from) { return load_bf16_lanes(from); }
  [[gnu::always_inline]] static void store(FloatLanes v, uint16_t* to) { store_bf16_lanes(v, to); }
};

// out[i] = f(in[0][i], in[1][i], ...) over count values stored as Io::Stored: whole vectors, then the rest in
// zero-filled lanes.
template <class Io, std::size_t Inputs, class F>
void lanes_run(int64_t count, F&& f, const std::array<const typename Io::Stored*, Inputs>& in,
               typename Io::Stored* out) {
  using Stored = typename Io::Stored;
  const auto at = [&](int64_t i) {
    return std::apply([&](const auto*... from) { return f(Io::load(from + i)...); }, in);
  };
  const int64_t whole = count / kFloatLanes * kFloatLanes;
  for (int64_t i = 0; i < whole; i += kFloatLanes) Io::store(at(i), out + i);
  const auto rest = static_cast<std::size_t>(count - whole);
  if (rest == 0) return;
  std::array<std::array<Stored, kFloatLanes>, Inputs> padded{};
  std::array<const Stored*, Inputs> tail;
  for (std::size_t k = 0; k < Inputs; ++k) {
    std::memcpy(padded[k].data(), in[k] + whole, sizeof(Stored) * rest);
    tail[k] = padded[k].data();
  }
  std::array<Stored, kFloatLanes> result;
  Io::store(std::apply([&](const auto*... from) { return f(Io::load(from)...); }, tail), result.data());
  std::memcpy(out + whole, result.data(), sizeof(Stored) * rest);
}

// y = f(inputs...) lane by lane over n values of n.type, f taking and returning FloatLanes, the values shared among
// `threads` (one: the calling thread alone) in runs of whole kStoredChunk chunks, so a value's bits do not depend on
// the thread count. y may alias an input.
template <std::size_t Inputs, class F>
void for_each_stored_lanes(int threads, Elements n, const std::array<const void*, Inputs>& inputs, void* y, F f) {
  if (n.type == ElementType::f16) {  // widened a chunk at a time: the kernel sees fp32 chunks, the output's last
    for_each_stored_chunk<Inputs>(threads, n, inputs, y, [&](int64_t count, auto*... chunk) {
      const std::array<const float*, Inputs + 1> all{chunk...};
      std::array<const float*, Inputs> in;
      std::copy_n(all.begin(), Inputs, in.begin());
      lanes_run<Fp32LanesIo>(count, f, in, const_cast<float*>(all[Inputs]));
    });
    return;
  }
  const auto run = [&]<class Io>(Io) {
    using Stored = typename Io::Stored;
    const int64_t chunks = (n.n + kStoredChunk - 1) / kStoredChunk;
    for_each_thread_run(threads, chunks, [&](int64_t first_chunk, int64_t end_chunk, int) {
      const int64_t first = first_chunk * kStoredChunk, count = std::min(end_chunk * kStoredChunk, n.n) - first;
      std::array<const Stored*, Inputs> in;
      for (std::size_t k = 0; k < Inputs; ++k) in[k] = static_cast<const Stored*>(inputs[k]) + first;
      lanes_run<Io>(count, f, in, static_cast<Stored*>(y) + first);
    });
  };
  if (n.type == ElementType::bf16) return run(Bf16LanesIo{});
  run(Fp32LanesIo{});
}

}  // namespace ringtrain::kernels::cpu
