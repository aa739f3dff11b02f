// The first probe of the direct conv1 kernel (before it went into kernels/cpu/conv2d_direct.cpp), against
// im2col + OpenBLAS through conv2d_forward / conv2d_backward_filter of the commit before. Build: g++ -std=c++20 -O3
// -march=native -DNDEBUG -I. <this file> build/kernels/librt_kernels_cpu.a -lopenblas -lfmt; run: taskset -c 1 ./a.out 100
// Probe: conv1 (1 -> 32, 5x5, pad 2, 28x28, batch 64) as a direct kernel over the flattened output plane, the
// input as 5 column-shifted padded copies (one per kernel column) so every tap's vector is one contiguous load.
#include <immintrin.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "kernels/cpu/conv2d.h"
using namespace ringtrain::kernels;
using namespace ringtrain::kernels::cpu;
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

constexpr int H = 28, W = 28, R = 5, P = 2, K = 32, HW = H * W, V = HW / 16;  // 49 vectors
constexpr int PR = H + R - 1;  // padded rows 32
// shifted[kw][(i)*W + ow] = x[i - P][ow + kw - P], zero outside; rows i in 0..PR-1
void shift_image(const float* x, float* shifted) {
  std::memset(shifted, 0, sizeof(float) * R * PR * W);
  for (int kw = 0; kw < R; ++kw) {
    float* s = shifted + kw * PR * W;
    const int lo = std::max(0, P - kw), hi = std::min(W, W + P - kw);
    for (int i = 0; i < H; ++i)
      for (int ow = lo; ow < hi; ++ow) s[(i + P) * W + ow] = x[i * W + ow + kw - P];
  }
}

template <int NV, int NC>
inline void fwd_block(const float* shifted, const float* w, int v0, int c0, float* y) {
  __m512 acc[NC][NV];
  for (int c = 0; c < NC; ++c)
    for (int v = 0; v < NV; ++v) acc[c][v] = _mm512_setzero_ps();
  for (int kh = 0; kh < R; ++kh)
    for (int kw = 0; kw < R; ++kw) {
      const float* src = shifted + kw * PR * W + kh * W + v0 * 16;
      __m512 xv[NV];
      for (int v = 0; v < NV; ++v) xv[v] = _mm512_loadu_ps(src + v * 16);
      for (int c = 0; c < NC; ++c) {
        const __m512 wv = _mm512_set1_ps(w[((c0 + c) * R + kh) * R + kw]);
        for (int v = 0; v < NV; ++v) acc[c][v] = _mm512_fmadd_ps(wv, xv[v], acc[c][v]);
      }
    }
  for (int c = 0; c < NC; ++c)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(y + (c0 + c) * HW + (v0 + v) * 16, acc[c][v]);
}

void direct_forward(int batch, const float* x, const float* w, float* y, float* shifted) {
  for (int n = 0; n < batch; ++n) {
    shift_image(x + n * HW, shifted);
    float* yn = y + std::ptrdiff_t{n} * K * HW;
    for (int c0 = 0; c0 < K; c0 += 8) {
      int v0 = 0;
      for (; v0 + 3 <= V; v0 += 3) fwd_block<3, 8>(shifted, w, v0, c0, yn);
      for (; v0 < V; ++v0) fwd_block<1, 8>(shifted, w, v0, c0, yn);
    }
  }
}

// partial[(c*25 + tap)*16 + lane]
template <int NC>
inline void filt_block(const float* shifted, const float* dy, int c0, int kh, float* partial) {
  __m512 acc[NC][R];
  for (int c = 0; c < NC; ++c)
    for (int t = 0; t < R; ++t) acc[c][t] = _mm512_setzero_ps();
  for (int v = 0; v < V; ++v) {
    __m512 xv[R];
    for (int kw = 0; kw < R; ++kw) xv[kw] = _mm512_loadu_ps(shifted + kw * PR * W + kh * W + v * 16);
    for (int c = 0; c < NC; ++c) {
      const __m512 g = _mm512_loadu_ps(dy + (c0 + c) * HW + v * 16);
      for (int kw = 0; kw < R; ++kw) acc[c][kw] = _mm512_fmadd_ps(g, xv[kw], acc[c][kw]);
    }
  }
  for (int c = 0; c < NC; ++c)
    for (int kw = 0; kw < R; ++kw) {
      float* p = partial + ((c0 + c) * 25 + kh * R + kw) * 16;
      _mm512_storeu_ps(p, _mm512_add_ps(_mm512_loadu_ps(p), acc[c][kw]));
    }
}

void direct_filter(int batch, const float* x, const float* dy, float* dw, float* shifted, float* partial) {
  std::memset(partial, 0, sizeof(float) * K * 25 * 16);
  for (int n = 0; n < batch; ++n) {
    shift_image(x + n * HW, shifted);
    const float* dyn = dy + std::ptrdiff_t{n} * K * HW;
    for (int c0 = 0; c0 < K; c0 += 4)
      for (int kh = 0; kh < R; ++kh) filt_block<4>(shifted, dyn, c0, kh, partial);
  }
  for (int t = 0; t < K * 25; ++t) {
    float s = 0;
    for (int l = 0; l < 16; ++l) s += partial[t * 16 + l];
    dw[t] += s;
  }
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 100, batch = 64;
  Conv2dShape s{batch, 1, 28, 28, 32, 5, 5, 1, 2};
  std::mt19937 gen(1); std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(batch * HW), w(K * 25), y0(batch * K * HW), y1(y0.size()), dy(y0.size()), dw0(K * 25), dw1(K * 25);
  for (auto& v : x) v = d(gen);
  for (auto& v : w) v = d(gen) * 0.2f;
  for (auto& v : dy) v = d(gen);
  std::vector<float> shifted(R * PR * W + 64), partial(K * 25 * 16);
  ConvWorkspace ws;
  conv2d_forward(s, x.data(), w.data(), nullptr, y0.data(), ws);
  direct_forward(batch, x.data(), w.data(), y1.data(), shifted.data());
  double md = 0, mx = 0;
  for (size_t i = 0; i < y0.size(); ++i) md = std::max(md, double(std::fabs(y0[i] - y1[i]))), mx = std::max(mx, double(std::fabs(y0[i])));
  conv2d_backward_filter(s, x.data(), dy.data(), dw0.data(), nullptr, ws);
  direct_filter(batch, x.data(), dy.data(), dw1.data(), shifted.data(), partial.data());
  double fd = 0, fx = 0;
  for (int i = 0; i < K * 25; ++i) fd = std::max(fd, double(std::fabs(dw0[i] - dw1[i]))), fx = std::max(fx, double(std::fabs(dw0[i])));
  std::printf("fwd max diff %.3g of %.3g; filter max diff %.3g of %.3g\n", md, mx, fd, fx);
  for (int round = 0; round < 3; ++round) {
    std::vector<double> a, b, c, e;
    for (int r = 0; r < reps; ++r) {
      double t0 = now(); conv2d_forward(s, x.data(), w.data(), nullptr, y0.data(), ws);
      double t1 = now(); direct_forward(batch, x.data(), w.data(), y1.data(), shifted.data());
      double t2 = now(); conv2d_backward_filter(s, x.data(), dy.data(), dw0.data(), nullptr, ws);
      double t3 = now(); direct_filter(batch, x.data(), dy.data(), dw1.data(), shifted.data(), partial.data());
      double t4 = now();
      a.push_back(t1 - t0), b.push_back(t2 - t1), c.push_back(t3 - t2), e.push_back(t4 - t3);
    }
    for (auto* v : {&a, &b, &c, &e}) std::sort(v->begin(), v->end());
    std::printf("round %d median us: im2col fwd %.0f direct fwd %.0f | im2col filter %.0f direct filter %.0f\n", round,
                a[reps / 2] * 1e6, b[reps / 2] * 1e6, c[reps / 2] * 1e6, e[reps / 2] * 1e6);
  }
}
