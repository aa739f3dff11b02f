// conv2's bf16 filter gradient on Debian's oneDNN 2.6.3: fp32 or bf16 diff weights, activations NHWC / oneDNN's
// choice / nChw16c; best of 15, one core.
//   g++ -O2 -march=native conv2_bf16_filter_gradient_onednn26.cpp -o /tmp/bwdw26 -ldnnl && \
//       OMP_NUM_THREADS=1 taskset -c 1 /tmp/bwdw26 64
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <unordered_map>
#include <dnnl.hpp>
using namespace dnnl; using tag=memory::format_tag; using dt=memory::data_type; using clk=std::chrono::steady_clock;
engine eng(engine::kind::cpu,0); stream st(eng);
memory mk(const memory::desc& d){ memory m(d,eng); auto* p=(uint8_t*)m.get_data_handle(); std::fill(p,p+d.get_size(),0x3f); return m;}
double tm(primitive p, std::unordered_map<int,memory> a){double best=1e9; for(int i=0;i<15;++i){auto t=clk::now(); p.execute(st,a); st.wait(); best=std::min(best,std::chrono::duration<double>(clk::now()-t).count());} return best*1e3;}
int main(int argc, char**argv){
  const int N=argc>1?atoi(argv[1]):64, IC=32, OC=64, H=14;
  for (tag t : {tag::nhwc, tag::any, tag::nChw16c}) for (dt wt : {dt::f32, dt::bf16}) for (bool bias : {false}) {
    memory::desc src({N,IC,H,H},dt::bf16,t), wei({OC,IC,5,5},dt::bf16,tag::any), dst({N,OC,H,H},dt::bf16,t);
    primitive_attr attr; attr.set_scratchpad_mode(scratchpad_mode::user);
    convolution_forward::desc d(prop_kind::forward_training,algorithm::convolution_direct,src,wei,dst,{1,1},{2,2},{2,2});
    convolution_forward::primitive_desc pd(d,attr,eng);
    memory::desc dw({OC,IC,5,5},wt,tag::any);
    try {
    convolution_backward_weights::desc wd(algorithm::convolution_direct,src,dw,dst,{1,1},{2,2},{2,2});
    convolution_backward_weights::primitive_desc wpd(wd,attr,eng,pd);
    double w=tm(convolution_backward_weights(wpd),{{DNNL_ARG_SRC,mk(wpd.src_desc())},{DNNL_ARG_DIFF_WEIGHTS,mk(wpd.diff_weights_desc())},{DNNL_ARG_DIFF_DST,mk(wpd.diff_dst_desc())},{DNNL_ARG_SCRATCHPAD,mk(wpd.scratchpad_desc())}});
    printf("N %d tag %d wei %s: bwd_w %s %.3f ms (%.0f GFLOP/s)\n",N,(int)t,wt==dt::f32?"f32":"bf16",wpd.impl_info_str(),w, 2.0*N*OC*IC*25*H*H/w/1e6);
    } catch (dnnl::error& e) { printf("tag %d: %s\n",(int)t,e.what()); }
  }
}
