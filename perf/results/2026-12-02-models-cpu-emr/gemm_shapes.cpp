// Times OpenBLAS SGEMM at ViT-S/16 64x64 batch 32 MLP shapes (forward, data and weight gradients) and 1024^3, 1 and 2
// threads. g++ -O2 gemm_shapes.cpp -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas; OPENBLAS_CORETYPE=Cooperlake ./a.out
#include <cblas.h>
#include <chrono>
#include <cstdio>
#include <vector>
int main() {
  int shapes[][3] = {{544, 1536, 384}, {544, 384, 1536}, {1536, 384, 544}, {1024, 1024, 1024}};
  for (int threads : {1, 2}) {
    openblas_set_num_threads(threads);
    for (auto& s : shapes) {
      int m = s[0], n = s[1], k = s[2];
      std::vector<float> a(size_t(m) * k, 0.5f), b(size_t(k) * n, 0.25f), c(size_t(m) * n);
      for (int w = 0; w < 3; ++w) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a.data(), k, b.data(), n, 0, c.data(), n);
      int reps = 20;
      auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a.data(), k, b.data(), n, 0, c.data(), n);
      double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
      std::printf("threads %d  %dx%dx%d  %.1f GFLOP/s\n", threads, m, n, k, 2.0 * m * n * k / sec / 1e9);
    }
  }
}
