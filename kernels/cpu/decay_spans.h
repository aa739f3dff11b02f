// Owns walking the flat parameter buffer in spans of one weight-decay kind, for the element-wise optimizers.
// Parameter tensors are long runs of one kind, so nearly every 32-parameter word of the mask is all ones or all
// zeros: such words are merged into long spans that the optimizer's loop vectorises; only a word that straddles
// two tensors is walked element by element.
#pragma once
#include <cstdint>

#include "kernels/optimizer_step.h"

namespace ringtrain::kernels::cpu {

// Calls span(begin, end, decays) over [0, n) in order, each element once.
template <class Span>
void for_each_decay_span(int64_t n, const uint32_t* decay_mask, Span&& span) {
  int64_t begin = 0;
  while (begin < n) {
    const uint32_t word = decay_mask[begin >> 5];
    const int64_t word_end = begin + 32 < n ? begin + 32 : n;
    if (word != 0u && word != ~0u) {
      for (int64_t i = begin; i < word_end; ++i) span(i, i + 1, decays(decay_mask, i));
      begin = word_end;
      continue;
    }
    int64_t end = word_end;
    while (end < n && decay_mask[end >> 5] == word) end = end + 32 < n ? end + 32 : n;
    span(begin, end, word != 0u);
    begin = end;
  }
}

}  // namespace ringtrain::kernels::cpu
