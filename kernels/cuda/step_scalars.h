// Owns the optimizer's per-step numbers (kernels/update_scalars.h) as the CUDA optimizer kernels' files work them
// out, for a graphed step's table (gpu.cuda_graphs). The backend's C++ files are compiled with -march=native, under
// which GCC fuses `1 - lr * weight_decay` into one FMA, while nvcc's host compiler, which works out the numbers an
// eager launch passes by value, does not: a table written in the backend would differ from them in the last bit.
#pragma once
#include "kernels/update_scalars.h"

namespace ringtrain::kernels::cuda {

UpdateScalars step_scalars(const SgdStep& step);
UpdateScalars step_scalars(const LarsStep& step);
UpdateScalars step_scalars(const AdamStep& step);

}  // namespace ringtrain::kernels::cuda
