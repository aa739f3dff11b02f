// Owns how a CUDA optimizer kernel gets the numbers that change from step to step (kernels/update_scalars.h): by
// value, or read from device memory when the kernel runs. The latter is for a captured graph
// (gpu.cuda_graphs), whose replays keep the arguments it was captured with while the memory is refreshed before each
// replay. A kernel templated on the source does the same arithmetic on the same floats either way. Internal to
// kernels/cuda: only .cu files include it.
#pragma once
#include "kernels/update_scalars.h"

namespace ringtrain::kernels::cuda::detail {

struct ScalarsByValue {
  UpdateScalars value;
  __device__ UpdateScalars get() const { return value; }
};

struct ScalarsOnDevice {
  const UpdateScalars* address;
  __device__ UpdateScalars get() const { return *address; }
};

}  // namespace ringtrain::kernels::cuda::detail
