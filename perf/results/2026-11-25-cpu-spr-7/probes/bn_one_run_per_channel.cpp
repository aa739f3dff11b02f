// Batch norm + ReLU (no pool) on the Fashion-MNIST model's first batch norm's data (32 channels x 64 x 28 x 28):
// NCHW (argument 64: each channel 64 runs of 3 KB) against the same values as one image (argument 1: each channel
// one 200 KB run, as a channel-major layout written by conv1 would give). 64 MB evicted before each call, median of 41.
//   g++ -std=c++20 -O3 -march=native -I. perf/results/2026-11-25-cpu-spr-7/probes/bn_one_run_per_channel.cpp \
//       kernels/cpu/batchnorm.cpp kernels/cpu/pooling.cpp kernels/cpu/element_conversion.cpp -o /tmp/bn_runs
//   taskset -c 1 /tmp/bn_runs 64; taskset -c 1 /tmp/bn_runs 1
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include <algorithm>
#include <cstdlib>
#include "kernels/cpu/batchnorm.h"
using namespace ringtrain::kernels::cpu;
using ringtrain::kernels::BatchNormShape;
int main(int argc, char** argv) {
  const int N = atoi(argv[1]), C = 32, HW = 784 * 64 / N;
  BatchNormShape s{N, C, HW, 1, 1};
  std::mt19937 rng(1); std::normal_distribution<float> nd;
  std::vector<float> x(size_t(N) * C * HW), gamma(C, 1.1f), beta(C, 0.1f), rm(C), rv(C, 1.f), mean(C), inv(C);
  for (auto& v : x) v = nd(rng);
  std::vector<float> y(x.size()), dy(x.size()), dx(x.size()), dg(C), db(C);
  for (auto& v : dy) v = nd(rng);
  std::vector<char> evict(64 << 20);
  std::vector<double> tf, tb;
  for (int rep = 0; rep < 41; ++rep) {
    std::fill(evict.begin(), evict.end(), char(rep));
    auto t0 = std::chrono::steady_clock::now();
    batchnorm_forward_train(s, x.data(), gamma.data(), beta.data(), 0.1f, 1e-5f, rm.data(), rv.data(), y.data(), mean.data(), inv.data(), true, nullptr);
    auto t1 = std::chrono::steady_clock::now();
    std::fill(evict.begin(), evict.end(), char(rep + 1));
    auto t2 = std::chrono::steady_clock::now();
    batchnorm_backward(s, x.data(), dy.data(), gamma.data(), mean.data(), inv.data(), dx.data(), dg.data(), db.data(), y.data(), nullptr);
    auto t3 = std::chrono::steady_clock::now();
    tf.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    tb.push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
  }
  std::sort(tf.begin(), tf.end()); std::sort(tb.begin(), tb.end());
  printf("N=%d HW=%d: forward %.3f ms backward %.3f ms\n", N, HW, tf[20], tb[20]);
}
