// The fp32 dense gradients' products on one shape, each form alternated 200 times on two threads, medians of the
// last 180: oneDNN's SGEMM (what DnnlDense runs) against oneDNN's matmul primitive, for dx = dy W and dW += dy^T x.
// Built by forms.sh. Usage: backward_products ROWS IN OUT
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>
#include "kernels/cpu/dnnl_dense.h"
#include "kernels/cpu/gemm.h"
using namespace ringtrain::kernels;
using namespace ringtrain::kernels::cpu;
using dnnl::memory;
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
int main(int argc, char** argv) {
  int batch = atoi(argv[1]), in = atoi(argv[2]), out = atoi(argv[3]);
  DnnlContext ctx(2, DnnlMath::fp32);
  std::vector<float> x(size_t(batch) * in, 0.5f), w(size_t(in) * out, 0.01f), dy(size_t(batch) * out, 0.1f), dx(x.size()), dw(w.size());
  dnnl::engine eng(dnnl::engine::kind::cpu, 0); dnnl::stream st(eng);
  // dx (batch x in) = dy (batch x out) W (out x in)
  memory::desc dy_md({batch, out}, memory::data_type::f32, memory::format_tag::ab), w_md({out, in}, memory::data_type::f32, memory::format_tag::ab), dx_md({batch, in}, memory::data_type::f32, memory::format_tag::ab);
  dnnl::matmul mm_dx(dnnl::matmul::primitive_desc(eng, dy_md, w_md, dx_md));
  // dW (out x in) = dy^T (out x batch) x (batch x in)
  memory::desc dyT_md({out, batch}, memory::data_type::f32, memory::format_tag::ba), x_md({batch, in}, memory::data_type::f32, memory::format_tag::ab), dw_md({out, in}, memory::data_type::f32, memory::format_tag::ab);
  dnnl::primitive_attr attr; dnnl::post_ops po; po.append_sum(1.0f); attr.set_post_ops(po);
  dnnl::matmul mm_dw(dnnl::matmul::primitive_desc(eng, dyT_md, x_md, dw_md, attr));
  memory m_dy(dy_md, eng, dy.data()), m_w(w_md, eng, w.data()), m_dx(dx_md, eng, dx.data()), m_dyT(dyT_md, eng, dy.data()), m_x(x_md, eng, x.data()), m_dw(dw_md, eng, dw.data());
  std::vector<std::function<void()>> f = {
    [&] { ctx.sgemm(Transpose::no, Transpose::no, batch, in, out, dy.data(), w.data(), 0.0f, dx.data()); },
    [&] { mm_dx.execute(st, {{DNNL_ARG_SRC, m_dy}, {DNNL_ARG_WEIGHTS, m_w}, {DNNL_ARG_DST, m_dx}}); st.wait(); },
    [&] { ctx.sgemm(Transpose::yes, Transpose::no, out, in, batch, dy.data(), x.data(), 1.0f, dw.data()); },
    [&] { mm_dw.execute(st, {{DNNL_ARG_SRC, m_dyT}, {DNNL_ARG_WEIGHTS, m_x}, {DNNL_ARG_DST, m_dw}}); st.wait(); },
  };
  const char* names[] = {"dx sgemm", "dx matmul", "dw sgemm", "dw matmul"};
  std::vector<std::vector<double>> t(f.size());
  for (int r = 0; r < 200; ++r) for (size_t i = 0; i < f.size(); ++i) { double t0 = now(); f[i](); if (r >= 20) t[i].push_back(now() - t0); }
  double fl = 2.0 * batch * in * out;
  printf("%dx%d->%d:", batch, in, out);
  for (size_t i = 0; i < f.size(); ++i) printf("  %s %.3f ms (%.0f)", names[i], med(t[i]) * 1e3, fl / med(t[i]) / 1e9);
  printf("\n");
}
