// The dense weight gradient on oneDNN: dnnl_sgemm with beta 0 and 1, the matmul primitive overwriting and adding.
//   g++ -O2 -march=native dw.cpp -o dw -ldnnl && OMP_NUM_THREADS=1 taskset -c 1 ./dw
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <dnnl.hpp>
using clk=std::chrono::steady_clock;
using namespace dnnl;
int main(){
  engine eng(engine::kind::cpu,0); stream st(eng);
  std::vector<float> dy(64*1024,0.01f),x(64*3136,0.02f),g(1024*3136,0);
  for(int rep=0;rep<3;++rep) for(float beta: {0.f,1.f}){ double best=1e9; for(int it=0;it<30;++it){
      auto t=clk::now(); dnnl_sgemm('T','N',1024,3136,64,1.f,dy.data(),1024,x.data(),3136,beta,g.data(),3136);
      best=std::min(best,std::chrono::duration<double>(clk::now()-t).count());}
    printf("dnnl_sgemm beta=%g %.3f ms\n",beta,best*1e3);}
  // matmul: dW(1024x3136) = dy^T (1024x64, 'ba') * x (64x3136)
  for(int add=0;add<2;++add){
    memory::desc a({1024,64},memory::data_type::f32,memory::format_tag::ba), b({64,3136},memory::data_type::f32,memory::format_tag::ab), c({1024,3136},memory::data_type::f32,memory::format_tag::ab);
    primitive_attr attr; if(add){post_ops po; po.append_sum(1.f); attr.set_post_ops(po);}
    matmul::primitive_desc pd(matmul::desc(a,b,c),attr,eng); matmul mm(pd);
    memory ma(a,eng,dy.data()),mb(b,eng,x.data()),mc(c,eng,g.data());
    printf("impl %s\n", pd.impl_info_str());
    for(int rep=0;rep<3;++rep){double best=1e9; for(int it=0;it<30;++it){auto t=clk::now(); mm.execute(st,{{DNNL_ARG_SRC,ma},{DNNL_ARG_WEIGHTS,mb},{DNNL_ARG_DST,mc}}); st.wait(); best=std::min(best,std::chrono::duration<double>(clk::now()-t).count());}
    printf("matmul add=%d %.3f ms\n",add,best*1e3);}
  }
}
