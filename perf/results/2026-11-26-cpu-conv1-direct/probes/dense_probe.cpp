// DROPPED (kept as the record): the dense forward as a kernel of our own, 3.0-3.3 ms against oneDNN's 2.3 ms.
// Build: g++ -std=c++20 -O3 -march=native -DNDEBUG [-DKC=256 -DMR=6] -I. -I.venv-onednn/include <this file> \
//   build/kernels/librt_kernels_cpu.a build/common/librt_common.a -L.venv-onednn/lib -Wl,-rpath,$PWD/.venv-onednn/lib \
//   -ldnnl -lopenblas -lfmt -fopenmp -o dense_probe; run: taskset -c 1 ./dense_probe
// Probe: dense forward y = x W^T (64 x 3136 -> 1024) as our own AVX-512 kernel: x transposed once (x^T, 3136 x 64),
// a block of 6 output units (W rows, broadcast) x 64 samples (4 vectors) in 24 accumulators, K in chunks.
#include <immintrin.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include "kernels/cpu/dnnl_dense.h"
#include "kernels/cpu/dnnl_context.h"
#include "kernels/cpu/gemm.h"
using namespace ringtrain::kernels;
using namespace ringtrain::kernels::cpu;
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
constexpr int B = 64, IN = 3136, OUT = 1024;
#ifndef KC
#define KC 256
#endif
#ifndef MR
#define MR 6
#endif
// yt[o][b] for o in o0..o0+MR, accumulating over k in [k0, k1)
template <int R>
inline void block(const float* xt, const float* w, int o0, int k0, int k1, float* yt, bool first) {
  __m512 acc[R][4];
  if (first) {
    for (int r = 0; r < R; ++r) for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_setzero_ps();
  } else {
    for (int r = 0; r < R; ++r) for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_loadu_ps(yt + (o0 + r) * B + v * 16);
  }
  const float* wr[R];
  for (int r = 0; r < R; ++r) wr[r] = w + std::ptrdiff_t(o0 + r) * IN;
  for (int k = k0; k < k1; ++k) {
    const float* xk = xt + std::ptrdiff_t(k) * B;
    const __m512 x0 = _mm512_loadu_ps(xk), x1 = _mm512_loadu_ps(xk + 16), x2 = _mm512_loadu_ps(xk + 32), x3 = _mm512_loadu_ps(xk + 48);
    for (int r = 0; r < R; ++r) {
      const __m512 wv = _mm512_set1_ps(wr[r][k]);
      acc[r][0] = _mm512_fmadd_ps(wv, x0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(wv, x1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(wv, x2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(wv, x3, acc[r][3]);
    }
  }
  for (int r = 0; r < R; ++r) for (int v = 0; v < 4; ++v) _mm512_storeu_ps(yt + (o0 + r) * B + v * 16, acc[r][v]);
}
void ours(const float* x, const float* w, float* y, float* xt, float* yt) {
  for (int b = 0; b < B; ++b) for (int k = 0; k < IN; ++k) xt[k * B + b] = x[b * IN + k];
  for (int k0 = 0; k0 < IN; k0 += KC) {
    const int k1 = std::min(IN, k0 + KC);
    int o = 0;
    for (; o + MR <= OUT; o += MR) block<MR>(xt, w, o, k0, k1, yt, k0 == 0);
    for (; o < OUT; ++o) block<1>(xt, w, o, k0, k1, yt, k0 == 0);
  }
  for (int o = 0; o < OUT; ++o) for (int b = 0; b < B; ++b) y[b * OUT + o] = yt[o * B + b];
}
int main() {
  std::mt19937 gen(1); std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(B * IN), w(std::size_t(OUT) * IN), y0(B * OUT), y1(B * OUT), xt(IN * B), yt(OUT * B), bias(OUT, 0.f);
  for (auto& v : x) v = d(gen);
  for (auto& v : w) v = d(gen) * 0.02f;
  DnnlContext ctx(1, DnnlMath::fp32);
  DnnlDense dense(ctx, DenseShape{B, IN, OUT});
  dense.forward(ctx, x.data(), w.data(), nullptr, y0.data());
  ours(x.data(), w.data(), y1.data(), xt.data(), yt.data());
  double md = 0; for (int i = 0; i < B * OUT; ++i) md = std::max(md, double(std::fabs(y0[i] - y1[i])));
  std::printf("max diff %.3g\n", md);
  for (int round = 0; round < 3; ++round) {
    std::vector<double> a, b;
    for (int r = 0; r < 30; ++r) {
      double t0 = now(); dense.forward(ctx, x.data(), w.data(), nullptr, y0.data());
      double t1 = now(); ours(x.data(), w.data(), y1.data(), xt.data(), yt.data());
      double t2 = now(); a.push_back(t1 - t0), b.push_back(t2 - t1);
    }
    std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
    std::printf("oneDNN %.0f us (%.0f GFLOP/s) | ours %.0f us (%.0f GFLOP/s)\n", a[15] * 1e6, 2.0 * B * IN * OUT / a[15] / 1e9, b[15] * 1e6, 2.0 * B * IN * OUT / b[15] / 1e9);
  }
}
