// The probe behind the dense data-gradient line of ../2026-11-25-cpu-spr-3.md: dx = dy W on dnnl_sgemm, on the matmul
// primitive, and as dx^T = W^T dy^T on the matmul primitive; 64 x 1024 -> 3136, caches flushed (median of 15).
//   g++ -O2 -march=native -std=c++20 dx_probe.cpp -ldnnl -o dx_probe && OMP_NUM_THREADS=1 taskset -c 1 ./dx_probe
#include <dnnl.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <random>
using namespace dnnl;
using tag = memory::format_tag; const auto f32 = memory::data_type::f32;
std::vector<char> junk(64 << 20);
void evict() { for (size_t i = 0; i < junk.size(); i += 64) junk[i]++; }
template <class F> double ms(F f) { std::vector<double> t; for (int r = 0; r < 15; ++r) { evict(); auto a = std::chrono::steady_clock::now(); f(); t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count()); } std::sort(t.begin(), t.end()); return t[t.size()/2]; }
int main() {
  engine eng(engine::kind::cpu, 0); stream st(eng);
  const int B = 64, K = 3136, N = 1024;  // x: B x K, W: N x K, dy: B x N
  std::vector<float> w(N * K), dy(B * N), dx(B * K), dxt(K * B);
  std::mt19937 g(1); std::normal_distribution<float> nd; for (auto& v : w) v = nd(g) * 0.01f; for (auto& v : dy) v = nd(g);
  // dx^T (K x B) = W^T (K x N, W read 'ba') * dy^T (N x B, dy read 'ba')
  matmul::primitive_desc tpd(matmul::desc(memory::desc({K,N},f32,tag::ba), memory::desc({N,B},f32,tag::ba), memory::desc({K,B},f32,tag::ab)), eng);
  matmul tm(tpd);
  memory tw(tpd.src_desc(), eng, w.data()), tdy(tpd.weights_desc(), eng, dy.data()), tdx(tpd.dst_desc(), eng, dxt.data());
  matmul::primitive_desc pd(matmul::desc(memory::desc({B,N},f32,tag::ab), memory::desc({N,K},f32,tag::ab), memory::desc({B,K},f32,tag::ab)), eng);
  matmul m(pd);
  memory mdy(pd.src_desc(), eng, dy.data()), mw(pd.weights_desc(), eng, w.data()), mdx(pd.dst_desc(), eng, dx.data());
  std::printf("impl: T %s | plain %s\n", tpd.impl_info_str(), pd.impl_info_str());
  for (int round = 0; round < 3; ++round) {
    double a = ms([&]{ dnnl_sgemm('N','N',B,K,N,1.f,dy.data(),N,w.data(),K,0.f,dx.data(),K); });
    double b = ms([&]{ tm.execute(st, {{DNNL_ARG_SRC,tw},{DNNL_ARG_WEIGHTS,tdy},{DNNL_ARG_DST,tdx}}); st.wait(); });
    double c = ms([&]{ m.execute(st, {{DNNL_ARG_SRC,mdy},{DNNL_ARG_WEIGHTS,mw},{DNNL_ARG_DST,mdx}}); st.wait(); });
    std::printf("dx: dnnl_sgemm %.3f | T matmul %.3f | matmul %.3f\n", a, b, c);
  }
}
