// The Fashion-MNIST dense layer's two gradient products (batch 64, 3136 -> 1024) in each form and library: dx = dy W
// and its transpose dx^T = W^T dy^T on OpenBLAS and oneDNN's SGEMM, dW += dy^T x on both (best of 40, warm caches).
//   g++ -O2 -march=native dense_products.cpp -o /tmp/dense_products -lopenblas -ldnnl
//   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c 1 /tmp/dense_products
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <functional>
#include <dnnl.h>
extern "C" void sgemm_(const char*,const char*,const int*,const int*,const int*,const float*,const float*,const int*,const float*,const int*,const float*,float*,const int*);
using clk=std::chrono::steady_clock;
void rm(bool ta,bool tb,int m,int n,int k,const float*a,int lda,const float*b,int ldb,float beta,float*c,int ldc){
  float one=1; const char TA=ta?'T':'N', TB=tb?'T':'N';
  sgemm_(&TB,&TA,&n,&m,&k,&one,b,&ldb,a,&lda,&beta,c,&ldc);
}
double t(std::function<void()> f){ f(); double best=1e9; for(int i=0;i<40;++i){auto s=clk::now(); f(); best=std::min(best,std::chrono::duration<double>(clk::now()-s).count());} return best;}
int main(){
  const int B=64,I=3136,O=1024; std::vector<float> x(B*I,0.01f),w(O*I,0.02f),dy(B*O,0.01f),dx(B*I),dxt(B*I),dw(O*I);
  double f=2.0*B*I*O;
  double b=t([&]{rm(false,false,B,I,O,dy.data(),O,w.data(),I,0,dx.data(),I);});
  double bt=t([&]{rm(true,true,I,B,O,w.data(),I,dy.data(),O,0,dxt.data(),B);});
  double d=t([&]{dnnl_sgemm('N','N',B,I,O,1.f,dy.data(),O,w.data(),I,0.f,dx.data(),I);});
  double dt=t([&]{dnnl_sgemm('T','T',I,B,O,1.f,w.data(),I,dy.data(),O,0.f,dxt.data(),B);});
  double cw=t([&]{rm(true,false,O,I,B,dy.data(),O,x.data(),I,1,dw.data(),I);});
  double dw1=t([&]{dnnl_sgemm('T','N',O,I,B,1.f,dy.data(),O,x.data(),I,1.f,dw.data(),I);});
  double dw1t=t([&]{dnnl_sgemm('T','N',I,O,B,1.f,x.data(),I,dy.data(),O,1.f,dw.data(),O);}); // wrong layout, rate only
  printf("dx openblas %.3f (%.0f GF) dxT openblas %.3f (%.0f) dx dnnl %.3f (%.0f) dxT dnnl %.3f (%.0f)\n",b*1e3,f/b/1e9,bt*1e3,f/bt/1e9,d*1e3,f/d/1e9,dt*1e3,f/dt/1e9);
  printf("dW+= openblas %.3f (%.0f) dnnl %.3f (%.0f) dnnl-transposed-form %.3f (%.0f)\n",cw*1e3,f/cw/1e9,dw1*1e3,f/dw1/1e9,dw1t*1e3,f/dw1t/1e9);
}
