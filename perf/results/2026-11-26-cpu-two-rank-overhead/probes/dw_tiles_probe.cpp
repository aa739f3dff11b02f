// DROPPED (kept as the record): dw_probe.cpp with an RR x VV tile (RR output rows x VV vectors of columns), rows
// outer, the last rows in tiles of 4 (so RR must leave a multiple of 4, and 16 * VV divide 3136). Same bits as
// OpenBLAS; RR=12 VV=2 2.787 ms against OpenBLAS's 2.785, RR=6 VV=4 3.145 against 2.694 (one core, alternated).
// Build: g++ -std=c++20 -O3 -march=native -DNDEBUG -DRR=12 -DVV=2 -I. <this file> build/kernels/librt_kernels_cpu.a
//   build/common/librt_common.a -lopenblas -lfmt -fopenmp -o dw_tiles_probe; run: taskset -c 1 ./dw_tiles_probe
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
#ifndef RR
#define RR 12
#endif
#ifndef VV
#define VV 2
#endif
// a: B x R (sample-major) values of rows o0..o0+R
template <int R, int V>
void rows(const float* a, const float* x, float* dw, int o0) {
  for (int i0 = 0; i0 < IN; i0 += 16 * V) {
    __m512 acc[R][V];
#pragma GCC unroll 32
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
    const float* xb = x + i0;
    for (int b = 0; b < B; ++b) {
      __m512 xv[V];
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) xv[v] = _mm512_loadu_ps(xb + b * IN + v * 16);
#pragma GCC unroll 32
      for (int r = 0; r < R; ++r) {
        const __m512 s = _mm512_set1_ps(a[b * R + r]);
#pragma GCC unroll 8
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(s, xv[v], acc[r][v]);
      }
    }
#pragma GCC unroll 32
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) {
        float* c = dw + (o0 + r) * IN + i0 + v * 16;
        _mm512_storeu_ps(c, _mm512_add_ps(_mm512_loadu_ps(c), acc[r][v]));
      }
  }
}
template <int R>
void pack_rows(const float* dy, int o0, float* out) {
  for (int b = 0; b < B; ++b) for (int r = 0; r < R; ++r) out[b * R + r] = dy[b * OUT + o0 + r];
}
void ours(const float* dy, const float* x, float* dw, float* scratch) {
  constexpr int full = OUT / RR * RR;
  for (int o0 = 0; o0 < full; o0 += RR) { pack_rows<RR>(dy, o0, scratch); rows<RR, VV>(scratch, x, dw, o0); }
  for (int o0 = full; o0 < OUT; o0 += 4) { pack_rows<4>(dy, o0, scratch); rows<4, VV>(scratch, x, dw, o0); }
}
void blas(const float* dy, const float* x, float* dw) {
  sgemm(Transpose::yes, Transpose::no, OUT, IN, B, 1.0f, dy, OUT, x, IN, 1.0f, dw, IN);
}
int main() {
  std::mt19937 gen(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> dy(B * OUT), x(B * IN), w0(size_t(OUT) * IN), scratch(B * 32);
  for (auto& v : dy) v = nd(gen);
  for (auto& v : x) v = std::max(0.0f, nd(gen));
  for (auto& v : w0) v = 0.01f * nd(gen);
  std::vector<float> wa = w0, wb = w0;
  ours(dy.data(), x.data(), wa.data(), scratch.data());
  blas(dy.data(), x.data(), wb.data());
  size_t differ = 0; double md = 0;
  for (size_t i = 0; i < wa.size(); ++i) { differ += wa[i] != wb[i]; md = std::max(md, double(std::abs(wa[i]-wb[i]))); }
  std::vector<double> to, tb;
  for (int rep = 0; rep < 35; ++rep) {
    double t0 = now(); ours(dy.data(), x.data(), wa.data(), scratch.data()); double t1 = now();
    blas(dy.data(), x.data(), wb.data()); double t2 = now();
    if (rep >= 5) to.push_back(t1 - t0), tb.push_back(t2 - t1);
  }
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2] * 1e3; };
  std::printf("R=%d V=%d: %zu differ (max %.2g); ours %.3f ms, OpenBLAS %.3f ms\n", RR, VV, differ, md, med(to), med(tb));
}
