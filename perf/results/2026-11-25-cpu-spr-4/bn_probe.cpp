// Times kernels/cpu/batchnorm on NCHW against a channel-blocked x, and (OUT_BLOCK, 2026-11-25-cpu-spr-5.md) a
// pooled y blocked too (fused ReLU + 2x2 max pool; 64 MB evicted before each call, median of 41, one core). Build
// and run from the repository root (element_conversion.cpp from 2026-11-25-cpu-spr-6 on):
//   g++ -std=c++20 -O3 -march=native -I. perf/results/2026-11-25-cpu-spr-4/bn_probe.cpp kernels/cpu/batchnorm.cpp \
//       kernels/cpu/pooling.cpp kernels/cpu/element_conversion.cpp -o /tmp/bn_probe && \
//       taskset -c 1 /tmp/bn_probe CHANNELS SIDE BLOCK [OUT_BLOCK]
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include <algorithm>
#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/pooling.h"
using namespace ringtrain::kernels::cpu;
using ringtrain::kernels::BatchNormShape;
int main(int argc, char** argv) {
  const int N = 64, C = atoi(argv[1]), H = atoi(argv[2]), W = H, block = atoi(argv[3]);
  const int out_block = argc > 4 ? atoi(argv[4]) : 1;
  BatchNormShape s{N, C, H * W, block, out_block};
  std::mt19937 rng(1); std::normal_distribution<float> nd;
  std::vector<float> x(size_t(N) * C * H * W), gamma(C, 1.1f), beta(C, 0.1f), rm(C), rv(C, 1.f), mean(C), inv(C);
  for (auto& v : x) v = nd(rng);
  const size_t out = size_t(N) * C * (H / 2) * (W / 2);
  std::vector<float> y(out), dy(out), dx(x.size()), dg(C), db(C);
  std::vector<int32_t> am(out);
  for (auto& v : dy) v = nd(rng);
  FusedPool pool{H, W, am.data()};
  std::vector<char> evict(64 << 20);
  std::vector<double> tf, tb;
  for (int rep = 0; rep < 41; ++rep) {
    std::fill(evict.begin(), evict.end(), char(rep));
    auto t0 = std::chrono::steady_clock::now();
    batchnorm_forward_train(s, x.data(), gamma.data(), beta.data(), 0.1f, 1e-5f, rm.data(), rv.data(), y.data(), mean.data(), inv.data(), true, &pool);
    auto t1 = std::chrono::steady_clock::now();
    std::fill(evict.begin(), evict.end(), char(rep + 1));
    auto t2 = std::chrono::steady_clock::now();
    batchnorm_backward(s, x.data(), dy.data(), gamma.data(), mean.data(), inv.data(), dx.data(), dg.data(), db.data(), y.data(), &pool);
    auto t3 = std::chrono::steady_clock::now();
    tf.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    tb.push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
  }
  std::sort(tf.begin(), tf.end()); std::sort(tb.begin(), tb.end());
  printf("C=%d HxW=%dx%d block %d -> %d: forward %.3f ms backward %.3f ms\n", C, H, W, block, out_block, tf[20],
         tb[20]);
}
