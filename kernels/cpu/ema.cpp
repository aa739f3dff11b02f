// Owns the CPU twin of the weights' moving average: each thread one contiguous run, each element its own formula,
// so the bits do not depend on the thread count.
#include "kernels/cpu/ema.h"

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/thread_runs.h"
#include "kernels/optimizer_step.h"

namespace ringtrain::kernels::cpu {

void ema_update(int64_t n, const EmaStep& step, const float* param, float* ema) {
  for_each_thread_run(compute_threads(), n, [&](int64_t begin, int64_t end, int) {
    // Distinct buffers by contract; __restrict lets the loop vectorise without run-time overlap checks.
    const float* __restrict p = param;
    float* __restrict e = ema;
    for (int64_t i = begin; i < end; ++i) e[i] = ema_blend(step, e[i], p[i]);
  });
}

}  // namespace ringtrain::kernels::cpu
