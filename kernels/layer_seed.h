// Owns how a stochastic layer's seed derives from its forward pass's: for each level of the layer's nesting in the
// model (its position in a chain, within a residual block's body or shortcut, ...), seed = (seed ^ xor_with) *
// 1000003 + index. The host derives it for a pass it queues; a graphed step's kernels (gpu.cuda_graphs) derive it on
// the device from the pass's seed read from device memory, which a replay updates every step, so both give the
// same seed from the same formula.
#pragma once
#include <cstdint>

#include "kernels/host_device.h"

namespace ringtrain::kernels {

// Residual blocks nested deeper than this are refused when the model is built (model/graph.cpp).
constexpr int kMaxSeedLevels = 8;

struct SeedLevel {
  uint64_t xor_with = 0;
  uint64_t index = 0;
};

// A layer's place in the model as its seed sees it, and the forward pass's seed (unique per job seed, micro-batch
// and rank) it applies to.
struct LayerSeed {
  uint64_t pass = 0;
  int depth = 0;
  SeedLevel levels[kMaxSeedLevels] = {};
};

// The layer's seed for the pass seed `pass` (LayerSeed::pass ignored: a graphed kernel reads its own).
RT_HOST_DEVICE inline uint64_t layer_seed_for(const LayerSeed& place, uint64_t pass) {
  uint64_t seed = pass;
  for (int i = 0; i < place.depth; ++i) seed = (seed ^ place.levels[i].xor_with) * 1000003u + place.levels[i].index;
  return seed;
}

RT_HOST_DEVICE inline uint64_t layer_seed(const LayerSeed& s) { return layer_seed_for(s, s.pass); }

// A layer's place with the seed of the pass it runs in.
inline LayerSeed for_pass(LayerSeed place, uint64_t pass) {
  place.pass = pass;
  return place;
}

}  // namespace ringtrain::kernels
