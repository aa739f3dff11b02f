// conv2 (64x32x14x14, 5x5, 64 filters) in bf16 with src/dst layouts forced (any, nChw16c, nhwc, nchw), one core:
// which oneDNN 2.6.3 implementation each gets, and its time (best of 15). g++ -O2 -march=native ... -ldnnl
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <dnnl.hpp>
using namespace dnnl; using tag=memory::format_tag; using dt=memory::data_type; using clk=std::chrono::steady_clock;
engine eng(engine::kind::cpu,0); stream st(eng);
memory mk(const memory::desc& d){ memory m(d,eng); auto* p=(uint8_t*)m.get_data_handle(); std::fill(p,p+d.get_size(),0x3f); return m;}
double tm(primitive p, std::unordered_map<int,memory> a){double best=1e9; for(int i=0;i<15;++i){auto t=clk::now(); p.execute(st,a); st.wait(); best=std::min(best,std::chrono::duration<double>(clk::now()-t).count());} return best*1e3;}
int main(){
  for (tag t : {tag::any, tag::nChw16c, tag::nhwc, tag::nchw}) {
    memory::desc src({64,32,14,14},dt::bf16,t), wei({64,32,5,5},dt::bf16,tag::any), dst({64,64,14,14},dt::bf16,t);
    primitive_attr attr; attr.set_scratchpad_mode(scratchpad_mode::user);
    convolution_forward::desc d(prop_kind::forward_training,algorithm::convolution_direct,src,wei,dst,{1,1},{2,2},{2,2});
    convolution_forward::primitive_desc pd(d,attr,eng);
    double f=tm(convolution_forward(pd),{{DNNL_ARG_SRC,mk(pd.src_desc())},{DNNL_ARG_WEIGHTS,mk(pd.weights_desc())},{DNNL_ARG_DST,mk(pd.dst_desc())},{DNNL_ARG_SCRATCHPAD,mk(pd.scratchpad_desc())}});
    convolution_backward_data::desc bd(algorithm::convolution_direct,src,wei,dst,{1,1},{2,2},{2,2});
    convolution_backward_data::primitive_desc bpd(bd,attr,eng,pd);
    double b=tm(convolution_backward_data(bpd),{{DNNL_ARG_DIFF_SRC,mk(bpd.diff_src_desc())},{DNNL_ARG_WEIGHTS,mk(bpd.weights_desc())},{DNNL_ARG_DIFF_DST,mk(bpd.diff_dst_desc())},{DNNL_ARG_SCRATCHPAD,mk(bpd.scratchpad_desc())}});
    memory::desc dw({64,32,5,5},dt::f32,tag::any);
    convolution_backward_weights::desc wd(algorithm::convolution_direct,src,dw,dst,{1,1},{2,2},{2,2});
    convolution_backward_weights::primitive_desc wpd(wd,attr,eng,pd);
    double w=tm(convolution_backward_weights(wpd),{{DNNL_ARG_SRC,mk(wpd.src_desc())},{DNNL_ARG_DIFF_WEIGHTS,mk(wpd.diff_weights_desc())},{DNNL_ARG_DIFF_DST,mk(wpd.diff_dst_desc())},{DNNL_ARG_SCRATCHPAD,mk(wpd.scratchpad_desc())}});
    printf("tag %d: fwd %s %.3f | bwd_data %s %.3f | bwd_w %s %.3f\n",(int)t,pd.impl_info_str(),f,bpd.impl_info_str(),b,wpd.impl_info_str(),w);
  }
}
