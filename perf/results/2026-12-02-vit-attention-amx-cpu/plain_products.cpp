// The same products as strided_products.cpp over contiguous per-head buffers (all heads of all samples in one
// batched call), where oneDNN takes its AMX brgemm. Usage: OMP_NUM_THREADS=T plain_products BATCH TOKENS
#include <omp.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "dnnl.hpp"
using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  const long N = atoi(argv[1]), T = atoi(argv[2]), d = 64, H = 6;
  const long B = N * H;  // all heads of all samples in one call
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  std::vector<uint16_t> q(B * T * d, 0x3f80), k(q.size(), 0x3f80), v(q.size(), 0x3f80), y(q.size()), p(B * T * T, 0x3c00);
  std::vector<float> s(B * T * T);
  memory::desc qd({B, T, d}, dt::bf16, tag::abc), ktd({B, d, T}, dt::bf16, tag::acb), sd({B, T, T}, dt::f32, tag::abc),
      pd_({B, T, T}, dt::bf16, tag::abc), vd({B, T, d}, dt::bf16, tag::abc), yd({B, T, d}, dt::bf16, tag::abc);
  dnnl::primitive_attr attr; dnnl::post_ops po; po.append_eltwise(dnnl::algorithm::eltwise_linear, 0.125f, 0.f); attr.set_post_ops(po);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::library);
  auto pd1 = dnnl::matmul::primitive_desc(eng, qd, ktd, sd, attr);
  auto pd2 = dnnl::matmul::primitive_desc(eng, pd_, vd, yd);
  printf("scores: %s\noutput: %s\n", pd1.impl_info_str(), pd2.impl_info_str());
  dnnl::matmul m1(pd1), m2(pd2);
  memory mq(qd, eng, q.data()), mk(ktd, eng, k.data()), ms(sd, eng, s.data()), mp(pd_, eng, p.data()), mv(vd, eng, v.data()), my(yd, eng, y.data());
  auto run = [&] {
    m1.execute(st, {{DNNL_ARG_SRC, mq}, {DNNL_ARG_WEIGHTS, mk}, {DNNL_ARG_DST, ms}});
    m2.execute(st, {{DNNL_ARG_SRC, mp}, {DNNL_ARG_WEIGHTS, mv}, {DNNL_ARG_DST, my}});
    st.wait();
  };
  for (int i = 0; i < 5; ++i) run();
  std::vector<double> t;
  for (int i = 0; i < 30; ++i) { double t0 = now(); run(); t.push_back(now() - t0); }
  std::sort(t.begin(), t.end());
  double fl = 2.0 * 2 * B * T * T * d;
  printf("N=%ld T=%ld: forward products of a layer %.3f ms, %.0f GFLOP/s\n", N, T, t[15] * 1e3, fl / t[15] / 1e9);
}
