// Owns the entry points to the tuned BLAS (OpenBLAS) and the compute thread
// count, so every caller gets the same row-major convention and the thread policy lives in one place.
#pragma once

namespace ringtrain::kernels::cpu {

enum class Transpose { no, yes };

// Row-major C = alpha * op(A) * op(B) + beta * C, op(A) is M x K, op(B) is K x N.
void sgemm(Transpose ta, Transpose tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
           int ldb, float beta, float* c, int ldc);

void set_compute_threads(int threads);  // BLAS threads for this process
int compute_threads();
const char* blas_description();         // e.g. "OpenBLAS 0.3.21 (Haswell, pthreads)"

}  // namespace ringtrain::kernels::cpu
