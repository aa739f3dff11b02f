// Owns the entry points to the tuned BLAS (OpenBLAS; oneDNN's SGEMM inside thread runs) and the compute thread
// count, so every caller gets the same row-major convention and the thread policy lives in one place.
#pragma once

namespace ringtrain::kernels::cpu {

enum class Transpose { no, yes };

// Row-major C = alpha * op(A) * op(B) + beta * C, op(A) is M x K, op(B) is K x N.
void sgemm(Transpose ta, Transpose tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
           int ldb, float beta, float* c, int ldc);

// The same product on the calling thread alone, for kernels that share their work among the compute threads
// themselves (thread_runs.h) and multiply inside each thread's share. oneDNN's SGEMM, which runs single-threaded in
// an OpenMP region: OpenBLAS's pthreads build is not made to be entered from several threads at once.
void sgemm_on_calling_thread(Transpose ta, Transpose tb, int m, int n, int k, float alpha, const float* a, int lda,
                             const float* b, int ldb, float beta, float* c, int ldc);

void set_compute_threads(int threads);  // BLAS threads for this process
int compute_threads();
const char* blas_description();         // e.g. "OpenBLAS 0.3.21 (Haswell, pthreads)"

}  // namespace ringtrain::kernels::cpu
