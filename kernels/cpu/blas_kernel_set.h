// Owns the choice of OpenBLAS's kernel set for a CPU that OpenBLAS's run-time dispatch does not know. OpenBLAS 0.3.21
// (Debian 12's) runs its generic SSE3 kernels ("Prescott") on such a CPU, Intel's Emerald Rapids (family 6, model
// 207) among them: SGEMM at a fifth of its AVX-512 kernels' rate there. OpenBLAS reads OPENBLAS_CORETYPE once, as it
// loads, so a process that wants other kernels starts again with it set (src/util/blas_restart.h).
#pragma once
#include <string>
#include <string_view>

namespace ringtrain::kernels::cpu {

// The vector instructions this CPU and its operating system run, as far as OpenBLAS's kernel sets tell them apart.
struct CpuVectorUnits {
  bool avx = false;
  bool avx2_fma = false;
  bool avx512 = false;  // F, BW, VL and DQ: what OpenBLAS's SkylakeX kernels use
  bool avx512_bf16 = false;
};

CpuVectorUnits this_cpu_vector_units();

// The OPENBLAS_CORETYPE whose kernels a CPU with `units` runs, where OpenBLAS chose its fallback for a CPU it does not
// know (`chosen` = "Prescott") and the CPU runs wider vectors than that; empty otherwise: a CPU OpenBLAS knows keeps
// OpenBLAS's own choice, and a CPU without AVX keeps the fallback.
std::string blas_kernel_set_for_unknown_cpu(std::string_view chosen, const CpuVectorUnits& units);

// The same for this process: OpenBLAS's choice (openblas_get_corename) and this CPU's units.
std::string blas_kernel_set_wanted();

}  // namespace ringtrain::kernels::cpu
