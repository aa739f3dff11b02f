// Owns how an element-wise CPU kernel written over FloatLanes (float_lanes.h) runs on tensors stored in any element
// type: 16 values at a time taken into the lanes and put back in registers (bf16 widened exactly and rounded to
// nearest even as kernels/cpu/bf16.h rounds it; fp16 converted a lane at a time by stored_values.h's conversions), so
// the bits are those of the scalar conversions and each tensor crosses memory once at its own width, with no buffer
// in between.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>

#include "kernels/cpu/float_lanes.h"
#include "kernels/cpu/stored_chunks.h"
#include "kernels/cpu/stored_values.h"
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
struct Fp16LanesIo {  // no vector conversion here for fp16 on every target: a lane at a time
  using Stored = uint16_t;
  [[gnu::always_inline]] static FloatLanes load(const uint16_t* from) {
    FloatLanes v;
    for (int i = 0; i < kFloatLanes; ++i) v[i] = Fp16Values::load(from[i]);
    return v;
  }
  [[gnu::always_inline]] static void store(FloatLanes v, uint16_t* to) {
    for (int i = 0; i < kFloatLanes; ++i) to[i] = Fp16Values::store(v[i]);
  }
};

// The lanes' loads and stores of the type stored_values.h's Values names.
template <class Values> struct LanesIoOf;
template <> struct LanesIoOf<Fp32Values> { using Io = Fp32LanesIo; };
template <> struct LanesIoOf<Bf16Values> { using Io = Bf16LanesIo; };
template <> struct LanesIoOf<Fp16Values> { using Io = Fp16LanesIo; };

// body(Io{}) for the lanes' loads and stores of `type`.
template <class Body>
void with_lanes_io(ElementType type, Body&& body) {
  with_stored_values(type, [&](auto values) { body(typename LanesIoOf<decltype(values)>::Io{}); });
}

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
  with_lanes_io(n.type, [&]<class Io>(Io) {
    using Stored = typename Io::Stored;
    const int64_t chunks = (n.n + kStoredChunk - 1) / kStoredChunk;
    for_each_thread_run(threads, chunks, [&](int64_t first_chunk, int64_t end_chunk, int) {
      const int64_t first = first_chunk * kStoredChunk, count = std::min(end_chunk * kStoredChunk, n.n) - first;
      std::array<const Stored*, Inputs> in;
      for (std::size_t k = 0; k < Inputs; ++k) in[k] = static_cast<const Stored*>(inputs[k]) + first;
      lanes_run<Io>(count, f, in, static_cast<Stored*>(y) + first);
    });
  });
}

}  // namespace ringtrain::kernels::cpu
