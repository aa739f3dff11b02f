// Owns how our CPU kernels share work among the compute threads: [0, count) split into one contiguous run per
// OpenMP thread, each thing one thread's, so a kernel whose outputs each come from one thing (an image, a filter
// range, a channel group, a run of parameters) gives the same bits on any thread count. The region runs with the
// calling thread's signals held, as every oneDNN call does (signals_held.h): the OpenMP pool it may start is the one
// oneDNN reuses.
#pragma once
#include <omp.h>

#include <cstdint>

#include "kernels/cpu/signals_held.h"

namespace ringtrain::kernels::cpu {

// Calls run(begin, end, thread) for each non-empty run, thread in [0, threads) naming the caller's buffers of its
// own; one thread (or none to share) calls run(0, count, 0) directly.
template <class Run>
void for_each_thread_run(int threads, int64_t count, Run&& run) {
  if (threads <= 1 || count <= 1) {
    if (count > 0) run(int64_t{0}, count, 0);
    return;
  }
  const SignalsHeld held;
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    const int64_t begin = count * t / team, end = count * (t + 1) / team;
    if (begin < end) run(begin, end, static_cast<int>(t));
  }
}

}  // namespace ringtrain::kernels::cpu
