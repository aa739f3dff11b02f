// The forward products of one attention layer (scores = Q K^T scaled, y = P V) for every head, as oneDNN batched
// matmuls over the strided views of a qkv tensor (NHWC; NCHW with a third argument, scores only), bf16, medians of
// 30 after 5. Build: g++ -O2 -std=c++20 -fopenmp -I.venv-onednn/include strided_products.cpp -L.venv-onednn/lib -ldnnl
// Usage: OMP_NUM_THREADS=T strided_products BATCH TOKENS [nchw]
#include <omp.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "dnnl.hpp"
using dnnl::memory;
using dt = memory::data_type;
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  const long N = atoi(argv[1]), T = atoi(argv[2]), d = 64, H = 6, W = H * d;
  const bool nchw = argc > 3;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  std::vector<uint16_t> qkv(N * T * 3 * W, 0x3f80), y(N * T * W), p(N * H * T * T, 0x3c00);
  std::vector<float> s(N * T * T);
  // views: NHWC token-major (ld 3W) or NCHW value-major (ld T)
  memory::desc q = nchw ? memory::desc({N, T, d}, dt::bf16, {T * 3 * W, 1, T}) : memory::desc({N, T, d}, dt::bf16, {T * 3 * W, 3 * W, 1});
  memory::desc kt = nchw ? memory::desc({N, d, T}, dt::bf16, {T * 3 * W, T, 1}) : memory::desc({N, d, T}, dt::bf16, {T * 3 * W, 1, 3 * W});
  memory::desc sc({N, T, T}, dt::f32, {T * T, T, 1});
  memory::desc pd_({N, T, T}, dt::bf16, {H * T * T, T, 1});
  memory::desc v = q;
  memory::desc yd = nchw ? memory::desc({N, T, d}, dt::bf16, {T * W, 1, T}) : memory::desc({N, T, d}, dt::bf16, {T * W, W, 1});
  dnnl::primitive_attr attr; dnnl::post_ops po; po.append_eltwise(dnnl::algorithm::eltwise_linear, 0.125f, 0.f); attr.set_post_ops(po);
  auto pd1 = dnnl::matmul::primitive_desc(eng, q, kt, sc, attr);
  dnnl::matmul::primitive_desc pd2;
  if (nchw) {  // y^T = V^T P^T : A = V^T {N,d,T}, B = P^T {N,T,T}, C = y^T {N,d,T} plain-ish
    memory::desc vt({N, d, T}, dt::bf16, {T * 3 * W, T, 1}), ptr({N, T, T}, dt::bf16, {H * T * T, 1, T}), ytd({N, d, T}, dt::bf16, {T * W, T, 1});
    pd2 = dnnl::matmul::primitive_desc(eng, vt, ptr, ytd);
  } else pd2 = dnnl::matmul::primitive_desc(eng, pd_, v, yd);
  printf("scores: %s\noutput: %s\n", pd1.impl_info_str(), pd2.impl_info_str());
  dnnl::matmul m1(pd1), m2(pd2);
  memory mq(q, eng, qkv.data()), mk(kt, eng, qkv.data() + W), ms(sc, eng, s.data()), mp(pd_, eng, p.data()), mv(v, eng, qkv.data() + 2 * W), my(yd, eng, y.data());
  auto run = [&] {
    for (int h = 0; h < H; ++h) {
      mq.set_data_handle(qkv.data() + h * d); mk.set_data_handle(qkv.data() + W + h * d);
      m1.execute(st, {{DNNL_ARG_SRC, mq}, {DNNL_ARG_WEIGHTS, mk}, {DNNL_ARG_DST, ms}});
      if (!nchw) m2.execute(st, {{DNNL_ARG_SRC, mp}, {DNNL_ARG_WEIGHTS, mv}, {DNNL_ARG_DST, my}});
    }
    st.wait();
  };
  for (int i = 0; i < 5; ++i) run();
  std::vector<double> t;
  for (int i = 0; i < 30; ++i) { double t0 = now(); run(); t.push_back(now() - t0); }
  std::sort(t.begin(), t.end());
  double fl = 2.0 * 2 * N * H * T * T * d;
  printf("N=%ld T=%ld: forward products of a layer %.3f ms, %.0f GFLOP/s\n", N, T, t[15] * 1e3, fl / t[15] / 1e9);
}
