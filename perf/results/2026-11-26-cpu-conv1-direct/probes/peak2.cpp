// The core's fp32 FMA ceiling: 24 independent 512-bit FMAs a loop. g++ -O2 -march=native peak2.cpp -o peak2;
// taskset -c 1 ./peak2 (222-236 GFLOP/s on 2026-11-26).
#include <chrono>
#include <cstdio>
int main() {
  const long iters = 100'000'000;
  auto t0 = std::chrono::steady_clock::now();
  for (long it = 0; it < iters; ++it) {
    __asm__ volatile(
#define F(i) "vfmadd231ps %%zmm30, %%zmm31, %%zmm" #i "\n\t"
        F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11) F(12) F(13) F(14) F(15) F(16) F(17) F(18) F(19)
        F(20) F(21) F(22) F(23)
        ::: "xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9","xmm10","xmm11","xmm12","xmm13",
        "xmm14","xmm15","xmm16","xmm17","xmm18","xmm19","xmm20","xmm21","xmm22","xmm23");
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%.1f GFLOP/s\n", iters * 24.0 * 32 / s / 1e9);
}
