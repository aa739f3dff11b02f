// The machine's SGEMM rate on ViT-S/16's MLP shapes (2026-11-29-vit-cpu.md): OpenBLAS (argv[4] = 0) or oneDNN's
// SGEMM (1), row-major m x n x k, 2 threads, 50 timed calls after 5. Built with
//   g++ -O2 -fopenmp gemm_rate.cpp -I.venv-onednn/include -L.venv-onednn/lib -Wl,-rpath,.venv-onednn/lib -lopenblas -ldnnl
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <chrono>
#include <cstdio>
#include <vector>
#include <cstdlib>
int main(int argc, char** argv) {
  int m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]); int which = atoi(argv[4]);
  std::vector<float> a(size_t(m)*k, 0.5f), b(size_t(k)*n, 0.25f), c(size_t(m)*n);
  openblas_set_num_threads(2);
  auto run = [&]{ if (which==0) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m,n,k,1.f,a.data(),k,b.data(),n,0.f,c.data(),n);
                  else dnnl_sgemm('N','N',m,n,k,1.f,a.data(),k,b.data(),n,0.f,c.data(),n); };
  for (int i=0;i<5;i++) run();
  int reps = 50; auto t0 = std::chrono::steady_clock::now();
  for (int i=0;i<reps;i++) run();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now()-t0).count()/reps;
  printf("%s %dx%dx%d: %.1f GFLOP/s\n", which?"dnnl":"openblas", m,n,k, 2.0*m*n*k/s/1e9);
}
