// Owns the restart that gives OpenBLAS this CPU's kernels where its run-time dispatch does not know the CPU (it then
// runs generic SSE3 kernels, a fifth of the AVX-512 ones' speed: kernels/cpu/blas_kernel_set.h). OpenBLAS reads
// OPENBLAS_CORETYPE only as it loads, so the process starts again, before MPI or any thread of its own, with it set.
#pragma once

namespace ringtrain::util {

// First thing in main. Returns only where no restart is wanted (OPENBLAS_CORETYPE set, by the user or by the restart
// itself; a CPU OpenBLAS knows) or where it failed, which is said on stderr with the setting that avoids it.
void restart_with_cpu_blas_kernels(char** argv) noexcept;

}  // namespace ringtrain::util
