// Owns walking the flat parameter buffer in spans of one weight-decay kind, for the element-wise optimizers, on one
// thread or several.
// Parameter tensors are long runs of one kind, so nearly every 32-parameter word of the mask is all ones or all
// zeros: such words are merged into long spans that the optimizer's loop vectorises; only a word that straddles
// two tensors is walked element by element.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/signals_held.h"
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

// The same over [0, n) on `threads` OpenMP threads, each taking one run of whole mask words: an element-wise update
// gives the same bits on any number of threads. The region runs with signals held, as oneDNN's calls do.
template <class Span>
void for_each_decay_span_on(int threads, int64_t n, const uint32_t* decay_mask, Span&& span) {
  if (threads <= 1) return for_each_decay_span(0, n, decay_mask, span);
  const int64_t words = (n + 31) / 32;
  const SignalsHeld held;
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    const int64_t first = words * t / team * 32, end = std::min(n, words * (t + 1) / team * 32);
    if (first < end) for_each_decay_span(first, end, decay_mask, span);
  }
}

}  // namespace ringtrain::kernels::cpu
