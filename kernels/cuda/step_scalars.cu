// Owns update_scalars() compiled as the optimizer kernels' .cu files compile it; see step_scalars.h.
#include "kernels/cuda/step_scalars.h"

namespace ringtrain::kernels::cuda {

UpdateScalars step_scalars(const SgdStep& step) { return update_scalars(step); }
UpdateScalars step_scalars(const LarsStep& step) { return update_scalars(step); }
UpdateScalars step_scalars(const AdamStep& step) { return update_scalars(step); }

}  // namespace ringtrain::kernels::cuda
