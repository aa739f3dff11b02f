// Owns the CPU twin's flushing of denormal floats (below 2^-126) to zero on its compute threads: MXCSR's
// flush-to-zero and denormals-are-zero bits, as TensorFlow sets them on its own threads. Without them every
// operation on such a value is a microcode assist on Intel cores: one rank's backward pass took 15 s instead of
// 0.23 s on a Sapphire Rapids VM once its gradients went denormal, and the watchdog ended the job as stalled.
// Values that small change no update. Elsewhere than x86 nothing is changed.
#pragma once

namespace ringtrain::kernels::cpu {

// On the calling thread, and on each of `threads` OpenMP threads (oneDNN's and our kernels' pool); threads the pool
// starts later inherit the calling thread's setting.
void flush_denormals(int threads);

// Whether the calling thread flushes denormals (false elsewhere than x86).
bool flushes_denormals();

// How many of a team of `threads` OpenMP threads flush them.
int pool_threads_flushing_denormals(int threads);

}  // namespace ringtrain::kernels::cpu
