// Probe: the dense layer 64 x 3136 -> 1024 (fp32, one thread) as oneDNN 3.2's inner product with blocked weights
// (one reorder of W per step shared by forward and data gradient), against the matmul y^T = W x^T and dnnl_sgemm dx.
// Build: g++ -O2 -std=c++20 -I.venv-onednn/include dense_inner_product.cpp -L.venv-onednn/lib -ldnnl
//        -Wl,-rpath,.venv-onednn/lib -o /tmp/ip && OMP_NUM_THREADS=1 taskset -c 1 /tmp/ip
// Its "today" matmul line is wrong: the descriptors below made oneDNN fall back to a reference kernel (4 s). The
// record compares with `dense_products_onednn3.cpp` of 2026-11-25-cpu-spr-8 instead (forward 2.20-2.25 ms); the
// dnnl_sgemm line (2.39-2.40 ms) is right.
#include <oneapi/dnnl/dnnl.hpp>
#include <chrono>
#include <cstdio>
#include <vector>
#include <random>
#include <algorithm>
using namespace dnnl;
using tag = memory::format_tag; using dt = memory::data_type;
template <class F> double best_ms(F f, int reps = 30) {
  double best = 1e9;
  for (int i = 0; i < reps; ++i) { auto t0 = std::chrono::steady_clock::now(); f();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()); }
  return best;
}
int main() {
  const int N = 64, I = 3136, O = 1024;
  engine eng(engine::kind::cpu, 0); stream s(eng);
  std::vector<float> x(size_t(N) * I), w(size_t(O) * I), y(size_t(N) * O), dy(y.size()), dx(x.size()), wt(w.size());
  std::mt19937 rng(1); std::normal_distribution<float> d;
  for (auto* v : {&x, &w, &dy}) for (auto& e : *v) e = d(rng);
  memory::desc src({N, I}, dt::f32, tag::nc), wplain({O, I}, dt::f32, tag::oi), dst({N, O}, dt::f32, tag::nc);
  memory::desc wany({O, I}, dt::f32, tag::any);
  auto fpd = inner_product_forward::primitive_desc(eng, prop_kind::forward_training, src, wany, dst);
  auto bpd = inner_product_backward_data::primitive_desc(eng, src, wany, dst, fpd);
  std::printf("fwd %s weights %s; bwd_data %s, same weights layout: %d\n", fpd.impl_info_str(),
              fpd.weights_desc() == wplain ? "plain" : "blocked", bpd.impl_info_str(), int(fpd.weights_desc() == bpd.weights_desc()));
  memory xm(src, eng, x.data()), wm(wplain, eng, w.data()), ym(dst, eng, y.data()), dym(dst, eng, dy.data()), dxm(src, eng, dx.data());
  memory wb(fpd.weights_desc(), eng);
  reorder r(wm, wb);
  inner_product_forward f(fpd); inner_product_backward_data b(bpd);
  memory wb2(bpd.weights_desc(), eng); reorder r2(wm, wb2);
  const double t_reorder = best_ms([&] { r.execute(s, wm, wb); s.wait(); });
  const double t_fwd = best_ms([&] { f.execute(s, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wb}, {DNNL_ARG_DST, ym}}); s.wait(); });
  const double t_bwd = best_ms([&] { b.execute(s, {{DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_WEIGHTS, wb2}, {DNNL_ARG_DIFF_SRC, dxm}}); s.wait(); });
  const double t_reorder2 = fpd.weights_desc() == bpd.weights_desc() ? 0 : best_ms([&] { r2.execute(s, wm, wb2); s.wait(); });
  // today's path: matmul y^T (O x N) = W (O x I) x^T (I x N), dx = dy W via dnnl_sgemm
  memory::desc a({O, I}, dt::f32, tag::ab), bt({I, N}, dt::f32, tag::ba), c({O, N}, dt::f32, tag::ba);
  auto mpd = matmul::primitive_desc(eng, a, bt, c);
  matmul m(mpd);
  memory am(a, eng, w.data()), bm(bt, eng, x.data()), cm(c, eng, y.data());
  const double t_mm = best_ms([&] { m.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}}); s.wait(); });
  const double t_sg = best_ms([&] { dnnl_sgemm('N', 'N', N, I, O, 1.f, dy.data(), O, w.data(), I, 0.f, dx.data(), I); });
  const double flop = 2.0 * N * I * O;
  std::printf("inner product: reorder W %.3f ms (+%.3f for bwd), forward %.3f (%.0f GFLOP/s), data gradient %.3f (%.0f): total %.3f ms\n",
              t_reorder, t_reorder2, t_fwd, flop / t_fwd / 1e6, t_bwd, flop / t_bwd / 1e6, t_reorder + t_reorder2 + t_fwd + t_bwd);
  std::printf("today: matmul y^T %.3f (%.0f), dnnl_sgemm dx %.3f (%.0f): total %.3f ms\n", t_mm, flop / t_mm / 1e6, t_sg,
              flop / t_sg / 1e6, t_mm + t_sg);
}
