// Owns inverted dropout on the GPU: keeps each element with probability 1-p and scales kept ones by 1/(1-p),
// so inference is the identity. The keep decision is a counter-based hash of (seed, element index): the same
// seed gives the same mask on any GPU, launch shape or run, and the host can recompute it (dropout_keeps).
// The mask is not bit-identical to the CPU twin's generator; only its definition here is the contract.
#pragma once
#include <cstdint>

#include "kernels/activation_layout.h"
#include "kernels/element_type.h"
#include "kernels/host_device.h"
#include "kernels/layer_seed.h"
#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

// splitmix64's finaliser over seed + (index+1) * golden ratio: cheap, stateless, well mixed.
RT_HOST_DEVICE inline uint64_t dropout_hash(uint64_t seed, uint64_t index) {
  uint64_t z = seed + (index + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Keep when a 24-bit uniform draw is at or above p (exact for every p that is a multiple of 2^-24).
RT_HOST_DEVICE inline bool dropout_keeps(uint64_t seed, uint64_t index, float p) {
  const uint32_t draw = static_cast<uint32_t>(dropout_hash(seed, index) >> 40);
  return static_cast<float>(draw) >= p * 16777216.0f;
}

// y = keep ? x / (1-p) : 0; mask[i] = keep (1/0), kept for backward. p in [0, 1); p >= 1 drops everything.
// x and y are n.type (element_access.cuh: fp32 arithmetic, stored rounded). Element i draws at order.of(i), its
// NCHW index, so an NHWC tensor keeps the elements an NCHW one would.
void dropout_forward(Elements n, float p, uint64_t seed, const void* x, void* y, uint8_t* mask, Stream stream,
                     NchwIndex order = {});
// The same with the seed a graphed step reads when it runs: layer_seed_for(place, *pass_seed) (kernels/layer_seed.h),
// pass_seed in device memory; place.pass is not read.
void dropout_forward(Elements n, float p, const uint64_t* pass_seed, const LayerSeed& place, const void* x, void* y,
                     uint8_t* mask, Stream stream, NchwIndex order = {});
// dx = mask ? dy / (1-p) : 0 (overwritten).
void dropout_backward(Elements n, float p, const uint8_t* mask, const void* dy, void* dx, Stream stream);

}  // namespace ringtrain::kernels::cuda
