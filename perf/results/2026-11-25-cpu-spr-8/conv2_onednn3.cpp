// conv2 of the Fashion-MNIST model (64x32x14x14, 64 5x5 filters, pad 2) on oneDNN 3.2, bf16 then fp32, activations in
// NHWC, oneDNN's choice and NCHW: the implementation each direction gets and its time (best of 15, one core).
//   g++ -O2 -march=native -I.venv-onednn/include conv2_onednn3.cpp -o /tmp/conv2_onednn3 -L.venv-onednn/lib -ldnnl \
//       -Wl,-rpath,$PWD/.venv-onednn/lib && OMP_NUM_THREADS=1 taskset -c 1 /tmp/conv2_onednn3
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <unordered_map>
#include <oneapi/dnnl/dnnl.hpp>
using namespace dnnl; using tag=memory::format_tag; using dt=memory::data_type; using clk=std::chrono::steady_clock;
engine eng(engine::kind::cpu,0); stream st(eng);
memory mk(const memory::desc& d){ memory m(d,eng); auto* p=(uint8_t*)m.get_data_handle(); std::fill(p,p+d.get_size(),0x3f); return m;}
double tm(primitive p, std::unordered_map<int,memory> a){double best=1e9; for(int i=0;i<15;++i){auto t=clk::now(); p.execute(st,a); st.wait(); best=std::min(best,std::chrono::duration<double>(clk::now()-t).count());} return best*1e3;}
int main(int argc, char**argv){
  const int N=64, IC=argc>1?atoi(argv[1]):32, OC=64, H=14;
  const double fl = 2.0*N*OC*IC*25*H*H;
  for (dt type : {dt::bf16, dt::f32}) for (tag t : {tag::nhwc, tag::any, tag::nchw}) {
    memory::desc src({N,IC,H,H},type,t), wei({OC,IC,5,5},type,tag::any), dst({N,OC,H,H},type,t);
    primitive_attr attr; attr.set_scratchpad_mode(scratchpad_mode::user);
    auto pd = convolution_forward::primitive_desc(eng, prop_kind::forward_training, algorithm::convolution_direct, src, wei, dst, {1,1},{2,2},{2,2}, attr);
    double f=tm(convolution_forward(pd),{{DNNL_ARG_SRC,mk(pd.src_desc())},{DNNL_ARG_WEIGHTS,mk(pd.weights_desc())},{DNNL_ARG_DST,mk(pd.dst_desc())},{DNNL_ARG_SCRATCHPAD,mk(pd.scratchpad_desc())}});
    auto bpd = convolution_backward_data::primitive_desc(eng, algorithm::convolution_direct, src, wei, dst, {1,1},{2,2},{2,2}, pd, attr);
    double b=tm(convolution_backward_data(bpd),{{DNNL_ARG_DIFF_SRC,mk(bpd.diff_src_desc())},{DNNL_ARG_WEIGHTS,mk(bpd.weights_desc())},{DNNL_ARG_DIFF_DST,mk(bpd.diff_dst_desc())},{DNNL_ARG_SCRATCHPAD,mk(bpd.scratchpad_desc())}});
    memory::desc dw({OC,IC,5,5},dt::f32,tag::any);
    auto wpd = convolution_backward_weights::primitive_desc(eng, algorithm::convolution_direct, src, dw, dst, {1,1},{2,2},{2,2}, pd, attr);
    double w=tm(convolution_backward_weights(wpd),{{DNNL_ARG_SRC,mk(wpd.src_desc())},{DNNL_ARG_DIFF_WEIGHTS,mk(wpd.diff_weights_desc())},{DNNL_ARG_DIFF_DST,mk(wpd.diff_dst_desc())},{DNNL_ARG_SCRATCHPAD,mk(wpd.scratchpad_desc())}});
    printf("%s tag %d: fwd %s %.3f (%.0f) | bwd_data %s %.3f (%.0f) | bwd_w %s %.3f (%.0f)\n", type==dt::bf16?"bf16":"f32", (int)t, pd.impl_info_str(),f,fl/f/1e6,bpd.impl_info_str(),b,fl/b/1e6,wpd.impl_info_str(),w,fl/w/1e6);
  }
}
