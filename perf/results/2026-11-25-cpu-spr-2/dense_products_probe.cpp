// The probe behind the dense-products table of ../2026-11-25-cpu-spr-2.md: dnnl::matmul, dnnl_sgemm and OpenBLAS on
// the 3136 -> 1024 layer's three products at batch 64, three interleaved rounds. Not part of the build:
//   g++ -O2 -std=c++20 dense_products_probe.cpp -o probe -ldnnl -lopenblas -I/usr/include/x86_64-linux-gnu/openblas-pthread
//   OMP_NUM_THREADS=1 taskset -c 1 ./probe
#include <dnnl.hpp>
#include <cblas.h>
#include <chrono>
#include <cstdio>
#include <vector>
using namespace dnnl; using tag = memory::format_tag;
template <class F> double ms(F f) {
  for (int i = 0; i < 3; ++i) f();
  auto t0 = std::chrono::steady_clock::now(); int n = 0;
  do { f(); ++n; } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 0.5);
  return 1e3*std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
}
int main() {
  openblas_set_num_threads(1);
  engine eng(engine::kind::cpu, 0); stream s(eng); auto f32 = memory::data_type::f32;
  std::vector<float> x(64*3136, 0.01f), w(1024*3136, 0.02f), y(64*1024, 0.f), dx(64*3136), dw(1024*3136, 0.f);
  matmul::primitive_desc fpd({memory::desc({64,3136},f32,tag::ab), memory::desc({3136,1024},f32,tag::ba), memory::desc({64,1024},f32,tag::ab)}, eng);
  matmul::primitive_desc bpd({memory::desc({64,1024},f32,tag::ab), memory::desc({1024,3136},f32,tag::ab), memory::desc({64,3136},f32,tag::ab)}, eng);
  matmul fm(fpd), bm(bpd);
  memory X(fpd.src_desc(), eng, x.data()), W(fpd.weights_desc(), eng, w.data()), Y(fpd.dst_desc(), eng, y.data());
  memory DY(bpd.src_desc(), eng, y.data()), WB(bpd.weights_desc(), eng, w.data()), DX(bpd.dst_desc(), eng, dx.data());
  for (int rep = 0; rep < 3; ++rep) {
    double a = ms([&]{ fm.execute(s, {{DNNL_ARG_SRC,X},{DNNL_ARG_WEIGHTS,W},{DNNL_ARG_DST,Y}}); s.wait(); });
    double b = ms([&]{ dnnl_sgemm('N','T',64,1024,3136,1.f,x.data(),3136,w.data(),3136,0.f,y.data(),1024); });
    double c = ms([&]{ cblas_sgemm(CblasRowMajor,CblasNoTrans,CblasTrans,64,1024,3136,1.f,x.data(),3136,w.data(),3136,0.f,y.data(),1024); });
    double d = ms([&]{ bm.execute(s, {{DNNL_ARG_SRC,DY},{DNNL_ARG_WEIGHTS,WB},{DNNL_ARG_DST,DX}}); s.wait(); });
    double e = ms([&]{ dnnl_sgemm('N','N',64,3136,1024,1.f,y.data(),1024,w.data(),3136,0.f,dx.data(),3136); });
    double f = ms([&]{ cblas_sgemm(CblasRowMajor,CblasNoTrans,CblasNoTrans,64,3136,1024,1.f,y.data(),1024,w.data(),3136,0.f,dx.data(),3136); });
    double g = ms([&]{ dnnl_sgemm('T','N',1024,3136,64,1.f,y.data(),1024,x.data(),3136,1.f,dw.data(),3136); });
    double h = ms([&]{ cblas_sgemm(CblasRowMajor,CblasTrans,CblasNoTrans,1024,3136,64,1.f,y.data(),1024,x.data(),3136,1.f,dw.data(),3136); });
    std::printf("fwd: matmul %.3f dnnl_sgemm %.3f openblas %.3f | bwd_data: matmul %.3f dnnl_sgemm %.3f openblas %.3f | bwd_w: dnnl_sgemm %.3f openblas %.3f\n", a,b,c,d,e,f,g,h);
  }
}
