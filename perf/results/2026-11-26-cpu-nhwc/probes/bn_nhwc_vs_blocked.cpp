// Probe: the CPU batch norm with its fused ReLU and 2x2 pool, forward and backward, best of 60, on x of
// 64 x C x H x H (default 64 x 64 x 14 x 14, conv2's output) blocked by argv[1] channels (16: nChw16c, C: NHWC,
// 1: NCHW); y NCHW. Built against the build tree's kernel library:
//   g++ -O3 -std=c++20 -I. perf/results/2026-11-26-cpu-nhwc/probes/bn_nhwc_vs_blocked.cpp \
//       build/kernels/librt_kernels_cpu.a build/common/librt_common.a -lfmt -o /tmp/bn
//   taskset -c 1 /tmp/bn 16; taskset -c 1 /tmp/bn 64; taskset -c 1 /tmp/bn 1 32 28
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include <algorithm>
#include "kernels/cpu/batchnorm.h"
using namespace ringtrain::kernels;
int main(int argc, char** argv) {
  const int N = 64, C = argc > 2 ? atoi(argv[2]) : 64, H = argc > 3 ? atoi(argv[3]) : 14;
  const int block = atoi(argv[1]);
  BatchNormShape s{N, C, H * H, block, 1, ElementType::f32};
  std::vector<float> x(size_t(N) * C * H * H), dx(x.size()), y(x.size() / 4), dy(y.size());
  std::vector<int32_t> am(y.size());
  std::mt19937 rng(1); std::normal_distribution<float> d(0.3f, 1.f);
  for (auto& v : x) v = d(rng);
  for (auto& v : dy) v = d(rng);
  std::vector<float> g(C, 1.f), b(C, 0.f), rm(C), rv(C, 1.f), sm(C), si(C), dg(C), db(C);
  cpu::FusedPool pool{H, H, am.data()};
  double best_f = 1e9, best_b = 1e9;
  for (int it = 0; it < 60; ++it) {
    auto t0 = std::chrono::steady_clock::now();
    cpu::batchnorm_forward_train(s, x.data(), g.data(), b.data(), 0.1f, 1e-5f, rm.data(), rv.data(), y.data(), sm.data(), si.data(), true, &pool);
    auto t1 = std::chrono::steady_clock::now();
    cpu::batchnorm_backward(s, x.data(), dy.data(), g.data(), sm.data(), si.data(), dx.data(), dg.data(), db.data(), y.data(), &pool);
    auto t2 = std::chrono::steady_clock::now();
    best_f = std::min(best_f, std::chrono::duration<double, std::milli>(t1 - t0).count());
    best_b = std::min(best_b, std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  std::printf("block %d C %d H %d: forward %.3f ms backward %.3f ms\n", block, C, H, best_f, best_b);
}
