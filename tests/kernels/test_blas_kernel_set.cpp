// Tests for kernels/cpu/blas_kernel_set: which OpenBLAS kernel set a CPU that OpenBLAS does not know is given, by
// its vector units, and that a CPU OpenBLAS knows keeps OpenBLAS's choice.
#include <gtest/gtest.h>

#include "kernels/cpu/blas_kernel_set.h"

namespace ringtrain::kernels::cpu {
namespace {

constexpr CpuVectorUnits kSse{};
constexpr CpuVectorUnits kAvx{.avx = true};
constexpr CpuVectorUnits kAvx2{.avx = true, .avx2_fma = true};
constexpr CpuVectorUnits kAvx512{.avx = true, .avx2_fma = true, .avx512 = true};
constexpr CpuVectorUnits kAvx512Bf16{.avx = true, .avx2_fma = true, .avx512 = true, .avx512_bf16 = true};

TEST(BlasKernelSet, UnknownCpuGetsTheWidestKernelsItsUnitsRun) {
  EXPECT_EQ(blas_kernel_set_for_unknown_cpu("Prescott", kAvx512Bf16), "Cooperlake");
  EXPECT_EQ(blas_kernel_set_for_unknown_cpu("Prescott", kAvx512), "SkylakeX");
  EXPECT_EQ(blas_kernel_set_for_unknown_cpu("Prescott", kAvx2), "Haswell");
  EXPECT_EQ(blas_kernel_set_for_unknown_cpu("Prescott", kAvx), "Sandybridge");
}

TEST(BlasKernelSet, CpuWithoutAvxKeepsTheFallback) {
  EXPECT_EQ(blas_kernel_set_for_unknown_cpu("Prescott", kSse), "");
}

TEST(BlasKernelSet, CpuOpenBlasKnowsKeepsItsChoice) {
  for (const char* chosen : {"Haswell", "SkylakeX", "Cooperlake", "SapphireRapids", "Zen", "Sandybridge", "Nehalem"})
    EXPECT_EQ(blas_kernel_set_for_unknown_cpu(chosen, kAvx512Bf16), "") << chosen;
}

// bf16 without the rest of AVX-512 is not a CPU that exists; the SkylakeX-class kernels need F, BW, VL and DQ.
TEST(BlasKernelSet, Bf16AloneDoesNotSelectAvx512Kernels) {
  EXPECT_EQ(blas_kernel_set_for_unknown_cpu("Prescott", CpuVectorUnits{.avx = true, .avx2_fma = true,
                                                                       .avx512_bf16 = true}),
            "Haswell");
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
