// Owns the cuBLAS handle and the row-major to column-major translation of GEMM.
#include "backend/cuda/blas.h"

#include <cublas_v2.h>

#include "backend/cuda/unique_handle.h"
#include "kernels/cuda/cuda_check.h"

namespace ringtrain::backend {
namespace {

void destroy_handle(cublasHandle_t h) { (void)cublasDestroy(h); }
using CublasHandle = UniqueHandle<cublasHandle_t, destroy_handle>;

cublasOperation_t op(Transpose t) { return t == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N; }

cudaDataType_t cuda_type(kernels::ElementType t) {
  switch (t) {
    case kernels::ElementType::bf16: return CUDA_R_16BF;
    case kernels::ElementType::f16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

}  // namespace

struct Blas::Impl {
  CublasHandle handle;
};

Blas::Blas(kernels::cuda::Stream stream, MathMode math) : impl_(std::make_unique<Impl>()) {
  cublasHandle_t h = nullptr;
  CUBLAS_CHECK(cublasCreate(&h));
  impl_->handle = CublasHandle(h);
  CUBLAS_CHECK(cublasSetStream(h, stream));
  // cuBLAS's default math never uses TF32 for sgemm unless asked; say which explicitly.
  CUBLAS_CHECK(cublasSetMathMode(h, math == MathMode::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}

Blas::~Blas() = default;

void Blas::use_workspace(void* device, std::size_t bytes) {
  CUBLAS_CHECK(cublasSetWorkspace(impl_->handle, device, bytes));
}

void Blas::sgemm(Transpose ta, Transpose tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                 int ldb, float beta, float* c, int ldc) {
  // A row-major M x N matrix is the column-major N x M matrix with the same memory, so row-major
  // C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands and the sizes M and N.
  CUBLAS_CHECK(cublasSgemm(impl_->handle, op(tb), op(ta), n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
}

void Blas::gemm(Transpose ta, Transpose tb, int m, int n, int k, float alpha, kernels::ElementType operands,
                const void* a, int lda, const void* b, int ldb, float beta, kernels::ElementType result, void* c,
                int ldc) {
  // Operands swapped as in sgemm.
  CUBLAS_CHECK(cublasGemmEx(impl_->handle, op(tb), op(ta), n, m, k, &alpha, b, cuda_type(operands), ldb, a,
                            cuda_type(operands), lda, &beta, c, cuda_type(result), ldc, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
}

void Blas::gemm_batched(Transpose ta, Transpose tb, int m, int n, int k, float alpha, kernels::ElementType operands,
                        const void* a, int lda, const void* b, int ldb, float beta, kernels::ElementType result,
                        void* c, int ldc, const GemmBatch& batch) {
  // Operands swapped as in sgemm.
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(impl_->handle, op(tb), op(ta), n, m, k, &alpha, b, cuda_type(operands), ldb,
                                          batch.stride_b, a, cuda_type(operands), lda, batch.stride_a, &beta, c,
                                          cuda_type(result), ldc, batch.stride_c, batch.count, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
}

}  // namespace ringtrain::backend
