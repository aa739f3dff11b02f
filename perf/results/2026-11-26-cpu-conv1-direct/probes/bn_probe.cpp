// Build (from the checkout, after building build/): g++ -std=c++20 -O3 -march=native -DNDEBUG -fopenmp -I. \
//   perf/results/2026-11-26-cpu-conv1-direct/probes/bn_probe.cpp build/kernels/librt_kernels_cpu.a -lopenblas -lfmt
// Run: taskset -c 1 ./a.out 300 [threads] (threads: run.threads, default 1). The backward keeps its staging in a
// BatchNormWorkspace across calls, as the CPU backend does. The "head" column of the record was this probe before the
// workspace and threads existed (kernel API of 4d6f00b), linked against that commit's library.
// Times the Fashion-MNIST step's two fused batch norms (relu + 2x2 pool) as the network runs them: BN1 NCHW on
// 64x32x28x28, BN2 NHWC (block 64) on 64x64x14x14, pooled output NCHW. One thread; min and median of reps.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include "kernels/cpu/batchnorm.h"
using namespace ringtrain::kernels;
using namespace ringtrain::kernels::cpu;
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
struct Case { const char* name; BatchNormShape s; int h, w; };
#include "kernels/cpu/gemm.h"
int main(int argc, char** argv) {
  ringtrain::kernels::cpu::set_compute_threads(argc > 2 ? atoi(argv[2]) : 1);
  const int reps = argc > 1 ? atoi(argv[1]) : 200;
  Case cases[] = {{"bn1 nchw 32x28x28", {64, 32, 784, 1, 1}, 28, 28}, {"bn2 nhwc 64x14x14", {64, 64, 196, 64, 1}, 14, 14}};
  std::mt19937 gen(1); std::normal_distribution<float> d(0.f, 1.f);
  double checksum = 0;
  for (auto& c : cases) {
    const auto n = c.s.elements(), np = n / 4;
    std::vector<float> x(n), y(np), dy(np), dx(n), g(c.s.channels, 1.f), b(c.s.channels, 0.1f), rm(c.s.channels), rv(c.s.channels, 1.f),
        mean(c.s.channels), istd(c.s.channels), dg(c.s.channels), db(c.s.channels);
    std::vector<int32_t> am(np);
    for (auto& v : x) v = d(gen);
    for (auto& v : dy) v = d(gen);
    FusedPool pool{c.h, c.w, am.data()};
    BatchNormWorkspace kept;  // as the backend keeps it
    std::vector<double> tf, tb;
    for (int r = 0; r < reps; ++r) {
      double t0 = now();
      batchnorm_forward_train(c.s, x.data(), g.data(), b.data(), 0.1f, 1e-5f, rm.data(), rv.data(), y.data(), mean.data(), istd.data(), true, &pool);
      double t1 = now();
      batchnorm_backward(c.s, x.data(), dy.data(), g.data(), mean.data(), istd.data(), dx.data(), dg.data(), db.data(), y.data(), &pool, &kept);
      double t2 = now();
      tf.push_back(t1 - t0), tb.push_back(t2 - t1);
    }
    for (auto v : dx) checksum += v;
    for (auto v : y) checksum += v;
    std::sort(tf.begin(), tf.end()), std::sort(tb.begin(), tb.end());
    std::printf("%-20s fwd min %.3f med %.3f ms | bwd min %.3f med %.3f ms\n", c.name, tf[0] * 1e3, tf[reps / 2] * 1e3, tb[0] * 1e3, tb[reps / 2] * 1e3);
  }
  std::printf("checksum %.9g\n", checksum);
}
