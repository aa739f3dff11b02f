// The fused SGD update over the model's 3.27 M parameters with and without zeroing the gradient, and OpenBLAS's
// dense weight gradient (1024 x 3136, K = 64) with beta 0 and 1; best of 30, one core.
//   g++ -O2 -march=native sgd.cpp -o sgd -lopenblas && OPENBLAS_NUM_THREADS=1 taskset -c 1 ./sgd
#include <chrono>
#include <cstdio>
#include <vector>
#include <cblas.h>
#include <algorithm>
using clk=std::chrono::steady_clock;
__attribute__((noinline)) void upd(long n,float lr,float mom,float wd,float*__restrict g,float*__restrict v,float*__restrict p,bool zero){
  if(zero) for(long i=0;i<n;++i){float gi=g[i]+wd*p[i];float vi=mom*v[i]+gi;v[i]=vi;p[i]-=lr*vi;g[i]=0;}
  else for(long i=0;i<n;++i){float gi=g[i]+wd*p[i];float vi=mom*v[i]+gi;v[i]=vi;p[i]-=lr*vi;}
}
int main(){
  long n=3274730; std::vector<float> g(n,1e-3f),v(n,0),p(n,0.01f);
  std::vector<float> dy(64*1024,0.01f),x(64*3136,0.02f);
  for(int rep=0;rep<3;++rep) for(int z=0;z<2;++z){
    double best=1e9; for(int it=0;it<30;++it){ std::fill(g.begin(),g.end(),1e-3f);
      auto t=clk::now(); upd(n,0.01f,0.9f,5e-4f,g.data(),v.data(),p.data(),z); best=std::min(best,std::chrono::duration<double>(clk::now()-t).count());}
    printf("sgd zero=%d %.3f ms\n",z,best*1e3);
  }
  for(int rep=0;rep<3;++rep) for(float beta: {0.f,1.f}){ double best=1e9; for(int it=0;it<30;++it){
      auto t=clk::now(); cblas_sgemm(CblasRowMajor,CblasTrans,CblasNoTrans,1024,3136,64,1.f,dy.data(),1024,x.data(),3136,beta,g.data(),3136);
      best=std::min(best,std::chrono::duration<double>(clk::now()-t).count());}
    printf("dW gemm beta=%g %.3f ms\n",beta,best*1e3);}
}
