// conv2's bf16 filter gradient as im2col (NHWC x, rows of (kh, kw, ic)) + oneDNN 2.6.3's AMX matmul, CHUNK images per
// product (the alternative tried before changing oneDNN builds); best of 15, one core.
//   g++ -O3 -march=native conv2_bf16_filter_gradient_im2col.cpp -o /tmp/bwdw_gemm -ldnnl && \
//       for c in 1 2 4 8 16; do OMP_NUM_THREADS=1 taskset -c 1 /tmp/bwdw_gemm $c; done
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
#include <algorithm>
#include <unordered_map>
#include <dnnl.hpp>
using namespace dnnl; using tag=memory::format_tag; using dt=memory::data_type; using clk=std::chrono::steady_clock;
engine eng(engine::kind::cpu,0); stream st(eng);
int main(int argc, char** argv){
  const int N=64, IC=32, OC=64, H=14, W=14, R=5, pad=2, HW=H*W, KK=R*R*IC;
  const int chunk = argc>1?atoi(argv[1]):4;
  std::vector<uint16_t> x(size_t(N)*HW*IC, 0x3f80), dy(size_t(N)*HW*OC, 0x3f80), col(size_t(chunk)*HW*KK);
  std::vector<float> dw(size_t(OC)*KK);
  const int K = chunk*HW;
  memory::desc a({OC,K},dt::bf16,tag::ba), b({K,KK},dt::bf16,tag::ab), c({OC,KK},dt::f32,tag::ab);
  primitive_attr attr; post_ops po; po.append_sum(1.0f); attr.set_post_ops(po); attr.set_scratchpad_mode(scratchpad_mode::user);
  matmul::primitive_desc pd(matmul::desc(a,b,c),attr,eng);
  matmul mm(pd);
  memory scratch(pd.scratchpad_desc(),eng);
  memory am(a,eng,nullptr), bm(b,eng,col.data()), cm(c,eng,dw.data());
  printf("impl %s\n", pd.impl_info_str());
  auto im2col = [&](int n0){
    for (int i=0;i<chunk;++i){ const uint16_t* xi = x.data()+size_t(n0+i)*HW*IC; uint16_t* ci = col.data()+size_t(i)*HW*KK;
      for (int oh=0;oh<H;++oh) for (int ow=0;ow<W;++ow){ uint16_t* row = ci + size_t(oh*W+ow)*KK;
        for (int kh=0;kh<R;++kh){ const int ih=oh+kh-pad; for (int kw=0;kw<R;++kw){ const int iw=ow+kw-pad; uint16_t* d=row+(kh*R+kw)*IC;
          if (ih<0||ih>=H||iw<0||iw>=W) std::memset(d,0,IC*2); else std::memcpy(d, xi+size_t(ih*W+iw)*IC, IC*2);}}}}
  };
  double best=1e9, best_i=1e9;
  for (int rep=0; rep<15; ++rep){
    auto t0=clk::now(); double ti=0;
    for (int n0=0;n0<N;n0+=chunk){ auto s=clk::now(); im2col(n0); ti+=std::chrono::duration<double>(clk::now()-s).count();
      am.set_data_handle(dy.data()+size_t(n0)*HW*OC);
      mm.execute(st,{{DNNL_ARG_SRC,am},{DNNL_ARG_WEIGHTS,bm},{DNNL_ARG_DST,cm},{DNNL_ARG_SCRATCHPAD,scratch}}); }
    st.wait();
    best=std::min(best,std::chrono::duration<double>(clk::now()-t0).count()); best_i=std::min(best_i,ti);
  }
  printf("chunk %d: total %.3f ms (im2col %.3f) %.0f GFLOP/s\n", chunk, best*1e3, best_i*1e3, 2.0*N*OC*KK*HW/best/1e9);
}
