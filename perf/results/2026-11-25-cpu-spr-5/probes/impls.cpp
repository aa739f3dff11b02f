// Every oneDNN implementation of a convolution (format any), timed: ./impls IN_CHANNELS SIDE FILTERS KERNEL
//   g++ -O2 -march=native impls.cpp -o impls -ldnnl && OMP_NUM_THREADS=1 taskset -c 1 ./impls 32 14 64 5
// Enumerates oneDNN's implementations for conv2 (64x32x14x14, 5x5, 64 filters, pad 2) and times each (one core).
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <dnnl.hpp>
using namespace dnnl; using tag=memory::format_tag; using clk=std::chrono::steady_clock;
engine eng(engine::kind::cpu,0); stream st(eng);
template<class PD> double run(PD& pd, int a1,int a2,int a3){
  memory m1(pd.query_md(query::exec_arg_md,a1),eng), m2(pd.query_md(query::exec_arg_md,a2),eng), m3(pd.query_md(query::exec_arg_md,a3),eng);
  memory sp(pd.scratchpad_desc(),eng);
  typename PD::primitive_t dummy;
  return 0;
}
int main(int argc,char**argv){
  int N=64,C=atoi(argv[1]),H=atoi(argv[2]),K=atoi(argv[3]),R=atoi(argv[4]),P=R/2;
  memory::desc src({N,C,H,H},memory::data_type::f32,tag::any), wei({K,C,R,R},memory::data_type::f32,tag::any), dst({N,K,H,H},memory::data_type::f32,tag::any);
  auto time=[&](primitive p, std::unordered_map<int,memory> args){double best=1e9; for(int i=0;i<15;++i){auto t=clk::now(); p.execute(st,args); st.wait(); best=std::min(best,std::chrono::duration<double>(clk::now()-t).count());} return best*1e3;};
  auto mk=[&](const memory::desc& d){ memory m(d,eng); float* p=(float*)m.get_data_handle(); for(size_t i=0;i<d.get_size()/4;++i) p[i]=0.01f*(i%7); return m;};
  double flops=2.0*N*K*H*H*C*R*R;
  primitive_attr attr; attr.set_scratchpad_mode(scratchpad_mode::user);
  convolution_forward::desc d(prop_kind::forward_training,algorithm::convolution_direct,src,wei,dst,{1,1},{P,P},{P,P});
  convolution_forward::primitive_desc hint(d,attr,eng);
  for(convolution_forward::primitive_desc pd(d,attr,eng);;){
    auto ms=time(convolution_forward(pd),{{DNNL_ARG_SRC,mk(pd.src_desc())},{DNNL_ARG_WEIGHTS,mk(pd.weights_desc())},{DNNL_ARG_DST,mk(pd.dst_desc())},{DNNL_ARG_SCRATCHPAD,mk(pd.scratchpad_desc())}});
    printf("fwd  %-28s %.3f ms %.0f GF\n",pd.impl_info_str(),ms,flops/ms/1e6);
    if(!pd.next_impl()) break;
  }
  convolution_backward_data::desc bd(algorithm::convolution_direct,src,wei,dst,{1,1},{P,P},{P,P});
  for(convolution_backward_data::primitive_desc pd(bd,attr,eng,hint);;){
    auto ms=time(convolution_backward_data(pd),{{DNNL_ARG_DIFF_SRC,mk(pd.diff_src_desc())},{DNNL_ARG_WEIGHTS,mk(pd.weights_desc())},{DNNL_ARG_DIFF_DST,mk(pd.diff_dst_desc())},{DNNL_ARG_SCRATCHPAD,mk(pd.scratchpad_desc())}});
    printf("bwdd %-28s %.3f ms %.0f GF\n",pd.impl_info_str(),ms,flops/ms/1e6);
    if(!pd.next_impl()) break;
  }
  convolution_backward_weights::desc bw(algorithm::convolution_direct,src,wei,dst,{1,1},{P,P},{P,P});
  for(convolution_backward_weights::primitive_desc pd(bw,attr,eng,hint);;){
    auto ms=time(convolution_backward_weights(pd),{{DNNL_ARG_SRC,mk(pd.src_desc())},{DNNL_ARG_DIFF_WEIGHTS,mk(pd.diff_weights_desc())},{DNNL_ARG_DIFF_DST,mk(pd.diff_dst_desc())},{DNNL_ARG_SCRATCHPAD,mk(pd.scratchpad_desc())}});
    printf("bwdw %-28s %.3f ms %.0f GF\n",pd.impl_info_str(),ms,flops/ms/1e6);
    if(!pd.next_impl()) break;
  }
}
