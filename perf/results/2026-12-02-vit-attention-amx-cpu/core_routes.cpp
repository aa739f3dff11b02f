// Times attention's core (forward, then backward) at ViT-S/16's heads (6 of 64), bf16 NHWC tokens, on one route:
// oneDNN's batched products (DnnlOps, dnnl_attention.h) or attention.h's tiles; 20 timed repetitions after 3,
// medians. Built by core-routes.sh. Usage: core_routes THREADS BATCH TOKENS [tiles]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/dnnl_ops.h"
#include "kernels/cpu/gemm.h"
using namespace ringtrain::kernels;
using namespace ringtrain::kernels::cpu;
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  const int threads = atoi(argv[1]), batch = atoi(argv[2]), tokens = atoi(argv[3]);
  const bool tiles = argc > 4;
  set_compute_threads(threads);
  omp_set_num_threads(threads);
  const AttentionShape s{batch, 6, tokens, 64, ElementType::bf16};
  const size_t n = size_t(batch) * tokens * 384;
  std::vector<uint16_t> qkv(3 * n), dy(n, 0x3e00), y(n), dq(3 * n), kept(s.probabilities());
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = 0x3f00 + (i * 7919 % 255);  // bf16 values in [0.5, 1)
  DnnlOps ops(threads, DnnlMath::bf16);
  AttentionWorkspace ws;
  std::vector<double> f, b;
  for (int r = 0; r < 23; ++r) {
    const double t0 = now();
    if (tiles) attention_forward(s, ActivationLayout::nhwc, qkv.data(), y.data(), kept.data(), ws);
    else ops.attention_forward(s, ActivationLayout::nhwc, qkv.data(), y.data(), kept.data());
    const double t1 = now();
    if (tiles) attention_backward(s, ActivationLayout::nhwc, qkv.data(), kept.data(), dy.data(), dq.data(), ws);
    else ops.attention_backward(s, ActivationLayout::nhwc, qkv.data(), kept.data(), dy.data(), dq.data());
    const double t2 = now();
    if (r >= 3) f.push_back(t1 - t0), b.push_back(t2 - t1);
  }
  std::sort(f.begin(), f.end());
  std::sort(b.begin(), b.end());
  std::printf("%s threads %d batch %d tokens %d: forward %.2f ms backward %.2f ms\n", tiles ? "tiles " : "oneDNN",
              threads, batch, tokens, f[10] * 1e3, b[10] * 1e3);
}
