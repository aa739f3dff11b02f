// Owns the mapping from a CPU's vector units to the OpenBLAS kernel set that uses them; see blas_kernel_set.h.
#include "kernels/cpu/blas_kernel_set.h"

#include <cblas.h>

namespace ringtrain::kernels::cpu {

CpuVectorUnits this_cpu_vector_units() {
  // libgcc's CPU model checks the operating system's support (XGETBV) as well as CPUID's bits.
  __builtin_cpu_init();
  return {.avx = __builtin_cpu_supports("avx") != 0,
          .avx2_fma = __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0,
          .avx512 = __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512bw") != 0 &&
                    __builtin_cpu_supports("avx512vl") != 0 && __builtin_cpu_supports("avx512dq") != 0,
          .avx512_bf16 = __builtin_cpu_supports("avx512bf16") != 0};
}

std::string blas_kernel_set_for_unknown_cpu(std::string_view chosen, const CpuVectorUnits& units) {
  // OpenBLAS's dispatch falls back to Prescott only when its table has no entry for the CPU's model.
  if (chosen != "Prescott") return {};
  // Cooper Lake's kernels are SkylakeX's plus the bf16 ones (sbgemm).
  if (units.avx512 && units.avx512_bf16) return "Cooperlake";
  if (units.avx512) return "SkylakeX";
  if (units.avx2_fma) return "Haswell";
  if (units.avx) return "Sandybridge";
  return {};
}

std::string blas_kernel_set_wanted() {
  return blas_kernel_set_for_unknown_cpu(openblas_get_corename(), this_cpu_vector_units());
}

}  // namespace ringtrain::kernels::cpu
