// Owns the measurement that chose the oneDNN build (README, "Dependencies"): conv2 of the Fashion-MNIST model
// (64x32x14x14, 64 5x5 filters, pad 2) forward, data and filter gradient in oneDNN's chosen layouts, reorders
// excluded, and the dense layer's forward as a plain-layout matmul, on whichever oneDNN it is built against.
// Not part of the build (it must compile against oneDNN 2.x and 3.x alike, so it holds the one version #if):
//   g++ -O2 -std=c++20 perf/onednn_build_probe.cpp -o probe26 -ldnnl && OMP_NUM_THREADS=1 taskset -c 1 ./probe26
//   pip install onednn-devel   # into a venv: a SYCL build with Intel's runtimes, 2 GB
//   g++ -O2 -std=c++20 -I$VENV/include perf/onednn_build_probe.cpp -o probe3 -L$VENV/lib -ldnnl
//   LD_LIBRARY_PATH=$VENV/lib taskset -c 1 ./probe3
#include <dnnl.hpp>
#include <chrono>
#include <cstdio>
#include <unordered_map>
using namespace dnnl;
using tag = memory::format_tag;
template <class F> double rate(F f, double flops) {
  for (int i = 0; i < 5; ++i) f();
  auto t0 = std::chrono::steady_clock::now(); int n = 0;
  do { f(); ++n; } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 2.0);
  return flops * n / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9;
}
int main() {
  engine eng(engine::kind::cpu, 0); stream s(eng);
  memory::dims src{64, 32, 14, 14}, wei{64, 32, 5, 5}, dst{64, 64, 14, 14}, st{1, 1}, pd{2, 2};
  auto f32 = memory::data_type::f32;
  memory::desc a_src(src, f32, tag::any), a_wei(wei, f32, tag::any), a_dst(dst, f32, tag::any);
  const double flops = 2.0 * 64 * 64 * 14 * 14 * 32 * 25;
#if DNNL_VERSION_MAJOR >= 3
  convolution_forward::primitive_desc fpd(eng, prop_kind::forward_training, algorithm::convolution_direct, a_src, a_wei, a_dst, st, pd, pd);
  convolution_backward_data::primitive_desc dpd(eng, algorithm::convolution_direct, a_src, a_wei, a_dst, st, pd, pd, fpd);
  convolution_backward_weights::primitive_desc wpd(eng, algorithm::convolution_direct, a_src, a_wei, a_dst, st, pd, pd, fpd);
#else
  convolution_forward::primitive_desc fpd({prop_kind::forward_training, algorithm::convolution_direct, a_src, a_wei, a_dst, st, pd, pd}, eng);
  convolution_backward_data::primitive_desc dpd({algorithm::convolution_direct, a_src, a_wei, a_dst, st, pd, pd}, eng, fpd);
  convolution_backward_weights::primitive_desc wpd({algorithm::convolution_direct, a_src, a_wei, a_dst, st, pd, pd}, eng, fpd);
#endif
  memory x(fpd.src_desc(), eng), w(fpd.weights_desc(), eng), y(fpd.dst_desc(), eng);
  memory dy(dpd.diff_dst_desc(), eng), wd(dpd.weights_desc(), eng), dx(dpd.diff_src_desc(), eng);
  memory xw(wpd.src_desc(), eng), dyw(wpd.diff_dst_desc(), eng), dw(wpd.diff_weights_desc(), eng);
  convolution_forward fp(fpd); convolution_backward_data dp(dpd); convolution_backward_weights wp(wpd);
  std::printf("oneDNN %d.%d.%d\n", dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch);
  std::printf("fwd %s %.1f GFLOP/s\n", fpd.impl_info_str(), rate([&] { fp.execute(s, {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}}); s.wait(); }, flops));
  std::printf("bwd_data %s %.1f GFLOP/s\n", dpd.impl_info_str(), rate([&] { dp.execute(s, {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, wd}, {DNNL_ARG_DIFF_SRC, dx}}); s.wait(); }, flops));
  std::printf("bwd_weights %s %.1f GFLOP/s\n", wpd.impl_info_str(), rate([&] { wp.execute(s, {{DNNL_ARG_SRC, xw}, {DNNL_ARG_DIFF_DST, dyw}, {DNNL_ARG_DIFF_WEIGHTS, dw}}); s.wait(); }, flops));
  // dense1 forward as a matmul in plain layouts: 64x3136 times (1024x3136)^T
  memory::desc ms({64, 3136}, f32, tag::ab), mw({3136, 1024}, f32, tag::ba), md({64, 1024}, f32, tag::ab);
#if DNNL_VERSION_MAJOR >= 3
  matmul::primitive_desc mpd(eng, ms, mw, md);
#else
  matmul::primitive_desc mpd({ms, mw, md}, eng);
#endif
  memory a(ms, eng), b(mw, eng), c(md, eng); matmul mm(mpd);
  std::printf("dense1 matmul %s %.1f GFLOP/s\n", mpd.impl_info_str(), rate([&] { mm.execute(s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}}); s.wait(); }, 2.0 * 64 * 3136 * 1024));
}
