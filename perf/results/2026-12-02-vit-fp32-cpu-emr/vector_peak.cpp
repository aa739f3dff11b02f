// One core's peak rate of AVX-512 fp32 FMA (vfmadd231ps, 32 flops an instruction) and of the bf16 dot product
// (vdpbf16ps, 64 flops an instruction): 12 independent accumulators each, 1.2e9 instructions. Build:
//   g++ -O3 -funroll-loops -march=native vector_peak.cpp -o vector_peak
// Run one copy per core at once (taskset -c N) for the machine's peak.
#include <immintrin.h>
#include <chrono>
#include <cstdio>
template <class F> double run(F f, long iters) {
  auto t0 = std::chrono::steady_clock::now();
  f(iters);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
__attribute__((noinline)) __m512 fma_loop(long n) {
  __m512 a[12]; for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(i * 0.001f);
  __m512 x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999f);
  for (long i = 0; i < n; ++i)
    for (int j = 0; j < 12; ++j) a[j] = _mm512_fmadd_ps(x, y, a[j]);
  __m512 s = a[0]; for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, a[j]); return s;
}
__attribute__((noinline)) __m512 dp_loop(long n) {
  __m512 a[12]; for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(i * 0.001f);
  __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3f80);
  for (long i = 0; i < n; ++i)
    for (int j = 0; j < 12; ++j) a[j] = _mm512_dpbf16_ps(a[j], x, y);
  __m512 s = a[0]; for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, a[j]); return s;
}
int main() {
  long n = 100000000;
  volatile float sink;
  double t = run([&](long k){ sink = _mm512_reduce_add_ps(fma_loop(k)); }, n);
  printf("fp32 FMA: %.1f GFLOP/s\n", n * 12.0 * 32 / t / 1e9);
  t = run([&](long k){ sink = _mm512_reduce_add_ps(dp_loop(k)); }, n);
  printf("bf16 dot: %.1f GFLOP/s\n", n * 12.0 * 64 / t / 1e9);
}
