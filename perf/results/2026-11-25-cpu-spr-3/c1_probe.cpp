// The probe behind "oneDNN SGEMM for conv1" in ../2026-11-25-cpu-spr-3.md: conv1's im2col products (32 x 50176 x 25
// forward, 32 x 25 x 50176 filter gradient) on OpenBLAS and dnnl_sgemm, whole batch and per image, caches flushed.
//   g++ -O2 -march=native -std=c++20 c1_probe.cpp -ldnnl -lopenblas -o c1_probe
//   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c 1 ./c1_probe
#include <dnnl.hpp>
#include <cblas.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <random>
std::vector<char> junk(64 << 20);
void evict() { for (size_t i = 0; i < junk.size(); i += 64) junk[i]++; }
template <class F> double ms(F f) { std::vector<double> t; for (int r = 0; r < 21; ++r) { evict(); auto a = std::chrono::steady_clock::now(); f(); t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count()); } std::sort(t.begin(), t.end()); return t[t.size()/2]; }
int main() {
  const int M = 32, N = 64 * 784, K = 25;
  std::vector<float> w(M * K), col(K * N), y(M * N), dy(M * N), dw(M * K);
  std::mt19937 g(1); std::normal_distribution<float> nd; for (auto& v : w) v = nd(g); for (auto& v : col) v = nd(g); for (auto& v : dy) v = nd(g);
  for (int r = 0; r < 3; ++r) {
    double a = ms([&]{ cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.f, w.data(), K, col.data(), N, 0.f, y.data(), N); });
    double b = ms([&]{ dnnl_sgemm('N','N', M, N, K, 1.f, w.data(), K, col.data(), N, 0.f, y.data(), N); });
    // per image (as conv2d.cpp might do): N = 784 each, y layout per image [M][784]
    double c = ms([&]{ for (int i = 0; i < 64; ++i) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, 784, K, 1.f, w.data(), K, col.data() + i * 784, N, 0.f, y.data() + i * M * 784, 784); });
    double d = ms([&]{ for (int i = 0; i < 64; ++i) dnnl_sgemm('N','N', M, 784, K, 1.f, w.data(), K, col.data() + i * 784, N, 0.f, y.data() + i * M * 784, 784); });
    // filter grad: dw (M x K) += dy (M x N) col^T (N x K)
    double e = ms([&]{ cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, K, N, 1.f, dy.data(), N, col.data(), N, 1.f, dw.data(), K); });
    double f = ms([&]{ dnnl_sgemm('N','T', M, K, N, 1.f, dy.data(), N, col.data(), N, 1.f, dw.data(), K); });
    double h = ms([&]{ for (int i = 0; i < 64; ++i) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, K, 784, 1.f, dy.data() + i * M * 784, 784, col.data() + i * 784, N, 1.f, dw.data(), K); });
    double k = ms([&]{ for (int i = 0; i < 64; ++i) dnnl_sgemm('N','T', M, K, 784, 1.f, dy.data() + i * M * 784, 784, col.data() + i * 784, N, 1.f, dw.data(), K); });
    std::printf("filter per image: openblas %.3f dnnl %.3f\n", h, k);
    std::printf("fwd: openblas %.3f dnnl %.3f | per image: openblas %.3f dnnl %.3f || filter: openblas %.3f dnnl %.3f\n", a, b, c, d, e, f);
  }
}
