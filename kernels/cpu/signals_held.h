// Owns SignalsHeld: the calling thread's signals blocked for a scope. oneDNN's JIT GEMM (dnnl_sgemm, and the
// gemm-based primitives built on it) corrupts the heap when a signal handler runs on its thread mid-product:
// reproduced with oneDNN 2.6.3 on a Sapphire Rapids core, glibc aborting with "corrupted size vs. prev_size"
// (DnnlOps.SignalsDuringItsKernelsChangeNothing), when a preemption signal landed in a step. So every call into
// oneDNN, and every OpenMP region of ours, runs with the thread's signals blocked: a stop signal is taken by another
// thread (the loader's, the watchdog's) or right after the call, and only sets a flag either way. OpenMP workers
// started inside such a scope inherit the blocked mask, so the pool oneDNN later reuses never takes a signal either,
// whichever of the two started it.
#pragma once
#include <signal.h>

namespace ringtrain::kernels::cpu {

class SignalsHeld {
 public:
  SignalsHeld() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &previous_);
  }
  ~SignalsHeld() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace ringtrain::kernels::cpu
