// conv1 (64 x 1 x 28 x 28, 5x5, 32 filters) on oneDNN with NCHW source and destination: implementation and time.
//   g++ -O2 -march=native conv1.cpp -o conv1 -ldnnl && OMP_NUM_THREADS=1 taskset -c 1 ./conv1
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <dnnl.hpp>
using namespace dnnl; using tag=memory::format_tag; using clk=std::chrono::steady_clock;
int main(){
  engine eng(engine::kind::cpu,0); stream st(eng);
  memory::desc src({64,1,28,28},memory::data_type::f32,tag::nchw), wei({32,1,5,5},memory::data_type::f32,tag::oihw), dst({64,32,28,28},memory::data_type::f32,tag::nchw);
  convolution_forward::desc d(prop_kind::forward_training,algorithm::convolution_direct,src,wei,dst,{1,1},{2,2},{2,2});
  convolution_forward::primitive_desc pd(d,eng); printf("fwd impl %s\n",pd.impl_info_str());
  std::vector<float> x(64*784,0.5f),w(800,0.1f),y(64*32*784),dy(64*32*784,0.01f),dw(800);
  memory mx(src,eng,x.data()),mw(wei,eng,w.data()),my(dst,eng,y.data());
  convolution_forward f(pd);
  auto time=[&](auto fn){double best=1e9; for(int i=0;i<30;++i){auto t=clk::now(); fn(); st.wait(); best=std::min(best,std::chrono::duration<double>(clk::now()-t).count());} return best*1e3;};
  printf("fwd %.3f ms\n", time([&]{f.execute(st,{{DNNL_ARG_SRC,mx},{DNNL_ARG_WEIGHTS,mw},{DNNL_ARG_DST,my}});}));
  convolution_backward_weights::desc bd(algorithm::convolution_direct,src,wei,dst,{1,1},{2,2},{2,2});
  convolution_backward_weights::primitive_desc bpd(bd,eng,pd); printf("bwdw impl %s\n",bpd.impl_info_str());
  memory mdy(dst,eng,dy.data()),mdw(wei,eng,dw.data());
  convolution_backward_weights b(bpd);
  std::vector<char> sp(bpd.scratchpad_desc().get_size());
  printf("bwdw %.3f ms\n", time([&]{b.execute(st,{{DNNL_ARG_SRC,mx},{DNNL_ARG_DIFF_DST,mdy},{DNNL_ARG_DIFF_WEIGHTS,mdw}});}));
}
