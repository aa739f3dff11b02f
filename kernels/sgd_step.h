// Owns what one SGD-with-momentum update needs besides the buffers: the step's hyper-parameters, and the
// per-element weight-decay mask over the flat parameter buffer (one bit per parameter), so the whole model is
// updated in one pass on every backend rather than one call per parameter tensor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringtrain::kernels {

struct SgdStep {
  float lr = 0, momentum = 0, weight_decay = 0;
};

// Bit i % 32 of word i / 32 is set when weight decay applies to parameter i.
inline int64_t decay_mask_words(int64_t params) { return (params + 31) / 32; }
inline bool decays(const uint32_t* mask, int64_t i) { return (mask[i >> 5] >> (i & 31)) & 1u; }

// Builds the mask from runs [begin, begin + count) of parameters that decay.
struct DecayRun {
  int64_t begin = 0, count = 0;
};
inline std::vector<uint32_t> make_decay_mask(int64_t params, const std::vector<DecayRun>& decaying) {
  std::vector<uint32_t> mask(static_cast<std::size_t>(decay_mask_words(params)), 0u);
  for (const DecayRun& run : decaying)
    for (int64_t i = run.begin; i < run.begin + run.count; ++i) mask[static_cast<std::size_t>(i >> 5)] |= 1u << (i & 31);
  return mask;
}

}  // namespace ringtrain::kernels
