// The two forms of DnnlDense's fp32 forward on one shape, alternated 300 times on two threads, medians of the last
// 280: "transposed" (y^T = W x^T, the transpose back adding the bias) and "direct" (y = x W^T + b). Built by
// forms.sh against DnnlDense as it was at 94c2f53, whose constructor there reads RT_NO_TRANSPOSED to leave the
// transposed form out. Usage: dense_forms ROWS IN OUT
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "kernels/cpu/dnnl_dense.h"
#include "kernels/cpu/gemm.h"
using namespace ringtrain::kernels;
using namespace ringtrain::kernels::cpu;
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  int batch = atoi(argv[1]), in = atoi(argv[2]), out = atoi(argv[3]);
  DnnlContext ctx(2, DnnlMath::fp32);
  DenseShape s{batch, in, out, ElementType::f32};
  Bf16WeightCopies copies;
  DnnlDense a(ctx, s, copies);
  setenv("RT_NO_TRANSPOSED", "1", 1);
  DnnlDense b(ctx, s, copies);
  std::vector<float> x(size_t(batch) * in, 0.5f), w(size_t(in) * out, 0.01f), bias(out, 0.1f), y(size_t(batch) * out), y2(y.size());
  std::vector<double> ta, tb;
  for (int r = 0; r < 300; ++r) {
    double t0 = now(); a.forward(ctx, x.data(), w.data(), bias.data(), y.data());
    double t1 = now(); b.forward(ctx, x.data(), w.data(), bias.data(), y2.data());
    double t2 = now();
    if (r >= 20) { ta.push_back(t1 - t0); tb.push_back(t2 - t1); }
  }
  std::sort(ta.begin(), ta.end()); std::sort(tb.begin(), tb.end());
  double fl = s.forward_flops();
  printf("%dx%d->%d transposed %.3f ms (%.0f GF/s)  direct %.3f ms (%.0f GF/s)  maxdiff %g\n", batch, in, out, ta[ta.size()/2]*1e3, fl/ta[ta.size()/2]/1e9, tb[tb.size()/2]*1e3, fl/tb[tb.size()/2]/1e9, [&]{double m=0; for(size_t i=0;i<y.size();++i) m=std::max(m,(double)std::abs(y[i]-y2[i])); return m;}());
}
