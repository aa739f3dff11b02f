// Owns the one check macro per GPU library: CUDA_CHECK (runtime), CUDNN_CHECK, CUBLAS_CHECK, NCCL_CHECK. A failed
// call throws ringtrain::Error (ExitCode::library) naming the call as written, file:line, this process
// (process_label()) and the library's own words (cudaGetErrorString, cudnnGetErrorString,
// cublasGetStatusString, ncclGetErrorString + ncclGetLastError).
//
// Statuses travel as int: every one of these libraries reports success as 0 (static_assert'ed in
// cuda_check.cpp), so this header needs no CUDA include path and host-only code can use the macros.
#pragma once

namespace ringtrain::kernels::cuda {

[[noreturn]] void cuda_failed(int status, const char* call, const char* file, int line);
[[noreturn]] void cudnn_failed(int status, const char* call, const char* file, int line);
[[noreturn]] void cublas_failed(int status, const char* call, const char* file, int line);
[[noreturn]] void nccl_failed(int status, const char* call, const char* file, int line);

// "cudaErrorMemoryAllocation: out of memory"; never throws.
const char* cuda_error_name(int status) noexcept;
const char* cuda_error_text(int status) noexcept;

}  // namespace ringtrain::kernels::cuda

#define RT_GPU_CHECK_(failed, call)                                                   \
  do {                                                                                \
    const int rt_gpu_status_ = static_cast<int>(call);                                \
    if (rt_gpu_status_ != 0)                                                          \
      ::ringtrain::kernels::cuda::failed(rt_gpu_status_, #call, __FILE__, __LINE__);  \
  } while (0)

#define CUDA_CHECK(call) RT_GPU_CHECK_(cuda_failed, call)
#define CUDNN_CHECK(call) RT_GPU_CHECK_(cudnn_failed, call)
#define CUBLAS_CHECK(call) RT_GPU_CHECK_(cublas_failed, call)
#define NCCL_CHECK(call) RT_GPU_CHECK_(nccl_failed, call)
