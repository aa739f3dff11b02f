// Owns walking the flat parameter buffer in spans of one weight-decay kind, for the element-wise optimizers, on one
// thread or several.
// Parameter tensors are long runs of one kind, so nearly every 32-parameter word of the mask is all ones or all
// zeros: such words are merged into long spans that the optimizer's loop vectorises; only a word that straddles
// two tensors is walked element by element.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/thread_runs.h"
#include "kernels/optimizer_step.h"

namespace ringtrain::kernels::cpu {

// Calls span(begin, end, decays) over [first, n) in order, each element once; first is a multiple of 32 (a word
// of the mask).
template <class Span>
void for_each_decay_span(int64_t first, int64_t n, const uint32_t* decay_mask, Span&& span) {
  int64_t begin = first;
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

// The same over [0, n) on `threads` threads, each taking one run of whole mask words (thread_runs.h): an
// element-wise update gives the same bits on any number of threads.
template <class Span>
void for_each_decay_span_on(int threads, int64_t n, const uint32_t* decay_mask, Span&& span) {
  for_each_thread_run(threads, (n + 31) / 32, [&](int64_t first_word, int64_t end_word, int) {
    for_each_decay_span(first_word * 32, std::min(n, end_word * 32), decay_mask, span);
  });
}

}  // namespace ringtrain::kernels::cpu
