// The dense layer's three fp32 products (batch 64, 3136 -> 1024) on oneDNN 3.2's matmul primitive (plain layouts,
// transposes as strides), its dnnl_sgemm, and OpenBLAS; best of 40, one core.
//   g++ -O2 -march=native -I.venv-onednn/include dense_products_onednn3.cpp -o /tmp/dense3 -L.venv-onednn/lib \
//       -ldnnl -lopenblas -Wl,-rpath,$PWD/.venv-onednn/lib && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c 1 /tmp/dense3
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <functional>
#include <unordered_map>
#include <oneapi/dnnl/dnnl.hpp>
extern "C" void sgemm_(const char*,const char*,const int*,const int*,const int*,const float*,const float*,const int*,const float*,const int*,const float*,float*,const int*);
using namespace dnnl; using tag=memory::format_tag; using dt=memory::data_type; using clk=std::chrono::steady_clock;
engine eng(engine::kind::cpu,0); stream st(eng);
double t(std::function<void()> f){ f(); double best=1e9; for(int i=0;i<40;++i){auto s=clk::now(); f(); best=std::min(best,std::chrono::duration<double>(clk::now()-s).count());} return best*1e3;}
void rm(bool ta,bool tb,int m,int n,int k,const float*a,int lda,const float*b,int ldb,float beta,float*c,int ldc){
  float one=1; const char TA=ta?'T':'N', TB=tb?'T':'N'; sgemm_(&TB,&TA,&n,&m,&k,&one,b,&ldb,a,&lda,&beta,c,&ldc);}
// c (m x n) (+)= a (m x k, layout ta) b (k x n, layout tb)
double mm(int m,int n,int k,tag ta,tag tb,float* a,float* b,float* c,bool sum,const char** impl){
  memory::desc ad({m,k},dt::f32,ta), bd({k,n},dt::f32,tb), cd({m,n},dt::f32,tag::ab);
  primitive_attr attr; attr.set_scratchpad_mode(scratchpad_mode::user);
  if (sum){ post_ops po; po.append_sum(1.0f); attr.set_post_ops(po);}
  matmul::primitive_desc pd(eng,ad,bd,cd,attr); matmul p(pd); *impl=pd.impl_info_str();
  memory am(ad,eng,a), bm(bd,eng,b), cm(cd,eng,c), sm(pd.scratchpad_desc(),eng);
  return t([&]{p.execute(st,{{DNNL_ARG_SRC,am},{DNNL_ARG_WEIGHTS,bm},{DNNL_ARG_DST,cm},{DNNL_ARG_SCRATCHPAD,sm}}); st.wait();});
}
int main(){
  const int B=64,I=3136,O=1024; std::vector<float> x(B*I,0.01f),w(O*I,0.02f),y(B*O),yt(B*O),dy(B*O,0.01f),dx(B*I),dxt(B*I),dw(O*I);
  const double f=2.0*B*I*O; const char* impl;
  double a=mm(B,O,I,tag::ab,tag::ba,x.data(),w.data(),y.data(),false,&impl); printf("fwd y=xW^T matmul %.3f ms %.0f GF %s\n",a,f/a/1e6,impl);
  a=mm(O,B,I,tag::ab,tag::ba,w.data(),x.data(),yt.data(),false,&impl); printf("fwd y^T=Wx^T matmul %.3f ms %.0f GF %s\n",a,f/a/1e6,impl);
  a=mm(B,I,O,tag::ab,tag::ab,dy.data(),w.data(),dx.data(),false,&impl); printf("dx=dyW matmul %.3f ms %.0f GF %s\n",a,f/a/1e6,impl);
  a=t([&]{dnnl::sgemm('N','N',B,I,O,1.f,dy.data(),O,w.data(),I,0.f,dx.data(),I);}); printf("dx dnnl_sgemm %.3f ms %.0f GF\n",a,f/a/1e6);
  a=mm(O,I,B,tag::ba,tag::ab,dy.data(),x.data(),dw.data(),true,&impl); printf("dW+=dy^Tx matmul %.3f ms %.0f GF %s\n",a,f/a/1e6,impl);
  a=t([&]{rm(true,false,O,I,B,dy.data(),O,x.data(),I,1,dw.data(),I);}); printf("dW+= openblas %.3f ms %.0f GF\n",a,f/a/1e6);
  a=t([&]{dnnl::sgemm('T','N',O,I,B,1.f,dy.data(),O,x.data(),I,1.f,dw.data(),I);}); printf("dW+= dnnl_sgemm %.3f ms %.0f GF\n",a,f/a/1e6);
}
