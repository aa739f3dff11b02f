// The probe behind the dense forward orientation in ../2026-11-25-cpu-spr-3.md: y = x W^T against y^T = W x^T on
// oneDNN matmul, dnnl_sgemm and OpenBLAS, 64 x 3136 -> 1024, caches flushed before each call (median of 15);
// also the transposed form writing y directly (dst "ba") and with a bias column, which oneDNN 2.6 runs on its
// reference kernel.
//   g++ -O2 -march=native -std=c++20 dense_t_probe.cpp -ldnnl -lopenblas -o dense_t_probe
//   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c 1 ./dense_t_probe
#include <dnnl.hpp>
#include <cblas.h>
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
  const int B = 64, K = 3136, N = 1024;
  std::vector<float> x(B * K), w(N * K), y(B * N), yt(N * B), dx(B * K), dxt(K * B);
  std::mt19937 g(1); std::normal_distribution<float> nd; for (auto& v : x) v = nd(g); for (auto& v : w) v = nd(g) * 0.01f; for (auto& v : y) v = nd(g);
  matmul::primitive_desc fpd({memory::desc({B,K},f32,tag::ab), memory::desc({K,N},f32,tag::ba), memory::desc({B,N},f32,tag::ab)}, eng);
  matmul fm(fpd);
  memory mx(fpd.src_desc(), eng, x.data()), mw(fpd.weights_desc(), eng, w.data()), my(fpd.dst_desc(), eng, y.data());
  // transposed: yT (N x B) = W (N x K) * xT (K x B)
  matmul::primitive_desc tpd({memory::desc({N,K},f32,tag::ab), memory::desc({K,B},f32,tag::ba), memory::desc({N,B},f32,tag::ab)}, eng);
  matmul tm(tpd);
  memory tw(tpd.src_desc(), eng, w.data()), tx(tpd.weights_desc(), eng, x.data()), ty(tpd.dst_desc(), eng, yt.data());
  // transposed with a bias column (per row of y^T); with dst {N,B} in 'ba' (y itself) instead of 'ab' oneDNN 2.6
  // picks its reference kernel too (seen: ref:any, 5-9 s per call)
  matmul::primitive_desc upd(matmul::desc(memory::desc({N,K},f32,tag::ab), memory::desc({K,B},f32,tag::ba), memory::desc({N,1},f32,tag::ab), memory::desc({N,B},f32,tag::ab)), eng);
  matmul um(upd);
  std::vector<float> bias(N, 0.1f), y2(B * N);
  memory uw(upd.src_desc(), eng, w.data()), ux(upd.weights_desc(), eng, x.data()), uy(upd.dst_desc(), eng, y2.data()), ub(upd.bias_desc(), eng, bias.data());
  matmul::primitive_desc bpd(matmul::desc(memory::desc({B,K},f32,tag::ab), memory::desc({K,N},f32,tag::ba), memory::desc({1,N},f32,tag::ab), memory::desc({B,N},f32,tag::ab)), eng);
  matmul bm(bpd);
  memory bb(bpd.bias_desc(), eng, bias.data());
  std::printf("impl: fwd %s | T with bias column %s\n", bpd.impl_info_str(), upd.impl_info_str());
  for (int round = 0; round < 3; ++round) {
    double u = ms([&]{ um.execute(st, {{DNNL_ARG_SRC,uw},{DNNL_ARG_WEIGHTS,ux},{DNNL_ARG_BIAS,ub},{DNNL_ARG_DST,uy}}); st.wait(); });
    double v = ms([&]{ bm.execute(st, {{DNNL_ARG_SRC,mx},{DNNL_ARG_WEIGHTS,mw},{DNNL_ARG_BIAS,bb},{DNNL_ARG_DST,my}}); st.wait(); });
    std::printf("with bias: fwd matmul %.3f | T matmul with bias column %.3f\n", v, u);
    double a = ms([&]{ fm.execute(st, {{DNNL_ARG_SRC,mx},{DNNL_ARG_WEIGHTS,mw},{DNNL_ARG_DST,my}}); st.wait(); });
    double b = ms([&]{ tm.execute(st, {{DNNL_ARG_SRC,tw},{DNNL_ARG_WEIGHTS,tx},{DNNL_ARG_DST,ty}}); st.wait(); });
    double c = ms([&]{ dnnl_sgemm('N','T',N,B,K,1.f,w.data(),K,x.data(),K,0.f,yt.data(),B); });
    double d = ms([&]{ cblas_sgemm(CblasRowMajor,CblasNoTrans,CblasTrans,N,B,K,1.f,w.data(),K,x.data(),K,0.f,yt.data(),B); });
    // dx^T (K x B) = W^T (K x N) * dy^T (N x B)
    double e = ms([&]{ dnnl_sgemm('N','N',B,K,N,1.f,y.data(),N,w.data(),K,0.f,dx.data(),K); });
    double f = ms([&]{ dnnl_sgemm('T','T',K,B,N,1.f,w.data(),K,y.data(),N,0.f,dxt.data(),B); });
    double h = ms([&]{ cblas_sgemm(CblasRowMajor,CblasTrans,CblasTrans,K,B,N,1.f,w.data(),K,y.data(),N,0.f,dxt.data(),B); });
    std::printf("fwd: matmul %.3f | T matmul %.3f T dnnl_sgemm %.3f T openblas %.3f || dx: dnnl_sgemm %.3f T dnnl_sgemm %.3f T openblas %.3f\n", a,b,c,d,e,f,h);
  }
}
