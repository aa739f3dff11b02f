// Build: g++ -std=c++20 -O3 -march=native -DNDEBUG -I. -I.venv-onednn/include <this file> build/kernels/librt_kernels_cpu.a \
//   build/common/librt_common.a -L.venv-onednn/lib -Wl,-rpath,$PWD/.venv-onednn/lib -ldnnl -lopenblas -lfmt -fopenmp
// Run: taskset -c 1 ./a.out
// The dense data gradient dx = dy W (batch x out times out x in) on oneDNN's SGEMM against OpenBLAS, for the
// model's two dense layers (out 1024, in 3136; out 10, in 1024), one thread, medians of 200 calls, three rounds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include "kernels/cpu/dnnl_context.h"
#include "kernels/cpu/gemm.h"
using namespace ringtrain::kernels::cpu;
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  DnnlContext ctx(1, DnnlMath::fp32);
  set_compute_threads(1);
  struct Shape { int batch, out, in; } shapes[] = {{64, 10, 1024}, {64, 1024, 3136}};
  for (int round = 0; round < 3; ++round)
    for (const Shape s : shapes) {
      std::vector<float> dy(size_t(s.batch) * s.out, 0.5f), w(size_t(s.out) * s.in, 0.25f), dx(size_t(s.batch) * s.in);
      const int reps = s.out < 100 ? 2000 : 100;
      std::vector<double> a, b;
      for (int r = 0; r < reps; ++r) {
        double t0 = now(); ctx.sgemm(s.batch, s.in, s.out, dy.data(), w.data(), dx.data());
        double t1 = now(); sgemm(Transpose::no, Transpose::no, s.batch, s.in, s.out, 1.0f, dy.data(), s.out, w.data(), s.in, 0.0f, dx.data(), s.in);
        double t2 = now(); a.push_back(t1 - t0), b.push_back(t2 - t1);
      }
      std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
      std::printf("round %d, %d x %d -> %d: dnnl_sgemm %.1f us, OpenBLAS %.1f us\n", round, s.batch, s.out, s.in, a[reps / 2] * 1e6, b[reps / 2] * 1e6);
    }
}
