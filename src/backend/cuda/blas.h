// Owns the backend's cuBLAS handle and the GEMM entry points the dense layer and attention need, in the same row-major
// convention as kernels/cpu/gemm.h (cuBLAS itself is column-major): fp32, and 16-bit operands for mixed precision.
// cublas_v2.h stays inside blas.cpp.
#pragma once
#include <cstddef>
#include <memory>

#include "backend/cuda/math_mode.h"
#include "kernels/cuda/stream.h"
#include "kernels/element_type.h"

namespace ringtrain::backend {

enum class Transpose { no, yes };

// `count` products, each operand and result `stride_*` elements on from the previous product's.
struct GemmBatch {
  int count = 1;
  long long stride_a = 0, stride_b = 0, stride_c = 0;
};

class Blas {
 public:
  Blas(kernels::cuda::Stream stream, MathMode math);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  // Every later call's scratch is `bytes` at `device` instead of what cuBLAS would find for itself: under
  // gpu.cuda_graphs a captured GEMM must not have cuBLAS allocate, which a capture cannot hold.
  void use_workspace(void* device, std::size_t bytes);

  // Row-major C = alpha * op(A) * op(B) + beta * C; op(A) is M x K, op(B) is K x N; fp32 storage, arithmetic
  // as the MathMode says.
  void sgemm(Transpose ta, Transpose tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
             int ldb, float beta, float* c, int ldc);
  // The same with A and B in `operands` (bf16 or fp16) and C in `result` (that type, or fp32): tensor cores,
  // fp32 accumulation (cublasGemmEx with CUBLAS_COMPUTE_32F).
  void gemm(Transpose ta, Transpose tb, int m, int n, int k, float alpha, kernels::ElementType operands, const void* a,
            int lda, const void* b, int ldb, float beta, kernels::ElementType result, void* c, int ldc);
  // gemm over a batch of products in one call (cublasGemmStridedBatchedEx); `operands` may be fp32 too, whose
  // arithmetic then follows the MathMode as sgemm's.
  void gemm_batched(Transpose ta, Transpose tb, int m, int n, int k, float alpha, kernels::ElementType operands,
                    const void* a, int lda, const void* b, int ldb, float beta, kernels::ElementType result, void* c,
                    int ldc, const GemmBatch& batch);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringtrain::backend
