// DROPPED (kept as the record): same bits as OpenBLAS but slower: R=4 3.28 ms (rows outer 3.52, columns outer
// 3.71), R=8 3.19 ms, against OpenBLAS's 2.41-2.64 ms in the same runs (one core, alternated).
// Probe: the big dense layer's weight gradient dW (1024 x 3136) += dy^T (1024 x 64) x (64 x 3136), a product only
// 64 deep, as an AVX-512 kernel of our own against OpenBLAS's sgemm (what the backend runs, kernels/cpu/dnnl_dense.cpp).
// Ours: dy^T packed once into blocks of R output rows x 64 samples; a tile of R rows x 64 columns (4 vectors) in
// 4R accumulators over the 64 samples, then added into dW. Alternated, median of 30 after 5 untimed.
// Build: g++ -std=c++20 -O3 -march=native -DNDEBUG [-DR=4] -I. <this file> build/kernels/librt_kernels_cpu.a
//   build/common/librt_common.a -lopenblas -lfmt -fopenmp -o dw_probe; run: taskset -c 1 ./dw_probe
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cpu/gemm.h"
using namespace ringtrain::kernels::cpu;
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
constexpr int B = 64, IN = 3136, OUT = 1024;
#ifndef R
#define R 4
#endif

// dyt: OUT/R blocks, each B x R (sample-major): the R outputs' values of sample b side by side.
void pack(const float* dy, float* dyt) {
  for (int o0 = 0; o0 < OUT; o0 += R)
    for (int b = 0; b < B; ++b)
      for (int r = 0; r < R; ++r) dyt[(o0 / R) * B * R + b * R + r] = dy[b * OUT + o0 + r];
}

void ours(const float* dyt, const float* x, float* dw) {
#ifdef ROWS_OUTER
  for (int o0 = 0; o0 < OUT; o0 += R)
    for (int i0 = 0; i0 < IN; i0 += 64) {
#else  // the 64 x 64 panel of x (16 KB) stays in L1 while every block of outputs passes over it
  for (int i0 = 0; i0 < IN; i0 += 64)
    for (int o0 = 0; o0 < OUT; o0 += R) {
#endif
      const float* a = dyt + (o0 / R) * B * R;
      {
      __m512 acc[R][4];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_setzero_ps();
      const float* xb = x + i0;
      for (int b = 0; b < B; ++b) {
        __m512 xv[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) xv[v] = _mm512_loadu_ps(xb + b * IN + v * 16);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m512 s = _mm512_set1_ps(a[b * R + r]);
#pragma GCC unroll 4
          for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_fmadd_ps(s, xv[v], acc[r][v]);
        }
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          float* c = dw + (o0 + r) * IN + i0 + v * 16;
          _mm512_storeu_ps(c, _mm512_add_ps(_mm512_loadu_ps(c), acc[r][v]));
        }
    }
  }
}

void blas(const float* dy, const float* x, float* dw) {
  sgemm(Transpose::yes, Transpose::no, OUT, IN, B, 1.0f, dy, OUT, x, IN, 1.0f, dw, IN);
}

int main() {
  std::mt19937 gen(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> dy(B * OUT), x(B * IN), dyt(B * OUT), w0(size_t(OUT) * IN);
  for (auto& v : dy) v = nd(gen);
  for (auto& v : x) v = std::max(0.0f, nd(gen));
  for (auto& v : w0) v = 0.01f * nd(gen);
  std::vector<float> wa = w0, wb = w0;
  pack(dy.data(), dyt.data());
  ours(dyt.data(), x.data(), wa.data());
  blas(dy.data(), x.data(), wb.data());
  double maxdiff = 0, maxref = 0;
  size_t differ = 0;
  for (size_t i = 0; i < wa.size(); ++i) {
    maxdiff = std::max(maxdiff, double(std::abs(wa[i] - wb[i])));
    maxref = std::max(maxref, double(std::abs(wb[i])));
    differ += wa[i] != wb[i];
  }
  std::printf("R=%d: max |ours - OpenBLAS| %.3g (of values up to %.3g), %zu of %zu elements differ\n", R, maxdiff,
              maxref, differ, wa.size());
  std::vector<double> t_ours, t_blas, t_pack;
  for (int rep = 0; rep < 35; ++rep) {
    double t0 = now();
    pack(dy.data(), dyt.data());
    double t1 = now();
    ours(dyt.data(), x.data(), wa.data());
    double t2 = now();
    blas(dy.data(), x.data(), wb.data());
    double t3 = now();
    if (rep >= 5) t_pack.push_back(t1 - t0), t_ours.push_back(t2 - t1), t_blas.push_back(t3 - t2);
  }
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2] * 1e3; };
  const double flops = 2.0 * B * IN * OUT;
  std::printf("pack %.3f ms, ours %.3f ms (%.0f GFLOP/s), OpenBLAS %.3f ms (%.0f GFLOP/s)\n", med(t_pack), med(t_ours),
              flops / med(t_ours) / 1e6, med(t_blas), flops / med(t_blas) / 1e6);
}
