// The dense layer's three products and a 1024^3 SGEMM through the Fortran sgemm_ of whichever BLAS it is linked with.
//   g++ -O2 -march=native gemm.cpp -o gemm_openblas -lopenblas
//   g++ -O2 -march=native gemm.cpp -o gemm_blis /usr/lib/x86_64-linux-gnu/libblis.so.4   (apt-get install libblis-dev)
//   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 BLIS_NUM_THREADS=1 taskset -c 1 ./gemm_openblas (or ./gemm_blis)
// Times the dense layer's three products (batch 64, 3136 -> 1024) and a 1024^3 SGEMM on one library, passed as argv[1].
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <functional>
#include <cstring>
extern "C" void sgemm_(const char*,const char*,const int*,const int*,const int*,const float*,const float*,const int*,const float*,const int*,const float*,float*,const int*);
using clk=std::chrono::steady_clock;
// row-major C(m x n) = op(A) op(B) via column-major sgemm on the transposes
void rm(bool ta,bool tb,int m,int n,int k,const float*a,int lda,const float*b,int ldb,float beta,float*c,int ldc){
  float one=1; const char TA=ta?'T':'N', TB=tb?'T':'N';
  sgemm_(&TB,&TA,&n,&m,&k,&one,b,&ldb,a,&lda,&beta,c,&ldc);
}
double t(std::function<void()> f){ f(); double best=1e9; for(int i=0;i<25;++i){auto s=clk::now(); f(); best=std::min(best,std::chrono::duration<double>(clk::now()-s).count());} return best;}
int main(){
  const int B=64,I=3136,O=1024; std::vector<float> x(B*I,0.01f),w(O*I,0.02f),y(B*O),dy(B*O,0.01f),dx(B*I),dw(O*I);
  double f=2.0*B*I*O;
  double a=t([&]{rm(false,true,B,O,I,x.data(),I,w.data(),I,0,y.data(),O);});
  double a2=t([&]{rm(false,true,O,B,I,w.data(),I,x.data(),I,0,y.data(),B);}); // y^T = W x^T
  double b=t([&]{rm(false,false,B,I,O,dy.data(),O,w.data(),I,0,dx.data(),I);});
  double c=t([&]{rm(true,false,O,I,B,dy.data(),O,x.data(),I,1,dw.data(),I);});
  double c0=t([&]{rm(true,false,O,I,B,dy.data(),O,x.data(),I,0,dw.data(),I);});
  printf("fwd %.3f ms (%.0f GF)  fwdT %.3f (%.0f)  dx %.3f (%.0f)  dW+= %.3f (%.0f)  dW= %.3f (%.0f)\n",a*1e3,f/a/1e9,a2*1e3,f/a2/1e9,b*1e3,f/b/1e9,c*1e3,f/c/1e9,c0*1e3,f/c0/1e9);
  const int N=1024; std::vector<float> p(N*N,1),q(N*N,1),r(N*N);
  double g=t([&]{rm(false,false,N,N,N,p.data(),N,q.data(),N,0,r.data(),N);}); printf("1024^3 %.0f GF\n",2.0*N*N*N/g/1e9);
}
