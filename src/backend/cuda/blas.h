// Owns the backend's cuBLAS handle and the one GEMM entry point the dense layer needs, in the same row-major
// convention as kernels/cpu/gemm.h (cuBLAS itself is column-major). cublas_v2.h stays inside blas.cpp.
#pragma once
#include <memory>

#include "backend/cuda/math_mode.h"
#include "kernels/cuda/stream.h"

namespace ringtrain::backend {

enum class Transpose { no, yes };

class Blas {
 public:
  Blas(kernels::cuda::Stream stream, MathMode math);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // Row-major C = alpha * op(A) * op(B) + beta * C; op(A) is M x K, op(B) is K x N; fp32 storage, arithmetic
  // as the MathMode says.
  void sgemm(Transpose ta, Transpose tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
             int ldb, float beta, float* c, int ldc);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringtrain::backend
