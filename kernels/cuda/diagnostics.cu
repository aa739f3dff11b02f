// Owns the probe kernels declared in diagnostics.h.
#include "kernels/cuda/diagnostics.h"
#include "kernels/cuda/launch.cuh"

namespace ringtrain::kernels::cuda {
namespace {

__device__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void busy_wait_kernel(uint64_t nanoseconds) {
  const uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < nanoseconds) __nanosleep(10000);
}

}  // namespace

void busy_wait(uint64_t nanoseconds, Stream stream) {
  busy_wait_kernel<<<1, 1, 0, stream>>>(nanoseconds);
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
