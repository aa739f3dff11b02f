// Build: g++ -std=c++20 -O3 -march=native -DNDEBUG -I. perf/results/2026-11-26-cpu-conv1-direct/probes/lib_probe.cpp \
//   build/kernels/librt_kernels_cpu.a -lopenblas -lfmt -o lib_new; the same from the commit before's checkout with
//   -include kernels/cpu/gemm.h -Dconv2d_runs_direct'(s)'=0 gives lib_head. Run: taskset -c 1 ./lib_new (alternated).
// Times conv2d_forward and conv2d_backward_filter of conv1 (64 x 1 x 28 x 28 -> 32, 5x5) through the library.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/gemm.h"
using namespace ringtrain::kernels;
using namespace ringtrain::kernels::cpu;
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  const int batch = 64, reps = 100;
  Conv2dShape s{batch, 1, 28, 28, 32, 5, 5, 1, 2};
  std::mt19937 gen(1); std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(batch * 784), w(800), y(batch * 32 * 784), dy(y.size()), dw(800);
  for (auto& v : x) v = d(gen);
  for (auto& v : w) v = d(gen) * 0.2f;
  for (auto& v : dy) v = d(gen);
  ConvWorkspace ws;
  for (int threads : {1, 1, 1}) {
    set_compute_threads(threads);
    std::vector<double> a, b;
    for (int r = 0; r < reps; ++r) {
      double t0 = now(); conv2d_forward(s, x.data(), w.data(), nullptr, y.data(), ws);
      double t1 = now(); conv2d_backward_filter(s, x.data(), dy.data(), dw.data(), nullptr, ws);
      double t2 = now(); a.push_back(t1 - t0), b.push_back(t2 - t1);
    }
    std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
    std::printf("threads %d direct %d: fwd %.0f us filter %.0f us\n", threads, conv2d_runs_direct(s), a[reps / 2] * 1e6, b[reps / 2] * 1e6);
  }
}
