// Owns setting the compute threads' denormal flushing; see denormals.h.
#include "kernels/cpu/denormals.h"

#include <omp.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "kernels/cpu/signals_held.h"

namespace ringtrain::kernels::cpu {
namespace {

#if defined(__x86_64__) || defined(__i386__)
constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;
void flush_here() { _mm_setcsr(_mm_getcsr() | kFlushToZero | kDenormalsAreZero); }
#else
void flush_here() {}
#endif

}  // namespace

void flush_denormals(int threads) {
  flush_here();
  if (threads <= 1) return;
  const SignalsHeld held;  // the pool oneDNN reuses starts with signals held (thread_runs.h)
#pragma omp parallel num_threads(threads)
  flush_here();
}

bool flushes_denormals() {
#if defined(__x86_64__) || defined(__i386__)
  return (_mm_getcsr() & (kFlushToZero | kDenormalsAreZero)) == (kFlushToZero | kDenormalsAreZero);
#else
  return false;
#endif
}

int pool_threads_flushing_denormals(int threads) {
  int flushing = 0;
  const SignalsHeld held;
#pragma omp parallel num_threads(threads) reduction(+ : flushing)
  flushing += flushes_denormals() ? 1 : 0;
  return flushing;
}

}  // namespace ringtrain::kernels::cpu
